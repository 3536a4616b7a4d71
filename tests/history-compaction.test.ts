// History proportional to what happened: a scheduled cycle that completed
// having changed nothing (a quiet cycle) is marked runs.quiet at settlement;
// beyond the portal's last keep_quiet_cycles (3) it is folded into the
// portal's day row of public.quiet_cycles and its run and jobs deleted, once
// quiet_cycles_per_fold of them have gathered (1 in most tests here). Cycles
// with changes, failures and runs a person started stay, and so does what a
// user reads: GET /sync (last sync, marks), the runs list and the change feed.
// Concurrency on many real connections: no roll-up count lost, no deadlock.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ContentType } from '../shared/content-types.ts';
import { asUser, type Sql } from '../shared/db.ts';
import { claimJobs, completeJob, completeJobs, failJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue } from './support/queue-fixtures.ts';
import { connectSimPortal, invokeUntilFinished, runOf, stopAllRuns } from './support/fetch-fixtures.ts';
import { orchestratorHarness, type OrchestratorHarness } from './support/orchestrator-harness.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const TYPES: ContentType[] = ['site_pages', 'blog_posts', 'url_redirects'];
// A new private-app portal runs at most 4 fetch jobs at once (its portal cap).
const CAP = 4;
const ALL_TYPES: ContentType[] = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects'];

type Portal = { userId: string; portalId: string };
type Outcome = { trigger?: 'user' | 'schedule'; added?: number; fail?: boolean; types?: readonly ContentType[] };

/** One fetch cycle of the portal run to its end by hand: every job completed (10 items checked each), `added` on the first, or the first failed. */
async function cycle(p: Portal, o: Outcome = {}): Promise<string> {
  const types = o.types ?? TYPES;
  const r = await createRun(db.sql, {
    portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: 'incremental', trigger: o.trigger ?? 'schedule',
  });
  expect(r.createdTypes.sort()).toEqual([...types].sort());
  const jobs = await claimJobs(db.sql, 'compaction-test', types.length);
  expect(jobs.map((j) => j.runId).every((id) => id === r.runId)).toBe(true);
  for (const [i, j] of jobs.entries()) {
    if (o.fail && i === 0) expect(await failJob(db.sql, j, 'HubSpot said no', false)).toBe('failed');
    else expect(await completeJob(db.sql, j, { mode: 'incremental', fetched: 10, added: i === 0 ? (o.added ?? 0) : 0, updated: 0, deleted: 0 })).toBe(true);
  }
  return r.runId!;
}

async function runsOf(p: Portal) {
  return db.sql`select id, status, trigger, quiet, finished_at from public.runs where portal_id = ${p.portalId} order by created_at`;
}

async function rollups(p: Portal) {
  return db.sql`select day::text, cycles, jobs, items_checked::int, first_finished_at, last_finished_at
                  from public.quiet_cycles where portal_id = ${p.portalId} order by day`;
}

async function jobCount(p: Portal): Promise<number> {
  const [row] = await db.sql`select count(*)::int as n from public.jobs where portal_id = ${p.portalId}`;
  return row!.n as number;
}

async function notificationCount(p: Portal): Promise<number> {
  const [row] = await db.sql`select count(*)::int as n from public.notifications where user_id = ${p.userId}`;
  return row!.n as number;
}

beforeEach(async () => {
  await drainQueue(db.sql);
  // Each quiet cycle folds at once here (the default gathers 8 first: the test of that below).
  await db.sql`update private.retention_settings set keep_quiet_cycles = 3, quiet_cycles_per_fold = 1`;
});

describe('quiet cycles', () => {
  it('are kept in full for the last 3 and folded into the portal\'s day roll-up before that; they notify nobody', async () => {
    const p = await createUserWithPortal(db.sql);
    const ids = [];
    for (let i = 0; i < 7; i++) ids.push(await cycle(p));
    const runs = await runsOf(p);
    expect(runs.map((r) => r.id)).toEqual(ids.slice(-3));
    expect(runs.every((r) => r.quiet && r.status === 'completed')).toBe(true);
    expect(await jobCount(p)).toBe(3 * TYPES.length);
    const [today] = await db.sql`select (now() at time zone 'UTC')::date::text as d`;
    const rows = await rollups(p);
    expect(rows.map(({ day, cycles, jobs, items_checked }) => ({ day, cycles, jobs, items_checked }))).toEqual([
      { day: today!.d, cycles: 4, jobs: 4 * TYPES.length, items_checked: 4 * TYPES.length * 10 },
    ]);
    expect((rows[0]!.first_finished_at as Date).getTime()).toBeLessThanOrEqual((rows[0]!.last_finished_at as Date).getTime());
    expect(await notificationCount(p)).toBe(0);
  });

  it('cycles with changes, failures and runs a person started stay; only quiet ones are folded', async () => {
    const p = await createUserWithPortal(db.sql);
    await cycle(p);
    await cycle(p);
    const changed = await cycle(p, { added: 2 });
    const failed = await cycle(p, { fail: true });
    const user = await cycle(p, { trigger: 'user' });
    for (let i = 0; i < 5; i++) await cycle(p);
    const runs = await runsOf(p);
    expect(runs.filter((r) => !r.quiet).map((r) => r.id)).toEqual([changed, failed, user]);
    expect(runs.filter((r) => r.quiet)).toHaveLength(3);
    expect((await rollups(p)).map((r) => r.cycles)).toEqual([7 - 3]);
    // The run a person started changed nothing either: not quiet, kept, and notified.
    expect((await runOf(db.sql, user)).quiet).toBe(false);
  });

  it('fold into the day they finished, and keep as many as keep_quiet_cycles says', async () => {
    const p = await createUserWithPortal(db.sql);
    for (let i = 0; i < 3; i++) await cycle(p);
    await db.sql`update public.runs set finished_at = finished_at - interval '1 day' where portal_id = ${p.portalId}`;
    await db.sql`update private.retention_settings set keep_quiet_cycles = 1`;
    for (let i = 0; i < 3; i++) await cycle(p);
    const [d] = await db.sql`select (now() at time zone 'UTC')::date::text as today, ((now() - interval '1 day') at time zone 'UTC')::date::text as yesterday`;
    expect((await rollups(p)).map((r) => [r.day, r.cycles])).toEqual([[d!.yesterday, 3], [d!.today, 2]]);
    expect(await runsOf(p)).toHaveLength(1);
  });

  it('gather quiet_cycles_per_fold beyond the kept ones, then fold together; the last keep_quiet_cycles always stay', async () => {
    const p = await createUserWithPortal(db.sql);
    await db.sql`update private.retention_settings set quiet_cycles_per_fold = 4`;
    const ids = [];
    for (let i = 0; i < 3 + 3; i++) ids.push(await cycle(p));
    // 3 kept and 3 gathered: nothing folded yet.
    expect((await runsOf(p)).map((r) => r.id)).toEqual(ids);
    expect(await rollups(p)).toEqual([]);
    // The 4th beyond the kept ones: all 4 folded in one call, the last 3 left.
    ids.push(await cycle(p));
    expect((await runsOf(p)).map((r) => r.id)).toEqual(ids.slice(-3));
    expect((await rollups(p)).map((r) => [r.cycles, r.jobs])).toEqual([[4, 4 * TYPES.length]]);
    expect(await jobCount(p)).toBe(3 * TYPES.length);
    // And again from 3: three more gather, the fourth folds them.
    for (let i = 0; i < 3; i++) ids.push(await cycle(p));
    expect(await runsOf(p)).toHaveLength(6);
    ids.push(await cycle(p));
    expect((await runsOf(p)).map((r) => r.id)).toEqual(ids.slice(-3));
    expect((await rollups(p)).map((r) => r.cycles)).toEqual([8]);
  });

  it('a failing scheduled cycle is no quiet cycle, nor one stopped by a person', async () => {
    const p = await createUserWithPortal(db.sql);
    await cycle(p, { fail: true });
    const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: TYPES, fetchMode: 'incremental', trigger: 'schedule' });
    await db.sql`select public.stop_run(${r.runId!})`;
    expect((await runsOf(p)).map((x) => [x.status, x.quiet])).toEqual([['partially_failed', false], ['stopped', false]]);
  });

  it('roll-ups of days past keep_finished are pruned by retention; recent ones stay', async () => {
    const p = await createUserWithPortal(db.sql);
    for (let i = 0; i < 4; i++) await cycle(p);
    await db.sql`insert into public.quiet_cycles (portal_id, owner_id, day, cycles, jobs, items_checked, first_finished_at, last_finished_at)
                 values (${p.portalId}, ${p.userId}, (now() - interval '40 days')::date, 5, 15, 150, now() - interval '40 days', now() - interval '40 days')`;
    const [r] = await db.sql`select public.prune_queue_history() as r`;
    expect(r!.r).toMatchObject({ quiet_cycles: 1 });
    expect((await rollups(p)).map((x) => x.cycles)).toEqual([1]);
  });

  it('roll-ups are readable by their owner only (RLS), and nobody but the service role writes them', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    for (let i = 0; i < 4; i++) await cycle(a);
    const claims = (sub: string) => ({ sub, role: 'authenticated', aud: 'authenticated' });
    expect(await asUser(db.sql, claims(a.userId), (tx) => tx`select cycles from public.quiet_cycles`)).toEqual([{ cycles: 1 }]);
    expect(await asUser(db.sql, claims(b.userId), (tx) => tx`select cycles from public.quiet_cycles`)).toEqual([]);
    await expect(asUser(db.sql, claims(a.userId), (tx) => tx`update public.quiet_cycles set cycles = 100`)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('quiet cycles settled at once on many connections', () => {
  it('lose no roll-up count and never deadlock (one portal, single-type runs at its cap of 4, each completed on its own connection)', async () => {
    const p = await createUserWithPortal(db.sql);
    const conns: Sql[] = Array.from({ length: CAP }, () => db.connect(1));
    const ROUNDS = 10;
    for (let round = 0; round < ROUNDS; round++) {
      const held: ClaimedJob[] = [];
      for (const type of ALL_TYPES.slice(0, CAP)) {
        const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: [type], fetchMode: 'incremental', trigger: 'schedule' });
        expect(r.createdTypes).toEqual([type]);
      }
      held.push(...(await claimJobs(db.sql, 'racer', CAP)));
      expect(held).toHaveLength(CAP);
      const done = await Promise.all(held.map((j, i) => completeJob(conns[i]!, j, { mode: 'incremental', fetched: 5, added: 0, updated: 0, deleted: 0 })));
      expect(done.every(Boolean)).toBe(true);
    }
    const quiet = ROUNDS * CAP;
    const [kept] = await db.sql`select count(*)::int as n from public.runs where portal_id = ${p.portalId} and quiet`;
    const [folded] = await db.sql`select coalesce(sum(cycles), 0)::int as n, coalesce(sum(items_checked), 0)::int as items from public.quiet_cycles where portal_id = ${p.portalId}`;
    expect(kept!.n + folded!.n).toBe(quiet);
    expect(folded!.items).toBe(folded!.n * 5);
    expect(kept!.n).toBeGreaterThanOrEqual(3);
    // A quiet cycle skips the runs others hold; the next one catches up to exactly the last 3.
    await cycle(p, { types: ['site_pages'] });
    const [after] = await db.sql`select count(*)::int as n from public.runs where portal_id = ${p.portalId} and quiet`;
    const [total] = await db.sql`select sum(cycles)::int as n from public.quiet_cycles where portal_id = ${p.portalId}`;
    expect(after!.n).toBe(3);
    expect(total!.n).toBe(quiet + 1 - 3);
  }, 60_000);

  it('complete_jobs batches finishing quiet cycles of several portals, in opposite orders on many connections, never deadlock', async () => {
    const portals = await Promise.all(Array.from({ length: 6 }, () => createUserWithPortal(db.sql)));
    const types = ALL_TYPES.slice(0, CAP);
    const conns: Sql[] = Array.from({ length: 6 }, () => db.connect(1));
    const ROUNDS = 5;
    for (let round = 0; round < ROUNDS; round++) {
      for (const p of portals) {
        await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: 'incremental', trigger: 'schedule' });
      }
      const held = await claimJobs(db.sql, 'batcher', portals.length * CAP);
      expect(held).toHaveLength(portals.length * CAP);
      // Six batches, each a slice of every portal's jobs; odd ones list the portals in reverse.
      const batches = conns.map((_, b) => held.filter((_, i) => i % conns.length === b));
      const counts = await Promise.all(batches.map((batch, b) => completeJobs(conns[b]!, b % 2 ? [...batch].reverse() : batch)));
      expect(counts.reduce((a, n) => a + n, 0)).toBe(held.length);
    }
    for (const p of portals) {
      const [kept] = await db.sql`select count(*)::int as n from public.runs where portal_id = ${p.portalId} and quiet`;
      const [folded] = await db.sql`select coalesce(sum(cycles), 0)::int as n from public.quiet_cycles where portal_id = ${p.portalId}`;
      expect(kept!.n + folded!.n).toBe(ROUNDS);
    }
  }, 60_000);
});

describe('what users still see after compaction', () => {
  let sim: HubSpotSimulator;
  let api: OrchestratorHarness;
  beforeAll(async () => {
    sim = await startHubSpotSimulator();
    api = await orchestratorHarness(db.sql, sim.url);
  });
  afterAll(async () => {
    await stopAllRuns(db.sql);
    await sim.close();
  });

  it('GET /sync (last sync, marks), the runs list and the change feed, through the real worker and the simulator', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { site_pages: 30, blog_posts: 20, url_redirects: 10 } });
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const sync = async (trigger: 'user' | 'schedule', mode: 'full' | 'incremental') => {
      const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: TYPES, fetchMode: mode, trigger });
      await invokeUntilFinished(rt, db.sql, r.runId!, { maxInvocations: 10 });
      expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
      return r.runId!;
    };
    const first = await sync('user', 'full');
    for (let i = 0; i < 4; i++) await sync('schedule', 'incremental');
    const [touched] = sim.touchItems(p.hubspotPortalId, 'blog_posts', 1);
    const changed = await sync('schedule', 'incremental');
    for (let i = 0; i < 5; i++) await sync('schedule', 'incremental');
    const last = await sync('schedule', 'incremental');

    // Compacted: of 10 quiet cycles the last 3 are left; the full sync and the cycle with a change stay.
    const runs = await runsOf(p);
    expect(runs.filter((r) => !r.quiet).map((r) => r.id)).toEqual([first, changed]);
    expect(runs.filter((r) => r.quiet)).toHaveLength(3);
    expect((await rollups(p)).map((r) => r.cycles)).toEqual([10 - 3]);
    // Notifications: only the run a person started.
    const notes = await db.sql`select run_id from public.notifications where user_id = ${p.userId}`;
    expect(notes.map((n) => n.run_id)).toEqual([first]);

    const token = await api.keys.signUserToken(p.userId);
    const status = await api.handler(api.request('GET', { token, query: `/sync?portalId=${p.portalId}` }));
    expect(status.status).toBe(200);
    const body = (await status.json()) as { lastSync: Record<string, unknown>; types: { contentType: string; lastIncrementalAt: string | null }[] };
    expect(body.lastSync).toMatchObject({ runId: last, mode: 'incremental', trigger: 'schedule', status: 'completed', changes: { added: 0, updated: 0, deleted: 0 } });
    expect(body.types.map((t) => t.contentType).sort()).toEqual([...TYPES].sort());
    expect(body.types.every((t) => t.lastIncrementalAt !== null)).toBe(true);

    const list = await api.handler(api.request('GET', { token, query: `/runs?portalId=${p.portalId}&limit=100` }));
    expect(list.status).toBe(200);
    const listed = ((await list.json()) as { runs: { id: string }[] }).runs.map((r) => r.id);
    expect(listed).toEqual(runs.map((r) => r.id).reverse());

    const feed = await api.handler(api.request('GET', { token, query: `/changes?portalId=${p.portalId}&contentType=blog_posts&limit=500` }));
    const changes = ((await feed.json()) as { changes: { hubspotId: string }[] }).changes;
    expect(changes.map((c) => c.hubspotId)).toContain(touched);
    expect(changes).toHaveLength(20);
  }, 120_000);
});
