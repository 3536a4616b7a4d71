// Lingering: an invocation's idle lanes keep looking for work (one poll per
// isolate, shared by its invocations) while a sibling lane is busy and for
// lingerMs after the invocation's last job, so work arriving meanwhile starts
// without a wake-up request or a new isolate. With lingerMs 0 an invocation
// stops at the first empty claim, as before.
import { describe, expect, it } from 'vitest';
import { runWorkerInvocation, type InvocationSummary } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { useWorkerSuite } from './support/worker-suite.ts';
import { connectSimPortal, jobOfType, jobsOf, runOf, sleep, startFetchRun, waitUntil } from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const suite = useWorkerSuite();
const db = suite.db;

/** Resolves when the promise has settled, or after `ms` with false. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return await Promise.race([p.then(() => true, () => true), sleep(ms).then(() => false)]);
}

describe('lingering invocations', () => {
  it('an invocation lingering on an empty queue takes a run created meanwhile', async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_tags: 30 } });
    const rt = await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 2, lingerMs: 3_000 });
    const invocation = runWorkerInvocation(rt, 'lingering');
    // Still there after its first (empty) claim.
    expect(await settledWithin(invocation, 300)).toBe(false);
    const runId = await startFetchRun(db.sql, p, ['blog_tags']);
    const summary = await invocation;
    expect(summary).toMatchObject({ claimed: 1, completed: 1, stopReason: 'queue_empty' });
    const job = await jobOfType(db.sql, runId, 'blog_tags');
    expect(job).toMatchObject({ status: 'completed', attempts: 1 });
    expect(String(job.worker_id)).toMatch(/^lingering\//);
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
  });

  it('lingerMs 0: an invocation stops at the first empty claim and leaves later work to the next one', async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_tags: 30 } });
    const rt = await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 2, lingerMs: 0 });
    const summary = await runWorkerInvocation(rt, 'no-linger');
    expect(summary).toMatchObject({ claimed: 0, stopReason: 'queue_empty' });
    const runId = await startFetchRun(db.sql, p, ['blog_tags']);
    await sleep(200);
    expect(await jobOfType(db.sql, runId, 'blog_tags')).toMatchObject({ status: 'pending', attempts: 0 });
  });

  it('a lane idle while its sibling runs a long job takes a new run at once, before that job ends', async () => {
    const big = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_posts: 2_500 } });
    const small = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_tags: 30 } });
    const bigRun = await startFetchRun(db.sql, big, ['blog_posts']);
    suite.sim.setFaults({ slowMs: 40 }); // ~25 pages at 40 ms or more: a job of a second or so
    // A short linger: only the busy sibling keeps the idle lane looking.
    const rt = await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 2, lingerMs: 50 });
    const invocation = runWorkerInvocation(rt, 'busy-sibling');
    await waitUntil(async () => ((await jobOfType(db.sql, bigRun, 'blog_posts')).progress_done as number) >= 200, 20_000, 'the long job under way');
    await sleep(150); // past lingerMs since the idle lane's empty claim
    const smallRun = await startFetchRun(db.sql, small, ['blog_tags']);
    await waitUntil(async () => (await runOf(db.sql, smallRun)).status === 'completed', 10_000, 'the small run completed');
    const bigJob = await jobOfType(db.sql, bigRun, 'blog_posts');
    expect(bigJob.status).toBe('running');
    expect(String((await jobOfType(db.sql, smallRun, 'blog_tags')).worker_id)).toMatch(/^busy-sibling\//);
    suite.sim.clearFaults();
    const summary = await invocation;
    expect(summary).toMatchObject({ claimed: 2, completed: 2, failed: 0, lost: 0 });
    expect(await runOf(db.sql, bigRun)).toMatchObject({ status: 'completed' });
  });

  it('lingering invocations on three pools share two new runs: every job claimed once, all completed', async () => {
    const portals = [
      await connectSimPortal(db.sql, suite.sim, { sizes: { site_pages: 40, landing_pages: 40, blog_posts: 40, blog_authors: 40, blog_tags: 40, hubdb_tables: 2, hubdb_rows: 40, url_redirects: 40 } }),
      await connectSimPortal(db.sql, suite.sim, { sizes: { site_pages: 40, landing_pages: 40, blog_posts: 40, blog_authors: 40, blog_tags: 40, hubdb_tables: 2, hubdb_rows: 40, url_redirects: 40 } }),
    ];
    // Two invocations per pool (an isolate each), all idle and lingering before any work exists.
    const invocations: Promise<InvocationSummary>[] = [];
    for (let pool = 0; pool < 3; pool++) {
      const sql = db.connect(2);
      const rt = await testWorkerRuntime(sql, suite.sim.url, { lanes: 2, lingerMs: 1_500 });
      for (let i = 0; i < 2; i++) invocations.push(runWorkerInvocation(rt, `pool-${pool}-inv-${i}`));
    }
    await sleep(200);
    const runIds = await Promise.all(portals.map((p) => startFetchRun(db.sql, p, CONTENT_TYPES)));
    const summaries = await Promise.all(invocations);
    expect(summaries.reduce((n, s) => n + s.claimed, 0)).toBe(16);
    expect(summaries.reduce((n, s) => n + s.completed, 0)).toBe(16);
    expect(summaries.every((s) => s.failed === 0 && s.lost === 0 && s.retried === 0 && s.released === 0)).toBe(true);
    // More than one isolate took part: the poll is per pool, not one winner for everything.
    expect(summaries.filter((s) => s.claimed > 0).length).toBeGreaterThan(1);
    for (const runId of runIds) {
      expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
      const jobs = await jobsOf(db.sql, runId);
      expect(jobs).toHaveLength(CONTENT_TYPES.length);
      expect(jobs.every((j) => j.status === 'completed' && j.attempts === 1)).toBe(true);
    }
  });
});
