// Schedule probes (docs/decisions/0058): a worker lane with no job probes a due
// incremental schedule from its row, under the schedule-probe lease and a
// fencing token, and a cycle where nothing changed leaves no run, no job and no
// notification: the marks stamped, the day's quiet cycles counted. A change makes a run that
// fetches just it; a failed probe hands the cycle to a run with a probe job;
// the tick creates the runs no lane probed within the grace; a lane holds
// several probes and claims its next ones with each report. Real Postgres,
// real connections racing, the HubSpot simulator, a worker process killed mid-probe.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import type { ProbeAnswer } from '../shared/sql/fetch.ts';
import {
  claimScheduleProbe, reportAndClaimScheduleProbes, reportScheduleProbe, type ScheduleProbe, type ScheduleProbeReport,
} from '../shared/sql/schedule-probe.ts';
import { claimableJobsExist } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import { spawnWorkerProcess, type WorkerProcess } from '../scripts/chaos/worker-process.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, runOf, type SimPortal } from './support/fetch-fixtures.ts';
import { pgError } from './support/queue-fixtures.ts';
import { useSimulators } from './support/simulators.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const newSim = useSimulators(db);
const workers: WorkerProcess[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
});
// Each test's schedules alone are due (one-minute schedules fall due again within the file).
afterEach(async () => {
  await db.sql`delete from public.sync_schedules`;
});

const SIZES = { site_pages: 30, landing_pages: 10, blog_posts: 40, blog_authors: 4, blog_tags: 6, hubdb_tables: 2, hubdb_rows: 60, url_redirects: 20 };
const CMS_TYPES = CONTENT_TYPES.filter((t) => t !== 'hubdb_tables' && t !== 'hubdb_rows');
/** HubSpot's answers where nothing changed: no CMS item changed or archived after its marks; no HubDB table. */
const NOTHING_CHANGED: Record<string, ProbeAnswer> = Object.fromEntries(CMS_TYPES.map((t) => [t, { changed: 0, archived: 0 }]));
const NO_TABLES = ['{"results":[]}'];

/** A simulator portal fully synced by a user's full fetch, on a one-minute incremental schedule. */
async function syncedPortal(sql: Sql, sim: HubSpotSimulator): Promise<SimPortal> {
  const p = await connectSimPortal(sql, sim, { sizes: SIZES, hubdbTables: SIZES.hubdb_tables });
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
  await invokeUntilFinished(await testWorkerRuntime(sql, sim.url), sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  // After the sync: a schedule is due once created, and the sync's lanes would have probed it.
  await sql`insert into public.sync_schedules (portal_id, content_types, incremental_every_minutes)
            values (${p.portalId}, ${CONTENT_TYPES as unknown as string[]}, 1)`;
  return p;
}

/** Portals with settled marks (an hour old, written here: no HubSpot) on a one-minute schedule, due `dueAgo` ago. */
async function markedPortals(n: number, dueAgo = '1 second'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await createUserWithPortal(db.sql)).portalId);
  await db.sql`insert into public.sync_marks (portal_id, owner_id, content_type, high_water, archived_high_water, last_full_at, last_sweep_at)
    select p.id, p.owner_id, t, now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'
      from public.portals p, unnest(${CONTENT_TYPES as unknown as string[]}::text[]) t where p.id = any(${ids}::uuid[])`;
  await db.sql`insert into public.sync_schedules (portal_id, incremental_every_minutes) select id, 1 from public.portals where id = any(${ids}::uuid[])`;
  await makeDue(ids, dueAgo);
  return ids;
}

async function makeDue(portalIds: string[], ago = '1 second', which: 'incremental' | 'full' = 'incremental') {
  await db.sql`update public.sync_schedules set
      next_incremental_at = case when ${which} = 'incremental' then now() - ${ago}::interval else next_incremental_at end,
      next_full_at = case when ${which} = 'full' then now() - ${ago}::interval else now() + interval '1 day' end
    where portal_id = any(${portalIds}::uuid[])`;
}

const scheduleOf = async (portalId: string) => (await db.sql`select next_incremental_at > now() as moved, schedule_probe_fencing_token::int as fencing_token,
    schedule_probe_lease_expires_at, next_incremental_at = schedule_probe_lease_expires_at as due_at_lease_end, last_run_id
    from public.sync_schedules where portal_id = ${portalId}`)[0]!;
const quietCycles = async (portalId: string) =>
  ((await db.sql`select coalesce(sum(cycles), 0)::int as n from public.quiet_cycles where portal_id = ${portalId}`)[0]!.n as number);
const runsOf = (portalId: string) => db.sql`select id, trigger, fetch_mode, status from public.runs where portal_id = ${portalId} order by created_at`;
const CLAIM_ARGS = { holder: 'lane-a#1', refreshLeaseSeconds: 30, minValidSeconds: 5, budget: { maxRequests: 188, windowMs: 10_150, ceiling: null, dailyReservePercent: 0 } };
const tick = async (sql: Sql = db.sql) => ((await sql`select public.schedule_due_syncs() as n`)[0]!.n as number);

describe('schedule probes through the worker', () => {
  it('a quiet cycle leaves no run: 2 one-item listings per CMS type and the tables list, marks stamped, one more quiet cycle, the next slot', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    const runsBefore = (await runsOf(p.portalId)).length;
    const marksBefore = await db.sql`select content_type, last_incremental_at from public.sync_marks where portal_id = ${p.portalId} order by 1`;
    await makeDue([p.portalId]);
    sim.resetStats();
    const [{ probedFrom }] = (await db.sql`select clock_timestamp() as "probedFrom"`) as unknown as [{ probedFrom: Date }];
    const s = await runWorkerInvocation(await testWorkerRuntime(db.sql, sim.url), 'probe-worker');
    expect(s.probed).toEqual({ quiet: 1, changed: 0, handed_over: 0, lost: 0 });
    expect(s.claimed).toBe(0);
    expect((await runsOf(p.portalId)).length).toBe(runsBefore);
    expect(sim.requestLog().filter((e) => e.endpoint.includes('/cms/')).length).toBe(2 * CMS_TYPES.length + 1);
    // Granted with the claim (one grant for the round), the limits learned from the report's rate headers.
    const [budget] = await db.sql`select (select count(*)::int from unnest(granted_at) t where t >= ${probedFrom}) as granted,
        (select count(distinct t)::int from unnest(granted_at) t where t >= ${probedFrom}) as grants, limit_source
        from private.hubspot_request_budgets where hubspot_portal_id = ${p.hubspotPortalId}`;
    expect(budget).toMatchObject({ granted: 2 * CMS_TYPES.length + 1, grants: 1, limit_source: 'headers' });
    const marks = await db.sql`select content_type, last_incremental_at from public.sync_marks where portal_id = ${p.portalId} order by 1`;
    expect(marks.map((m) => m.content_type)).toEqual(marksBefore.map((m) => m.content_type));
    for (const [i, m] of marks.entries()) expect(m.last_incremental_at.getTime()).toBeGreaterThan(marksBefore[i]!.last_incremental_at?.getTime() ?? 0);
    expect(await quietCycles(p.portalId)).toBe(1);
    expect(await scheduleOf(p.portalId)).toMatchObject({ moved: true, fencing_token: 1, schedule_probe_lease_expires_at: null, due_at_lease_end: null });
    expect((await db.sql`select count(*)::int as n from public.notifications where user_id = ${p.userId}`)[0]!.n).toBe(1); // the user's own full fetch
  });

  it.each([
    [1, 4], // the first claim, then three reports each claiming the next (the last finds none)
    [3, 2], // one claim of three, one report of three
  ])('a lane holding %i probe(s) at once claims its next with the last report: three due portals, %i calls in all', async (probesPerLane, callsInAll) => {
    const sim = await newSim();
    const portals = [await syncedPortal(db.sql, sim), await syncedPortal(db.sql, sim), await syncedPortal(db.sql, sim)];
    await makeDue(portals.map((p) => p.portalId));
    const before = await Promise.all(portals.map((p) => quietCycles(p.portalId))); // the later syncs' lanes probed the earlier
    const texts: string[] = [];
    const counting = new Proxy(db.sql, {
      apply(target, thisArg, args) {
        if (Array.isArray(args[0])) texts.push((args[0] as string[]).join('$'));
        return Reflect.apply(target as never, thisArg, args);
      },
    });
    const rt = { ...(await testWorkerRuntime(db.sql, sim.url, { lanes: 1, maxLanes: 1, probesPerLane })), sql: counting };
    const s = await runWorkerInvocation(rt, 'probe-worker');
    expect(s.probed).toEqual({ quiet: 3, changed: 0, handed_over: 0, lost: 0 });
    const calls = (f: string) => texts.filter((t) => t.includes(`public.${f}(`)).length;
    expect([calls('claim_schedule_probe'), calls('report_and_claim_schedule_probes'), calls('report_schedule_probe')]).toEqual([0, callsInAll, 0]);
    expect(await Promise.all(portals.map((p) => quietCycles(p.portalId)))).toEqual(before.map((n) => n + 1));
  });

  it('an invocation holds at most max(maxLanes, probesPerLane) probes at once: two lanes of 2 under a cap of 2 share it', async () => {
    const sim = await newSim();
    const portals = [];
    for (let i = 0; i < 6; i++) portals.push(await syncedPortal(db.sql, sim));
    const before = await Promise.all(portals.map((p) => quietCycles(p.portalId)));
    await makeDue(portals.map((p) => p.portalId));
    let mostLeased = 0;
    const watching = new Proxy(db.sql, {
      apply(target, thisArg, args) {
        // At every report, the probes leased (held by the lanes) then.
        if (Array.isArray(args[0]) && (args[0] as string[]).join('$').includes('report_and_claim_schedule_probes(')) {
          return db.sql`select count(*)::int as n from public.sync_schedules where schedule_probe_lease_expires_at > now()`.then(([r]) => {
            mostLeased = Math.max(mostLeased, r!.n as number);
            return Reflect.apply(target as never, thisArg, args);
          });
        }
        return Reflect.apply(target as never, thisArg, args);
      },
    });
    const rt = { ...(await testWorkerRuntime(db.sql, sim.url, { lanes: 2, maxLanes: 2, probesPerLane: 2 })), sql: watching };
    const s = await runWorkerInvocation(rt, 'probe-worker');
    expect(s.probed).toEqual({ quiet: 6, changed: 0, handed_over: 0, lost: 0 });
    expect(mostLeased).toBe(2); // the two lanes' 4 would be 2 over the cap
    expect(await Promise.all(portals.map((p) => quietCycles(p.portalId)))).toEqual(before.map((n) => n + 1));
  });

  it('probes reported together whose call the database refuses are reported one by one: each outcome kept', async () => {
    const sim = await newSim();
    const portals = [await syncedPortal(db.sql, sim), await syncedPortal(db.sql, sim)];
    const before = await Promise.all(portals.map((p) => quietCycles(p.portalId)));
    await makeDue(portals.map((p) => p.portalId));
    let calls = 0;
    let refused = 0;
    const refusing = new Proxy(db.sql, {
      apply(target, thisArg, args) {
        // The second call (the first claimed both) fails as a refused report would (22023 undoes the whole call).
        if (Array.isArray(args[0]) && (args[0] as string[]).join('$').includes('report_and_claim_schedule_probes(') && ++calls === 2) {
          refused++;
          return Promise.reject(Object.assign(new Error('report_schedule_probe: answers refused'), { code: '22023' }));
        }
        return Reflect.apply(target as never, thisArg, args);
      },
    });
    const rt = { ...(await testWorkerRuntime(db.sql, sim.url, { lanes: 1, maxLanes: 1, probesPerLane: 2 })), sql: refusing };
    const s = await runWorkerInvocation(rt, 'probe-worker');
    expect(refused).toBe(1);
    expect(s.probed).toEqual({ quiet: 2, changed: 0, handed_over: 0, lost: 0 });
    expect(await Promise.all(portals.map((p) => quietCycles(p.portalId)))).toEqual(before.map((n) => n + 1));
    for (const p of portals) expect(await scheduleOf(p.portalId)).toMatchObject({ moved: true, schedule_probe_lease_expires_at: null });
  });

  it('a change makes a scheduled run that fetches only the changed type (no second probe), stored exactly', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    sim.touchItems(p.hubspotPortalId, 'blog_posts', 3);
    await makeDue([p.portalId]);
    const s = await runWorkerInvocation(await testWorkerRuntime(db.sql, sim.url), 'probe-worker');
    expect(s.probed).toMatchObject({ changed: 1, quiet: 0 });
    const [run] = (await runsOf(p.portalId)).filter((r) => r.trigger === 'schedule');
    expect(run).toMatchObject({ fetch_mode: 'incremental', status: 'completed' });
    expect((await jobsOf(db.sql, run!.id)).map((j) => [j.kind, j.content_type, j.status])).toEqual([['fetch', 'blog_posts', 'completed']]);
    expect(await scheduleOf(p.portalId)).toMatchObject({ moved: true, last_run_id: run!.id, schedule_probe_lease_expires_at: null });
    expect(await quietCycles(p.portalId)).toBe(0);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  });

  it('a probe HubSpot fails hands the cycle to a scheduled run with a probe job, which retries it', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    await makeDue([p.portalId]);
    sim.setFaults({ errorRate: 1, errorStatuses: [503] });
    const s = await runWorkerInvocation(await testWorkerRuntime(db.sql, sim.url, { lanes: 1, maxLanes: 1 }), 'probe-worker');
    expect(s.probed).toMatchObject({ handed_over: 1, quiet: 0, changed: 0 });
    const [run] = (await runsOf(p.portalId)).filter((r) => r.trigger === 'schedule');
    expect(run).toMatchObject({ fetch_mode: 'incremental' });
    expect((await jobsOf(db.sql, run!.id)).map((j) => j.kind)).toEqual(['probe']);
    expect(await scheduleOf(p.portalId)).toMatchObject({ moved: true, last_run_id: run!.id });
    sim.clearFaults();
    await db.sql`update public.jobs set run_after = now() where run_id = ${run!.id} and status = 'pending'`;
    await invokeUntilFinished(await testWorkerRuntime(db.sql, sim.url), db.sql, run!.id, { maxInvocations: 5 });
    expect(await runOf(db.sql, run!.id)).toMatchObject({ status: 'completed', quiet: true });
    expect(await quietCycles(p.portalId)).toBe(0); // a run's quiet cycle is folded by compaction, not counted at once
  });
});

describe('schedule-probe leases', () => {
  it('fenced: an old fencing token or an expired lease changes nothing; a malformed report raises and keeps the lease; a re-claim gets a new fencing token', async () => {
    const [portalId] = await markedPortals(1);
    const first = (await claimScheduleProbe(db.sql))!;
    expect(first.portalId).toBe(portalId);
    expect(Object.keys((first.checkpoint as { types: object }).types).sort()).toEqual([...CONTENT_TYPES].sort());
    expect(await claimScheduleProbe(db.sql)).toBeNull(); // leased
    expect(await reportScheduleProbe(db.sql, { ...first, fencingToken: String(Number(first.fencingToken) - 1) }, NOTHING_CHANGED, NO_TABLES)).toBeNull();
    const bad = await pgError(() => reportScheduleProbe(db.sql, first, { site_pages: { changed: 0, archived: 0 } }, NO_TABLES));
    expect([bad.code, bad.message]).toEqual(['22023', 'report_schedule_probe: every CMS type probed needs its {changed, archived} totals ({window, archived} near its last change)']);
    // A type asked for its overlap window must be answered with a listing page.
    const types = (first.checkpoint as { types: Record<string, object> }).types;
    const windowed = { ...first, checkpoint: { types: { ...types, site_pages: { ...types.site_pages, windowAfter: new Date().toISOString() } } } };
    const notPage = await pgError(() => reportScheduleProbe(db.sql, windowed, { ...NOTHING_CHANGED, site_pages: { window: '{"total": 1}', archived: 0 } }, NO_TABLES));
    expect([notPage.code, notPage.message]).toEqual(['22023', 'report_schedule_probe: a window must be a listing page: {total, results: [{id, ...}]}']);
    // Leased: due again when the lease ends.
    expect(await scheduleOf(portalId!)).toMatchObject({ due_at_lease_end: true, fencing_token: Number(first.fencingToken) });
    await db.sql`update public.sync_schedules set schedule_probe_lease_expires_at = now() - interval '1 second', next_incremental_at = now() - interval '1 second'
                  where portal_id = ${portalId!}`;
    expect(await reportScheduleProbe(db.sql, first, NOTHING_CHANGED, NO_TABLES)).toBeNull();
    const second = (await claimScheduleProbe(db.sql))!;
    expect(Number(second.fencingToken)).toBe(Number(first.fencingToken) + 1);
    expect(await reportScheduleProbe(db.sql, second, NOTHING_CHANGED, NO_TABLES)).toBe('quiet');
    expect(await reportScheduleProbe(db.sql, second, NOTHING_CHANGED, NO_TABLES)).toBeNull(); // reported once
    expect(await quietCycles(portalId!)).toBe(1);
    expect(await runsOf(portalId!)).toEqual([]);
    expect(await claimScheduleProbe(db.sql)).toBeNull(); // its next slot is in the future
  });

  it('a claim with a token holder hands out the token and grants the first round (fewer when the budget has less room); the report records the rate headers', async () => {
    const [portalId] = await markedPortals(1);
    const budget = { maxRequests: 188, windowMs: 10_150, ceiling: null, dailyReservePercent: 0 };
    const args = { holder: 'lane-a#1', refreshLeaseSeconds: 30, minValidSeconds: 5, budget };
    const budgetRow = async () => (await db.sql`select cardinality(b.granted_at) as granted, b.max_per_interval, b.limit_source
        from private.hubspot_request_budgets b join public.portals p on p.hubspot_portal_id = b.hubspot_portal_id where p.id = ${portalId!}`)[0];
    const first = (await claimScheduleProbe(db.sql, args))!;
    expect(first.token).toMatchObject({ holder: 'lane-a#1', claim: { decision: 'use', auth_kind: 'private_app' } });
    expect(first.granted).toBe(2 * CMS_TYPES.length + 1); // two listings per CMS type, the tables list's first page
    expect(await budgetRow()).toMatchObject({ granted: first.granted, limit_source: 'auth_kind' });
    const at = Date.now();
    // HubSpot counted the 13 granted (sent after the claim): no other app's requests.
    const headers = { max: 150, intervalMs: 10_000, remaining: 150 - first.granted, daily: null, dailyRemaining: null, sentAt: at, answeredAt: at };
    expect(await reportScheduleProbe(db.sql, first, NOTHING_CHANGED, NO_TABLES, headers)).toBe('quiet');
    expect(await budgetRow()).toMatchObject({ max_per_interval: 150, limit_source: 'headers' });
    // A ceiling of 10 per 10 s leaves room for 8 (less headroom), 13 of them taken: none granted; the lane asks for its own.
    await makeDue([portalId!]);
    const second = (await claimScheduleProbe(db.sql, { ...args, budget: { ...budget, ceiling: 10 } }))!;
    expect([second.token?.claim.decision, second.granted]).toEqual(['use', 0]);
    await db.sql`update private.hubspot_request_budgets b set granted_at = '{}' from public.portals p
                  where p.id = ${portalId!} and b.hubspot_portal_id = p.hubspot_portal_id`;
    await db.sql`update public.sync_schedules set schedule_probe_lease_expires_at = now() - interval '1 second', next_incremental_at = now() - interval '1 second'
                  where portal_id = ${portalId!}`;
    expect((await claimScheduleProbe(db.sql, { ...args, budget: { ...budget, ceiling: 10 } }))!.granted).toBe(8);
  });

  it('one call reports a lane\'s probes and claims its next ones: the next due with token and grant, each report fenced on its own, none when none is due', async () => {
    const [a, b, c, d] = await markedPortals(4);
    await makeDue([a!, b!], '2 minutes');
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '1 hour' where portal_id in (${c!}, ${d!})`;
    const quiet = (probe: ScheduleProbe): ScheduleProbeReport => ({ probe, answers: NOTHING_CHANGED, tablesPages: NO_TABLES, rateHeaders: null });
    // A lane's first claims (no reports): the two due, longest due first; not the third, due later.
    const first = await reportAndClaimScheduleProbes(db.sql, [], 3, CLAIM_ARGS);
    expect(first.outcomes).toEqual([]);
    expect(first.next.map((p) => p.portalId)).toEqual([a, b]);
    for (const p of first.next) {
      expect(p).toMatchObject({ granted: 2 * CMS_TYPES.length + 1, token: { holder: CLAIM_ARGS.holder, claim: { decision: 'use' } } });
    }
    const [pa, pb] = first.next;
    // b's lease expired meanwhile: its report is fenced off, a's goes through, and c (now due) is claimed.
    await db.sql`update public.sync_schedules set schedule_probe_lease_expires_at = now() - interval '1 second', next_incremental_at = now() - interval '1 second'
                  where portal_id = ${b!}`;
    await makeDue([c!]);
    const done = await reportAndClaimScheduleProbes(db.sql, [quiet(pa!), quiet(pb!)], 3, CLAIM_ARGS);
    expect(done.outcomes).toEqual(['quiet', null]);
    expect(done.next.map((p) => p.portalId).sort()).toEqual([b, c].sort()); // b due again at its lease's end
    expect(await scheduleOf(a!)).toMatchObject({ moved: true, schedule_probe_lease_expires_at: null });
    expect(await quietCycles(a!)).toBe(1);
    expect(await quietCycles(b!)).toBe(0);
    // Fenced off (reported already): nothing reported; a user's run waiting with its job: the report says so (decision 0063).
    const [portal] = await db.sql`select owner_id from public.portals where id = ${a!}`;
    expect((await createRun(db.sql, { portalId: a!, requestedBy: portal!.owner_id, kind: 'fetch', contentTypes: ['site_pages'] })).runId).not.toBeNull();
    const last = await reportAndClaimScheduleProbes(db.sql, [quiet(pa!), ...done.next.map(quiet)], 3, CLAIM_ARGS);
    expect(last).toEqual({ outcomes: [null, 'quiet', 'quiet'], next: [], jobsWaiting: true });
    expect([await quietCycles(b!), await quietCycles(c!)]).toEqual([1, 1]);
    // A bad report raises before anything is reported or claimed: the whole call is undone.
    await makeDue([b!, c!]);
    const [pb2, pc2] = (await reportAndClaimScheduleProbes(db.sql, [], 2, CLAIM_ARGS)).next;
    await makeDue([d!]);
    const bad = await pgError(() => reportAndClaimScheduleProbes(db.sql, [quiet(pb2!), { ...quiet(pc2!), answers: {} }], 1, CLAIM_ARGS));
    expect(bad.code).toBe('22023');
    expect([await quietCycles(b!), await quietCycles(c!)]).toEqual([1, 1]); // b's report undone too
    expect(await scheduleOf(d!)).toMatchObject({ schedule_probe_lease_expires_at: null }); // not claimed
    expect((await reportAndClaimScheduleProbes(db.sql, [], 1, CLAIM_ARGS)).next.map((p) => p.portalId)).toEqual([d]); // (due)
    // Claims need a holder; at most 64 reports or claims.
    const noHolder = await pgError(() => db.sql`select * from public.report_and_claim_schedule_probes('[]'::jsonb, 1, null)`);
    expect([noHolder.code, noHolder.message]).toEqual(['22023', 'report_and_claim_schedule_probes: the claims need a token holder']);
    const tooMany = await pgError(() => db.sql`select * from public.report_and_claim_schedule_probes('[]'::jsonb, 65, 'h')`);
    expect([tooMany.code, tooMany.message]).toEqual(['22023', 'report_and_claim_schedule_probes: claims must be between 0 and 64']);
  });

  it('a run whose job commits after a claim read the schedule as due, before it took the lease: the claim gives the lease back', async () => {
    const [portalId] = await markedPortals(1);
    const [{ owner }] = (await db.sql`select owner_id as owner from public.portals where id = ${portalId!}`) as unknown as [{ owner: string }];
    // The claim's update waits (a test trigger on an advisory lock) after its statement read the schedule as due.
    await db.sql.unsafe(`create function public.test_hold_schedule_update() returns trigger language plpgsql set search_path = '' as $f$
        begin perform pg_advisory_xact_lock_shared(4242); return new; end $f$;
      create trigger test_hold_schedule_update before update on public.sync_schedules for each row execute function public.test_hold_schedule_update();`);
    const holder = db.connect(1);
    const lane = db.connect(1);
    try {
      let release!: () => void;
      let taken!: () => void;
      const lockTaken = new Promise<void>((r) => (taken = r));
      const holding = holder.begin(async (t) => {
        await t`select pg_advisory_xact_lock(4242)`;
        taken();
        await new Promise<void>((r) => (release = r));
      });
      await lockTaken;
      const claim = claimScheduleProbe(lane, CLAIM_ARGS);
      for (let i = 0; i < 200 && (await db.sql`select 1 from pg_locks where locktype = 'advisory' and not granted`).length === 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      // Meanwhile a run of the portal commits its job (as a tick's would, or a user's).
      expect((await createRun(db.sql, { portalId: portalId!, requestedBy: owner, kind: 'fetch', contentTypes: ['site_pages'] })).runId).not.toBeNull();
      release();
      await holding;
      expect(await claim).toBeNull();
      expect(await scheduleOf(portalId!)).toMatchObject({ moved: true, schedule_probe_lease_expires_at: null });
    } finally {
      await db.sql.unsafe(`drop trigger test_hold_schedule_update on public.sync_schedules; drop function public.test_hold_schedule_update()`);
      await Promise.all([holder.end(), lane.end()]);
    }
  });

  it('the tick is the fallback: an incremental no lane probed within the grace gets a run, a leased or recent one none; a due full reconcile at once; grace 0 turns probes off', async () => {
    const [recent, overdue, leased, full] = await markedPortals(4);
    await makeDue([overdue!, leased!], '2 minutes');
    await makeDue([full!], '1 second', 'full');
    await db.sql`update public.sync_schedules set next_incremental_at = now() + interval '1 day' where portal_id = ${full!}`;
    // A lane holds the leased one's probe (the oldest due is taken first).
    await db.sql`update public.sync_schedules set next_incremental_at = now() - interval '3 minutes' where portal_id = ${leased!}`;
    expect((await claimScheduleProbe(db.sql))!.portalId).toBe(leased);
    expect(await tick()).toBe(2);
    expect((await runsOf(overdue!)).map((r) => r.fetch_mode)).toEqual(['incremental']);
    expect((await runsOf(full!)).map((r) => r.fetch_mode)).toEqual(['full']);
    expect(await runsOf(recent!)).toEqual([]);
    expect(await runsOf(leased!)).toEqual([]);
    expect(await claimableJobsExist(db.sql, ['probe'])).toBe(true); // the recent one, still due for a lane
    await db.sql`update private.sync_settings set probe_grace_seconds = 0`;
    try {
      expect(await claimableJobsExist(db.sql, ['export'])).toBe(false);
      expect(await claimScheduleProbe(db.sql)).toBeNull();
      expect(await tick()).toBe(1); // the recent one, at once
      expect((await runsOf(recent!)).map((r) => r.fetch_mode)).toEqual(['incremental']);
    } finally {
      await db.sql`update private.sync_settings set probe_grace_seconds = 60`;
    }
  });

  it('lanes and ticks racing on many connections handle each due schedule exactly once: a probe or a run', async () => {
    await db.sql`update private.sync_settings set probe_grace_seconds = 60`;
    const portals = await markedPortals(120, '2 minutes');
    const lanes = Array.from({ length: 12 }, () => db.connect(1));
    const ticks = Array.from({ length: 3 }, () => db.connect(1));
    const probed: ScheduleProbe[] = [];
    let ticked = 0;
    await Promise.all([
      // Half the lanes claim each probe on its own; half hold three, reported and claimed together (decisions 0061, 0065).
      ...lanes.map(async (sql, i) => {
        if (i % 2 === 0) {
          for (let p = await claimScheduleProbe(sql); p; p = await claimScheduleProbe(sql)) {
            probed.push(p);
            expect(await reportScheduleProbe(sql, p, NOTHING_CHANGED, NO_TABLES)).toBe('quiet');
          }
          return;
        }
        const args = { ...CLAIM_ARGS, holder: `lane-${i}` };
        for (let held = (await reportAndClaimScheduleProbes(sql, [], 3, args)).next; held.length > 0;) {
          probed.push(...held);
          const done = await reportAndClaimScheduleProbes(sql, held.map((probe) => ({ probe, answers: NOTHING_CHANGED, tablesPages: NO_TABLES,
            rateHeaders: null })), 3, args);
          expect(done.outcomes).toEqual(held.map(() => 'quiet'));
          held = done.next;
        }
      }),
      ...ticks.map(async (sql) => {
        for (let i = 0; i < 5; i++) {
          const n = await tick(sql);
          ticked += n;
        }
      }),
    ]);
    expect(new Set(probed.map((p) => p.portalId)).size).toBe(probed.length);
    const [counts] = await db.sql`select
        (select count(*)::int from public.runs where portal_id = any(${portals}::uuid[])) as runs,
        (select coalesce(sum(cycles), 0)::int from public.quiet_cycles where portal_id = any(${portals}::uuid[])) as quiet,
        (select count(*)::int from public.portals p where p.id = any(${portals}::uuid[])
            and (select count(*) from public.runs r where r.portal_id = p.id)
              + (select coalesce(sum(q.cycles), 0) from public.quiet_cycles q where q.portal_id = p.id) <> 1) as not_once`;
    expect(counts).toEqual({ runs: ticked, quiet: probed.length, not_once: 0 });
    expect(ticked + probed.length).toBe(portals.length);
    expect(probed.length).toBeGreaterThan(0);
  });
});

describe('a worker killed mid-probe', () => {
  it('leaves the probe leased until its lease expires; then another worker probes the schedule, and the dead worker\'s fencing token is fenced off', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    await db.sql`update private.job_kinds set lease_seconds = 5 where kind = 'probe'`;
    const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-probe-kill-'));
    try {
      sim.setFaults({ slowMs: 60_000 }); // HubSpot hangs: the probe is in flight when the worker dies
      await makeDue([p.portalId]);
      const spawn = (workerId: string) => {
        const w = spawnWorkerProcess({ dbUrl: db.url, hubspotUrl: sim.url, workerId, exportDir, budgetMs: 60_000, lanes: 1, requestTimeoutMs: 120_000 });
        workers.push(w);
        return w;
      };
      const doomed = spawn('doomed');
      await expect.poll(async () => (await scheduleOf(p.portalId)).fencing_token, { timeout: 30_000 }).toBe(1);
      await doomed.kill();
      sim.clearFaults();
      const held = await scheduleOf(p.portalId);
      expect(held.schedule_probe_lease_expires_at).not.toBeNull();
      expect(held.due_at_lease_end).toBe(true); // due again once the lease expires
      const survivor = spawn('survivor');
      await expect.poll(async () => quietCycles(p.portalId), { timeout: 30_000 }).toBe(1);
      await survivor.stop();
      expect(await scheduleOf(p.portalId)).toMatchObject({ moved: true, fencing_token: 2, schedule_probe_lease_expires_at: null });
      expect(await reportScheduleProbe(db.sql, { portalId: p.portalId, fencingToken: '1', checkpoint: { types: {} }, token: null, granted: 0 }, NOTHING_CHANGED, NO_TABLES)).toBeNull();
      expect((await runsOf(p.portalId)).filter((r) => r.trigger === 'schedule')).toEqual([]);
    } finally {
      await db.sql`update private.job_kinds set lease_seconds = 60 where kind = 'probe'`;
      await rm(exportDir, { recursive: true, force: true });
    }
  }, 90_000);
});
