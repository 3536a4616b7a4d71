// Releases that must land: a job handed back at `beforeunload` while its COPY
// still holds the isolate's only connection, and a job whose unit of work
// never fits an invocation (released again and again without progress) ends
// failed with a message an operator can act on instead of looping.
import { describe, expect, it } from 'vitest';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { runWorkerInvocation, type InvocationSummary } from '../functions/worker/invocation.ts';
import { manualPlatform } from '../shared/edge-platform.ts';
import { createLogger } from '../shared/log.ts';
import { createRun } from '../shared/sql/runs.ts';
import { useWorkerSuite } from './support/worker-suite.ts';
import { connectSimPortal, jobOfType, runOf, startFetchRun, stopAllRuns, waitUntil } from './support/fetch-fixtures.ts';
import { wrapSink } from './support/sink-wrapper.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const suite = useWorkerSuite();
const db = suite.db;

describe('release', () => {
  it('beforeunload while a COPY holds the only connection: the job is released (no attempt used), never left held', async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { site_pages: 2_000 } });
    const fetchRun = await startFetchRun(db.sql, p, ['site_pages']);
    expect(await runWorkerInvocation(await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 1 }), 'fetcher')).toMatchObject({ completed: 1 });
    expect(await runOf(db.sql, fetchRun)).toMatchObject({ status: 'completed' });

    // One connection, as in an isolate (DB_POOL_MAX=1); the sink stalls each write, so the COPY is mid-stream for a while.
    const sql = db.connect(1);
    const warnings: string[] = [];
    const log = createLogger({ write: (line) => (line.includes('"level":"info"') ? undefined : warnings.push(line)) });
    const base = await testWorkerRuntime(sql, suite.sim.url, { lanes: 1 }, log);
    let writes = 0;
    const slowSink = wrapSink(localDirectorySink(base.exportDir), (w) => ({
      write: async (chunk) => {
        writes++;
        await sleep(150);
        await w.write(chunk);
      },
    }));
    for (let round = 0; round < 4; round++) {
      const exp = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'export', contentTypes: ['site_pages'] });
      const platform = manualPlatform();
      const invocation = runWorkerInvocation({ ...base, exportSink: slowSink, platform }, `exporter-${round}`);
      const before = writes;
      await waitUntil(() => writes > before + round % 2, 20_000, 'the COPY is streaming');
      platform.shutDown('cpu');
      const summary = await invocation;
      expect(summary, `round ${round}`).toMatchObject({ claimed: 1, released: 1, lost: 0, failed: 0, stopReason: 'shutdown' });
      expect(await jobOfType(db.sql, exp.runId!, 'site_pages'), `round ${round}`).toMatchObject({ status: 'pending', attempts: 0, lease_expires_at: null });
      await stopAllRuns(db.sql);
    }
    // The release waited for the cancelled COPY to let go of the connection: it never met it mid-copy.
    expect(warnings.filter((w) => /COPY_IN_PROGRESS|during copy/.test(w))).toEqual([]);
  });

  it('a unit of work that never fits: after max_stalled_releases releases without progress the job fails with an actionable message, once', async () => {
    const [{ max }] = (await db.sql`select max_stalled_releases as max from private.job_kinds where kind = 'fetch'`) as unknown as [{ max: number }];
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_posts: 500 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    // Every page takes 5 s, and every isolate gets beforeunload 100 ms into its job: no page is ever saved.
    suite.sim.setFaults({ slowMs: 5_000 });
    const rt = await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 1 });
    const summaries: InvocationSummary[] = [];
    for (let i = 0; i <= max + 1; i++) {
      const platform = manualPlatform();
      const invocation = runWorkerInvocation({ ...rt, platform }, `stalled-${i}`);
      const claimed = await Promise.race([
        waitUntil(async () => (await jobOfType(db.sql, runId, 'blog_posts')).status === 'running', 10_000, 'claimed').then(() => true),
        invocation.then(() => false),
      ]);
      if (claimed) {
        await sleep(100);
        platform.shutDown('cpu');
      }
      summaries.push(await invocation);
    }
    // max + 1 claims: the first release sets the mark, each of the next max finds no progress; the last fails the job.
    expect(summaries.slice(0, max).every((s) => s.claimed === 1 && s.released === 1 && s.failed === 0)).toBe(true);
    expect(summaries[max]).toMatchObject({ claimed: 1, released: 0, failed: 1, lost: 0 });
    expect(summaries[max + 1]).toMatchObject({ claimed: 0 });
    const job = await jobOfType(db.sql, runId, 'blog_posts');
    expect(job).toMatchObject({ status: 'failed', attempts: 1, progress_done: 0, stalled_releases: max });
    expect(job.last_error).toMatch(/without progress.*needs more CPU or wall clock than a worker invocation has/);
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'failed' });
    expect(await db.sql`select 1 from public.notifications where run_id = ${runId}`).toHaveLength(1);
  });
});
