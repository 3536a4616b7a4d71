// A HubSpot outage mid-fetch, ridden out: the worker (in process) fetches
// from the simulator through a proxy that goes down (every connection
// refused) and comes back. The retry policy's times are scaled down through
// its one setting (private.job_kinds: retry_for_seconds, with the backoff
// bounds) so the default suite takes seconds: HubSpot down for 6 s against a
// give-up time of 60 s is the 3-minute outage against 30 minutes, at 1/30.
// The policy's waits themselves are pinned by back-dating in
// tests/queue-leases.test.ts; a real 3-minute outage with the real policy is
// tests/browser-outage.test.ts with OUTAGE_SECONDS=180 (opt-in).
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import type { ContentType } from '../shared/content-types.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, jobsOf, runOf, sleep, startFetchRun, stopAllRuns, type SimPortal } from './support/fetch-fixtures.ts';
import { startOutageProxy, type OutageProxy } from './support/outage-proxy.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let proxy: OutageProxy;
const TYPES: ContentType[] = ['blog_posts', 'site_pages', 'blog_tags'];
const UNAVAILABLE = /^HubSpot is temporarily unavailable: connection failed/;

beforeAll(async () => {
  sim = await startHubSpotSimulator({ latencyMs: 40 });
  proxy = await startOutageProxy(sim.url);
});
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
});
afterEach(async () => {
  await proxy.up();
  await stopAllRuns(db.sql);
  await db.sql`update private.job_kinds set retry_for_seconds = 1800, backoff_base_seconds = 10, backoff_max_seconds = 600 where kind = 'fetch'`;
});

/** The policy at another scale, in its one place. */
const policy = (retryForSeconds: number, baseSeconds: number, maxSeconds: number) =>
  db.sql`update private.job_kinds set retry_for_seconds = ${retryForSeconds}, backoff_base_seconds = ${baseSeconds}, backoff_max_seconds = ${maxSeconds}
         where kind = 'fetch'`;

/**
 * Worker invocations one after another (as cron and the worker's own continuation would), until the run ends;
 * `watch` reads the jobs every 100 ms meanwhile.
 */
async function driveUntilFinished(runId: string, timeoutMs: number, watch: () => Promise<void>): Promise<void> {
  const rt = await testWorkerRuntime(db.sql, proxy.url, { lanes: 3, budgetMs: 20_000 });
  const t0 = Date.now();
  let driving = true;
  const watching = (async () => {
    while (driving) {
      await watch();
      await sleep(100);
    }
  })();
  try {
    while (!(await runOf(db.sql, runId)).finished_at) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`run ${runId} not finished within ${timeoutMs} ms: ${JSON.stringify(await jobsOf(db.sql, runId))}`);
      await runWorkerInvocation(rt, `outage-${randomUUID().slice(0, 6)}`);
      await sleep(100);
    }
  } finally {
    driving = false;
    await watching;
  }
  await watch();
}

/** Takes HubSpot down once `blog_posts` has saved a page, for `ms`; resolves when it is back. */
async function outageMidFetch(runId: string, ms: number): Promise<{ downAt: number; upAt: number }> {
  for (;;) {
    const [row] = await db.sql`select progress_done from public.jobs where run_id = ${runId} and content_type = 'blog_posts'`;
    if ((row?.progress_done as number) > 0) break;
    await sleep(20);
  }
  await proxy.down();
  const downAt = Date.now();
  await sleep(ms);
  await proxy.up();
  return { downAt, upAt: Date.now() };
}

async function portal(): Promise<SimPortal> {
  return connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_500, site_pages: 600, blog_tags: 300 } });
}

describe('a HubSpot outage mid-fetch', () => {
  it('shorter than the give-up time: every job completes, its attempt never used by the outage, nothing missing', async () => {
    await policy(60, 1, 20); // 30 min / 30, 10 s (at least 1 s) and 600 s / 30
    const p = await portal();
    const runId = await startFetchRun(db.sql, p, TYPES, 3);
    const seen = { failedDuringOutage: [] as string[], retrying: new Set<string>(), maxAttempts: 0 };
    const watch = async () => {
      for (const j of await jobsOf(db.sql, runId)) {
        if (j.status === 'failed') seen.failedDuringOutage.push(`${j.content_type}: ${j.last_error}`);
        if (j.status === 'pending' && j.retry_until && UNAVAILABLE.test(String(j.last_error))) seen.retrying.add(j.content_type as string);
        seen.maxAttempts = Math.max(seen.maxAttempts, j.attempts as number);
      }
    };
    const [outage] = await Promise.all([outageMidFetch(runId, 6_000), driveUntilFinished(runId, 60_000, watch)]);

    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed', jobs_completed: 3, jobs_failed: 0 });
    expect(seen.failedDuringOutage).toEqual([]);
    expect(seen.retrying.has('blog_posts')).toBe(true); // it was mid-fetch when HubSpot went away, and was retried
    expect(seen.maxAttempts).toBe(1); // never more than the claim in hand: retries give their attempt back
    for (const j of await jobsOf(db.sql, runId)) expect(j, String(j.content_type)).toMatchObject({ status: 'completed', attempts: 1, max_attempts: 3 });
    const posts = (await jobsOf(db.sql, runId)).find((j) => j.content_type === 'blog_posts')!;
    expect(String(posts.last_error)).toMatch(UNAVAILABLE); // it did fail, and was not given up
    // Its give-up time was the setting's 60 s after the first failure, which came after HubSpot went down.
    expect((posts.retry_until as Date).getTime()).toBeGreaterThan(outage.downAt + 59_000);
    for (const t of TYPES) await expectSameAsSim(db.sql, sim, p, t);
  }, 90_000);

  it('longer than the give-up time: each job gives up that long after its first failure (not after N attempts); the failed types fetched again complete', async () => {
    await policy(3, 1, 1);
    const p = await portal();
    const runId = await startFetchRun(db.sql, p, TYPES, 3);
    let outage: Promise<{ downAt: number; upAt: number }> | null = null;
    await Promise.all([
      (outage = outageMidFetch(runId, 10_000)),
      driveUntilFinished(runId, 60_000, async () => {}),
    ]);
    const { downAt } = await outage;
    expect(proxy.isDown()).toBe(false); // the run ended while HubSpot was down; the outage has ended since
    const run = await runOf(db.sql, runId);
    expect(run.jobs_failed).toBeGreaterThan(0);
    expect((run.finished_at as Date).getTime()).toBeLessThan(downAt + 10_000);
    const failed = (await jobsOf(db.sql, runId)).filter((j) => j.status === 'failed');
    for (const j of failed) {
      expect(String(j.last_error)).toMatch(UNAVAILABLE);
      expect(j.attempts).toBe(1); // given up by time, with attempts to spare
      // Failed at its give-up time (its last try) or after it, never before; the give-up time 3 s after its first failure.
      expect((j.finished_at as Date).getTime()).toBeGreaterThanOrEqual((j.retry_until as Date).getTime());
      expect((j.retry_until as Date).getTime()).toBeGreaterThanOrEqual(downAt + 3_000);
    }
    // HubSpot is back: the failed types fetched again (the page's "Retry failed types") complete.
    const again = await startFetchRun(db.sql, p, failed.map((j) => j.content_type as ContentType));
    await driveUntilFinished(again, 60_000, async () => {});
    expect(await runOf(db.sql, again)).toMatchObject({ status: 'completed' });
    for (const t of TYPES) await expectSameAsSim(db.sql, sim, p, t);
  }, 90_000);
});
