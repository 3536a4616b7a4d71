// HubSpot's daily limit: a fetch that meets it is parked until the reset with
// its attempt given back and the reason on the job and the run; after the
// reset it resumes from its checkpoint and completes. Ten-second limits keep
// going through the shared budget (tests/fetch-job.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, jobOfType, runOf, startFetchRun } from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
beforeAll(async () => {
  // A daily quota of 12 requests per token: the fetch below needs 20 pages.
  sim = await startHubSpotSimulator({ rateLimit: { daily: 12 } });
});
afterAll(async () => {
  await sim?.close();
});

describe("HubSpot's daily limit", () => {
  it('parks the job until the reset without using an attempt, says why, and resumes after the reset', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 2_000 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts'], 3);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });

    // Several invocations while the quota is spent: the parked job is not even claimed again.
    for (let i = 0; i < 3; i++) {
      const s = await runWorkerInvocation(rt, `daily-${i}`);
      expect(s).toMatchObject({ failed: 0, retried: 0, lost: 0 });
      expect(s.claimed).toBe(i === 0 ? 1 : 0);
    }
    const parked = await jobOfType(db.sql, runId, 'blog_posts');
    expect(parked).toMatchObject({ status: 'pending', attempts: 0 });
    expect(parked.waiting_reason).toMatch(/^waiting for HubSpot's daily limit until \d{4}-\d\d-\d\dT00:00:00\.000Z$/);
    expect((parked.run_after as Date).getTime()).toBeGreaterThan(Date.now() + 60_000);
    expect(parked.progress_done as number).toBeGreaterThan(0);
    expect(parked.progress_done as number).toBeLessThan(2_000);
    expect((await runOf(db.sql, runId)).waiting_reason).toBe(parked.waiting_reason);

    // Midnight: HubSpot forgets the day's usage, and the job's time has come (back-dated, not slept).
    // Our budget's record of the day (HubSpot's Daily-Remaining 0) is yesterday's by then.
    sim.resetDailyLimits();
    await db.sql`update private.hubspot_request_budgets set daily_seen_at = daily_seen_at - interval '1 day' where hubspot_portal_id = ${p.hubspotPortalId}`;
    await db.sql`update public.jobs set run_after = now() where id = ${parked.id as string}`;
    const after = await runWorkerInvocation(rt, 'after-reset');
    expect(after).toMatchObject({ claimed: 1, completed: 1 });
    const job = await jobOfType(db.sql, runId, 'blog_posts');
    expect(job).toMatchObject({ status: 'completed', attempts: 1, progress_done: 2_000, waiting_reason: null });
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed', waiting_reason: null });
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  });
});
