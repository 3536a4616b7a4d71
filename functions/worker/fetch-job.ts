// The fetch job: pages one content type from HubSpot into Postgres. Each page is
// saved in one fenced transaction with its cursor, so a reclaimed job resumes
// where the last saved page ended; when the budget runs out it releases.
import { BudgetWaitPastDeadline } from '../../shared/hubspot-budget.ts';
import { completeFetchJob, releaseJob, saveFetchedPage } from '../../shared/queue.ts';
import type { JobContext, JobOutcome } from './job-context.ts';

/** The checkpoint a fetch job keeps: HubSpot's next cursor, and whether the last page was saved. */
export interface FetchCheckpoint {
  after: string | null;
  finished: boolean;
}

export function parseFetchCheckpoint(value: unknown): FetchCheckpoint {
  if (value && typeof value === 'object') {
    const v = value as Record<string, unknown>;
    return { after: typeof v.after === 'string' ? v.after : null, finished: v.finished === true };
  }
  return { after: null, finished: false };
}

/** Keeps a moving estimate of how long one page takes (fetch + save). */
class PageTimer {
  private avgMs = 0;
  private samples = 0;
  record(ms: number) {
    this.samples++;
    this.avgMs = this.samples === 1 ? ms : this.avgMs * 0.7 + ms * 0.3;
  }
  /** Time to keep in reserve before starting another page. */
  reserveMs(): number {
    return Math.max(3_000, this.avgMs * 3);
  }
}

/** Runs a fetch job until done, out of time (released) or fenced off (lost). */
export async function processFetchJob(ctx: JobContext): Promise<JobOutcome> {
  const { sql, job, signal } = ctx;
  const hubspot = await ctx.hubspotForPortal(job.portalId);
  let checkpoint = parseFetchCheckpoint(job.checkpoint);
  const timer = new PageTimer();
  let pages = 0;

  while (!checkpoint.finished) {
    if (signal.aborted) return { kind: 'lost', reason: 'lease lost' };
    // The first page after a claim always runs (the invocation checked its start
    // margin), so every claim makes progress and a release can never loop idle.
    if (pages > 0 && ctx.timeLeft() < timer.reserveMs()) {
      const released = await releaseJob(sql, job);
      return released ? { kind: 'released', reason: 'time budget' } : { kind: 'lost', reason: 'lease lost before release' };
    }
    const started = ctx.now();
    let page;
    try {
      page = await hubspot.fetchPage(job.contentType, checkpoint.after);
    } catch (e) {
      if (!(e instanceof BudgetWaitPastDeadline)) throw e;
      const released = await releaseJob(sql, job);
      return released ? { kind: 'released', reason: 'HubSpot budget wait past the deadline' } : { kind: 'lost', reason: 'lease lost before release' };
    }
    if (signal.aborted) return { kind: 'lost', reason: 'lease lost' };
    const next: FetchCheckpoint = { after: page.nextCursor, finished: page.nextCursor === null };
    const counts = await saveFetchedPage(sql, job, page.items, next);
    if (!counts) return { kind: 'lost', reason: 'fenced off while saving a page' };
    timer.record(ctx.now() - started);
    checkpoint = next;
    pages++;
  }
  ctx.log.info('fetch_pages_done', { pages });
  const completed = await completeFetchJob(sql, job);
  return completed ? { kind: 'completed' } : { kind: 'lost', reason: 'fenced off at completion' };
}
