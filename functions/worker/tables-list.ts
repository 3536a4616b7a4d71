// The HubDB tables list of a fetch run, read once for its hubdb_tables and
// hubdb_rows jobs whichever comes first (docs/decisions/0045): the first to
// need it reads it under a read lease and stores it for the run; the other
// uses the stored pages, waiting while the reader reads. A list of another
// run is never used (take_hubdb_tables_list takes its row over).
import type { TablesListSource } from '../../shared/hubspot/hubdb-rows.ts';
import { storeHubdbTablesList, takeHubdbTablesList } from '../../shared/sql/fetch.ts';
import type { JobContext } from './job-context.ts';

/** How long a reader holds the read lease: past it, a waiting job reads the list itself. */
export const TABLES_LIST_READ_SECONDS = 20;
/** Wall clock a waiting job keeps for its own read: with less left it reads rather than waits. */
const KEEP_FOR_READ_MS = 5_000;
const MAX_PAUSE_MS = 400;

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The job's source of its run's tables list (for fetchRawPage). */
export function runTablesList(ctx: Pick<JobContext, 'sql' | 'job' | 'signal' | 'timeLeft'>): TablesListSource {
  const { sql, job, signal } = ctx;
  return async (read) => {
    for (let wait = 25; ; wait = Math.min(wait * 2, MAX_PAUSE_MS)) {
      const taken = await takeHubdbTablesList(sql, job, TABLES_LIST_READ_SECONDS);
      // Fenced off: read alone (nothing this job fetches will be saved).
      if (taken === null) return read();
      if (taken.decision === 'use') return taken.pages;
      if (taken.decision === 'wait' && ctx.timeLeft() - wait > KEEP_FOR_READ_MS && !signal.aborted) {
        await pause(Math.min(wait, taken.waitMs), signal);
        continue;
      }
      // Ours to read (or no time left to wait for the reader): stored for the run, unless another job stored first.
      let pages: string[];
      try {
        pages = await read();
      } catch (e) {
        await storeHubdbTablesList(sql, job, null).catch(() => null); // the read lease back, for the other job
        throw e;
      }
      return (await storeHubdbTablesList(sql, job, pages)) ?? pages;
    }
  };
}
