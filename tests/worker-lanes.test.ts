// Lanes that follow the work: an invocation starts `lanes` lanes
// and adds one while every lane is busy and a claim would find more, up to
// `maxLanes`; at that many, with work still due, it asks for another
// invocation (`moreWork`), and the handler starts one only below the cap.
// Real invocations against real Postgres and the simulator.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHandler } from '../functions/worker/handler.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { manualPlatform } from '../shared/edge-platform.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, runOf, startFetchRun, stopAllRuns } from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
beforeAll(async () => {
  // Each answer 60 ms after its request: a job waits on HubSpot, as against the real API.
  sim = await startHubSpotSimulator({ latencyMs: 60 });
});
afterEach(async () => {
  await stopAllRuns(db.sql);
  await db.sql`update private.worker_settings set max_concurrent_invocations = 4`;
  await db.sql`delete from private.worker_invocations`;
});
afterAll(async () => {
  await sim?.close();
});

/** `n` portals with one small fetch job each. */
async function dueJobs(n: number): Promise<string[]> {
  const runs: string[] = [];
  for (let i = 0; i < n; i++) runs.push(await startFetchRun(db.sql, await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 5 } }), ['blog_tags']));
  return runs;
}

/** Distinct lanes (worker ids) that completed the runs' jobs. */
async function lanesUsed(runIds: string[]): Promise<number> {
  const [row] = await db.sql`select count(distinct worker_id)::int as n from public.jobs where run_id = any(${runIds}::uuid[]) and status = 'completed'`;
  return row!.n as number;
}

describe('lanes that follow the work', () => {
  it('grows from one lane while every lane is busy and more work is due, never past maxLanes', async () => {
    const runs = await dueJobs(12);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1, maxLanes: 6, lingerMs: 0 });
    const summary = await runWorkerInvocation(rt, 'growing');
    expect(summary).toMatchObject({ claimed: 12, completed: 12, failed: 0, lost: 0 });
    expect(summary.lanes).toBeGreaterThan(1);
    expect(summary.lanes).toBeLessThanOrEqual(6);
    const used = await lanesUsed(runs);
    expect(used).toBeGreaterThan(1);
    expect(used).toBeLessThanOrEqual(6);
    for (const r of runs) expect(await runOf(db.sql, r)).toMatchObject({ status: 'completed' });
  });

  it('stays at one lane when one job is due, and asks for no other invocation', async () => {
    const runs = await dueJobs(1);
    let asked = 0;
    const rt = { ...(await testWorkerRuntime(db.sql, sim.url, { lanes: 1, maxLanes: 6, lingerMs: 0 })), moreWork: () => (asked++, true) };
    const summary = await runWorkerInvocation(rt, 'alone');
    expect(summary).toMatchObject({ claimed: 1, completed: 1, lanes: 1, moreWorkAsked: 0 });
    expect(asked).toBe(0);
    expect(await lanesUsed(runs)).toBe(1);
  });

  it('maxLanes unset: the lanes stay at the lanes it starts with', async () => {
    const runs = await dueJobs(8);
    const summary = await runWorkerInvocation(await testWorkerRuntime(db.sql, sim.url, { lanes: 2, lingerMs: 0 }), 'fixed');
    expect(summary).toMatchObject({ claimed: 8, completed: 8, lanes: 2 });
    expect(await lanesUsed(runs)).toBeLessThanOrEqual(2);
  });

  it('at maxLanes with work still due, asks for another invocation', async () => {
    await dueJobs(16);
    let asked = 0;
    const rt = { ...(await testWorkerRuntime(db.sql, sim.url, { lanes: 2, maxLanes: 2, lingerMs: 0 })), moreWork: () => (asked++, true) };
    const summary = await runWorkerInvocation(rt, 'full');
    expect(summary).toMatchObject({ claimed: 16, completed: 16, lanes: 2 });
    expect(asked).toBeGreaterThan(0);
    expect(summary.moreWorkAsked).toBe(asked);
  });
});

describe('another invocation beside a full one', () => {
  const SECRET = 'worker-secret-lanes-0123456789abcdef';
  /** A handler whose continuation POSTs are recorded (and answered 202) instead of sent. */
  async function handlerWithPosts(settings: Parameters<typeof testWorkerRuntime>[2]) {
    const posts: string[] = [];
    const platform = manualPlatform();
    const handler = createWorkerHandler({
      ...(await testWorkerRuntime(db.sql, sim.url, settings)), platform, acceptedSecrets: [SECRET],
      continuation: { url: 'http://127.0.0.1:9/functions/v1/worker', secret: SECRET },
      fetch: async (_url, init) => {
        posts.push(JSON.parse(String(init?.body)).source as string);
        return new Response('{}', { status: 202 });
      },
    });
    const invoke = async () => {
      const res = await handler(new Request('http://127.0.0.1/functions/v1/worker', {
        method: 'POST', headers: { Authorization: `Bearer ${SECRET}`, 'Content-Type': 'application/json' }, body: '{"source":"test"}',
      }));
      const body = await res.json();
      await platform.settled();
      return body as Record<string, unknown>;
    };
    return { posts, invoke };
  }

  it('starts one (source more_work) while fewer invocations than the cap run', async () => {
    await dueJobs(16);
    const { posts, invoke } = await handlerWithPosts({ lanes: 2, maxLanes: 2, lingerMs: 0 });
    const summary = await invoke();
    expect(summary).toMatchObject({ claimed: 16, completed: 16 });
    expect(summary.moreWorkAsked).toBeGreaterThan(0);
    expect(posts).toContain('more_work');
  });

  it('starts none at the cap: the invocations running take the work', async () => {
    await dueJobs(16);
    await db.sql`update private.worker_settings set max_concurrent_invocations = 2`;
    await db.sql`select public.begin_worker_invocation(gen_random_uuid(), 'other', 60)`; // one other invocation runs: this one makes the cap
    const { posts, invoke } = await handlerWithPosts({ lanes: 2, maxLanes: 2, lingerMs: 0 });
    const summary = await invoke();
    expect(summary).toMatchObject({ claimed: 16, completed: 16 });
    expect(summary.moreWorkAsked).toBeGreaterThan(0);
    expect(posts).not.toContain('more_work');
  });
});
