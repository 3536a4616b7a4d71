// Scenario 11: incremental sync on the 180,000-item portal of scenario 8
// (60k blog posts, 100k HubDB rows in 20 tables, 20k site pages; the tables
// synced too, as a default schedule does: their list is the one the rows job
// reads, once per run), through the real entrypoints in the local edge runtime. A full sync; then 1% of the
// items updated, 0.1% created and 0.1% archived; then an incremental cycle
// within the schedule's HubDB sweep cadence (no table swept: its requests);
// the same churn again and a sweep cycle: its HubSpot requests, wall time,
// Postgres CPU and worker CPU against the full sync's, and that the store
// equals the simulator afterwards. Then freshness
// with a one-minute schedule: the cron stand-in calls schedule_due_syncs() and
// invokes the worker every 60 s, as the pg_cron tick does, while items change
// in the simulator; a change's freshness is the time from the change to its
// row in Postgres. The full sync's Postgres CPU includes a VACUUM ANALYZE of
// the content table after it (its inserts' cleanup). The functions reach
// Postgres through a transaction-mode PgBouncer, as hosted functions reach it
// through the pooler (bench/lib/pooler.ts). docs/sync.md.
import { setTimeout as sleep } from 'node:timers/promises';
import { startLocalSystem, type LocalSystem } from '../../local/system.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { createRun } from '../../shared/sql/runs.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { addBenchPortal, workerCpuMs, type BenchPortal } from '../lib/edge.ts';
import { cpuByKindDelta, migratedDatabase, postgresCpuByKind, totalCpuMs } from '../lib/pg.ts';
import { functionsPooler } from '../lib/pooler.ts';
import { statementTrace } from '../lib/statements.ts';
import { atMost, figure } from '../lib/report.ts';
import { percentile } from '../lib/stats.ts';

const S = '11';
const LIMIT = 190;
const CHURNED: ContentType[] = ['blog_posts', 'hubdb_rows', 'site_pages'];
/** What each run fetches: the churned types and the HubDB tables (docs/decisions/0045). */
const TYPES: ContentType[] = [...CHURNED, 'hubdb_tables'];
const FULL = { sizes: { blog_posts: 60_000, hubdb_rows: 100_000, site_pages: 20_000 }, hubdbTables: 20, freshnessMinutes: 4, tickMs: 60_000 };
// Quick: a tick every 10 s, the schedule made due before each (correctness only, not a freshness figure).
const QUICK = { sizes: { blog_posts: 1_500, hubdb_rows: 3_000, site_pages: 500 }, hubdbTables: 3, freshnessMinutes: 0.5, tickMs: 10_000 };

interface Cycle {
  runId: string;
  seconds: number;
  requests: number;
  rateLimited: number;
  postgresCpuMs: number | null;
  /** The cycle's Postgres CPU ms by process kind (client backends, autovacuum, checkpointer, ...). */
  postgresCpuByKind: Record<string, number> | null;
  workerCpuMs: number;
  byEndpoint: Record<string, number>;
}

/** One worker invocation, as pg_cron's net.http_post sends it. */
async function invokeWorker(sys: LocalSystem): Promise<void> {
  await fetch(sys.functions.functionUrl('worker'), {
    method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ source: 'cron', mode: 'background' }),
  }).then((r) => r.body?.cancel()).catch(() => {});
}

/** Waits (up to 3 minutes) until no worker isolate is alive: lingering lanes of a previous cycle would bill their polling to this one. */
async function quiet(sys: LocalSystem): Promise<void> {
  const deadline = performance.now() + 180_000;
  while (sys.functions.isolates('worker').length > 0 && performance.now() < deadline) await sleep(500);
}

/** A fetch run of the types, the worker woken; measured until it finishes, from a quiet system. */
async function cycle(ctx: BenchContext, sql: Sql, sys: LocalSystem, portal: BenchPortal, mode: 'full' | 'incremental', timeoutMs: number): Promise<Cycle> {
  await quiet(sys);
  const sim0 = sys.sim.stats();
  const pg0 = await postgresCpuByKind(ctx.pg.pid);
  const cpu0 = workerCpuMs(sys);
  const t0 = performance.now();
  const r = await createRun(sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'fetch', contentTypes: TYPES, fetchMode: mode });
  if (!r.runId) throw new Error(`${mode} run not created: ${JSON.stringify(r)}`);
  await invokeWorker(sys);
  const deadline = performance.now() + timeoutMs;
  let lastWake = performance.now();
  for (;;) {
    const [run] = await sql`select status, finished_at from public.runs where id = ${r.runId}`;
    if (run?.finished_at) break;
    if (performance.now() > deadline) throw new Error(`${mode} run did not finish in time (status ${run?.status})`);
    // The cron stand-in: a worker invocation a minute, as pg_cron would.
    if (performance.now() - lastWake > 60_000) {
      lastWake = performance.now();
      await invokeWorker(sys);
    }
    await sleep(250);
  }
  const seconds = (performance.now() - t0) / 1000;
  const [run] = await sql`select status from public.runs where id = ${r.runId}`;
  if (run!.status !== 'completed') throw new Error(`${mode} run ended ${String(run!.status)}`);
  // The full sync's cleanup (vacuum and analyze of its 180,000 inserts) is counted to it, before the
  // incremental cycle: autovacuum would run it at a time of its own (once inside the incremental
  // cycle, doubling that one's figure). An incremental cycle's few thousand dead rows stay below
  // autovacuum's threshold (20% of the table): its share of a later vacuum is not counted.
  if (mode === 'full') await sql`vacuum (analyze) public.hubspot_content`;
  const pg1 = await postgresCpuByKind(ctx.pg.pid);
  const sim1 = sys.sim.stats();
  const byKind = pg0 === null || pg1 === null ? null : cpuByKindDelta(pg0, pg1);
  return {
    runId: r.runId, seconds, requests: sim1.requests - sim0.requests, rateLimited: sim1.rateLimited - sim0.rateLimited,
    postgresCpuMs: totalCpuMs(byKind), postgresCpuByKind: byKind, workerCpuMs: workerCpuMs(sys) - cpu0,
    byEndpoint: Object.fromEntries(Object.entries(sim1.byEndpoint).map(([k, v]) => [k, v - (sim0.byEndpoint[k] ?? 0)]).filter(([, v]) => (v as number) > 0)),
  };
}

/** Live rows that differ from the simulator (ids and update times), per type. */
async function differences(sql: Sql, sys: LocalSystem, portal: BenchPortal): Promise<number> {
  let wrong = 0;
  for (const type of TYPES) {
    const expected = new Map(sys.sim.items(portal.hubspotPortalId, type).map((i) => [i.key, Date.parse(i.updatedAt)]));
    const rows = await sql`select hubspot_id, hubspot_updated_at from public.hubspot_content
      where portal_id = ${portal.portalId} and content_type = ${type} and deleted_at is null`;
    for (const r of rows) {
      const t = expected.get(r.hubspot_id as string);
      if (t === undefined || t !== (r.hubspot_updated_at as Date).getTime()) wrong++;
      expected.delete(r.hubspot_id as string);
    }
    wrong += expected.size;
  }
  return wrong;
}

export async function incrementalSync(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = ctx.quick ? QUICK : FULL;
  const dbUrl = await migratedDatabase(ctx.pg, 's11_sync');
  const sql: Sql = connectDatabase(dbUrl, { max: 2 });
  // Quick: a 20 s isolate wall clock, so an idle isolate retires (at half of it) and quiet() waits seconds, not 75 s.
  const wallMs = ctx.quick ? 20_000 : 150_000;
  // The functions' connections go through the pooler, as on hosted Supabase (the bench's own do not).
  const pooler = await functionsPooler(ctx, dbUrl);
  const sys = await startLocalSystem(dbUrl, {
    sim: { rateLimit: { maxPer10s: LIMIT } },
    ...(ctx.quick ? { limits: { wallClockLimitMs: wallMs } } : {}),
    env: { WORKER_TIME_BUDGET_MS: String(wallMs - 10_000), WORKER_ISOLATE_WALL_CLOCK_MS: String(wallMs), WORKER_LANES: '3', WORKER_MIN_START_MS: '2000', HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT),
           ...pooler.env },
  });
  try {
    const portal = await addBenchPortal(sql, sys, { hubspotPortalId: 31_100_001, name: 'Synced portal', sizes: shape.sizes, hubdbTables: shape.hubdbTables });
    const items = Object.values(shape.sizes).reduce((a, b) => a + b, 0);
    ctx.log(`${S}: full sync of ${items.toLocaleString()} items`);
    const full = await cycle(ctx, sql, sys, portal, 'full', ctx.quick ? 120_000 : 900_000);
    ctx.log(`${S}: full sync in ${full.seconds.toFixed(1)} s, ${full.requests} requests`);

    // Churn: 1% updated, 0.1% created, 0.1% archived, per type.
    const churn = { updated: 0, created: 0, deleted: 0 };
    const churnOnce = () => {
      for (const type of CHURNED) {
        const n = shape.sizes[type as keyof typeof shape.sizes];
        churn.updated += sys.sim.touchItems(portal.hubspotPortalId, type, Math.round(n / 100)).length;
        churn.created += sys.sim.addItems(portal.hubspotPortalId, type, Math.round(n / 1000)).length;
        churn.deleted += sys.sim.deleteItems(portal.hubspotPortalId, type, Math.round(n / 1000)).length;
      }
    };
    // The portal's schedule (the default HubDB sweep cadence, 60 minutes; its ticks come later): the
    // first cycle after the full sync sweeps no HubDB table; then the same churn again and a sweep cycle.
    await sql`insert into public.sync_schedules (portal_id, owner_id, content_types, incremental_every_minutes, full_every_minutes)
              values (${portal.portalId}, ${portal.userId}, ${TYPES}, 1, 1440)`;
    await sql`update public.sync_schedules set next_incremental_at = now() + interval '1 day' where portal_id = ${portal.portalId}`;
    churnOnce();
    const unswept = await cycle(ctx, sql, sys, portal, 'incremental', ctx.quick ? 120_000 : 600_000);
    ctx.log(`${S}: incremental cycle without HubDB deletion sweeps in ${unswept.seconds.toFixed(1)} s, ${unswept.requests} requests`);
    churnOnce();
    await sql`update public.sync_marks set last_sweep_at = last_sweep_at - interval '1 hour' where portal_id = ${portal.portalId}`;
    const trace = statementTrace(ctx, sql, dbUrl, `${S}: the sweep cycle`);
    await trace?.begin();
    const incremental = await cycle(ctx, sql, sys, portal, 'incremental', ctx.quick ? 120_000 : 600_000);
    const statements = await trace?.end(1);
    const wrongAfter = await differences(sql, sys, portal);
    ctx.log(`${S}: incremental cycle in ${incremental.seconds.toFixed(1)} s, ${incremental.requests} requests; ${wrongAfter} rows differ from the simulator`);
    const kinds = (c: Cycle) => Object.entries(c.postgresCpuByKind ?? {}).filter(([, ms]) => ms >= 5).map(([k, ms]) => `${k} ${ms.toFixed(0)}`).join(', ');
    ctx.log(`${S}: Postgres CPU ms by process: full ${kinds(full)}; without sweeps ${kinds(unswept)}; sweep cycle ${kinds(incremental)}`);
    const [byType] = await sql`select jsonb_object_agg(content_type, result) as r from public.jobs where run_id = ${incremental.runId}`;

    // Freshness with a one-minute schedule: changes land at random times; cron ticks every 60 s.
    await sql`update public.sync_schedules set next_incremental_at = now() + interval '1 minute' where portal_id = ${portal.portalId}`;
    const pending = new Map<string, { type: ContentType; at: number; updatedMs: number }>();
    const freshness: number[] = [];
    const endAt = performance.now() + shape.freshnessMinutes * 60_000;
    let nextTick = performance.now() + shape.tickMs;
    let nextChange = performance.now() + 2_000;
    let ticks = 0;
    const sim0 = sys.sim.stats();
    while (performance.now() < endAt || pending.size > 0) {
      const now = performance.now();
      if (now >= nextTick) {
        nextTick += shape.tickMs;
        ticks++;
        if (ctx.quick) await sql`update public.sync_schedules set next_incremental_at = now() where portal_id = ${portal.portalId}`;
        await sql`select public.schedule_due_syncs()`;
        await invokeWorker(sys);
      }
      if (now >= nextChange && now < endAt) {
        nextChange = now + 3_000 + Math.random() * 7_000;
        const type = CHURNED[Math.floor(Math.random() * CHURNED.length)]!;
        const at = Date.now(); // the simulator stamps a change at or after this
        for (const key of sys.sim.touchItems(portal.hubspotPortalId, type, 3)) pending.set(`${type}|${key}`, { type, at, updatedMs: at });
      }
      if (pending.size > 0) {
        const keys = [...pending.keys()];
        const rows = await sql`select content_type, hubspot_id, hubspot_updated_at from public.hubspot_content
          where portal_id = ${portal.portalId} and (content_type || '|' || hubspot_id) = any(${keys})`;
        for (const r of rows) {
          const k = `${String(r.content_type)}|${String(r.hubspot_id)}`;
          const p = pending.get(k);
          if (p && (r.hubspot_updated_at as Date).getTime() >= p.updatedMs) {
            freshness.push((Date.now() - p.at) / 1000);
            pending.delete(k);
          }
        }
      }
      if (performance.now() > endAt + 5 * 60_000) throw new Error(`${pending.size} changes never reached Postgres`);
      await sleep(500);
    }
    const simAfter = sys.sim.stats();
    const freshRateLimited = simAfter.rateLimited - sim0.rateLimited;

    ctx.checks.equal(S, 'store equals the simulator after the incremental cycle', wrongAfter, 0);
    ctx.checks.equal(S, 'every change reached Postgres', pending.size, 0);
    const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? Number.NaN : a / b);
    const figures = [
      figure(S, 'full sync: HubSpot requests', 'count', [full.requests]),
      figure(S, 'full sync: wall time', 's', [full.seconds]),
      figure(S, 'incremental cycle: HubSpot requests', 'count', [incremental.requests]),
      figure(S, 'incremental cycle without HubDB deletion sweeps: HubSpot requests', 'count', [unswept.requests]),
      figure(S, 'incremental requests without HubDB deletion sweeps / full sync requests', '%', [100 * ratio(unswept.requests, full.requests)], { goal: atMost(4, '≤ 4%') }),
      figure(S, 'incremental requests / full sync requests', '%', [100 * ratio(incremental.requests, full.requests)]),
      figure(S, 'incremental cycle: wall time', 's', [incremental.seconds], { note: `full sync ${full.seconds.toFixed(1)} s` }),
      figure(S, 'incremental Postgres CPU / full sync Postgres CPU', '%', [100 * ratio(incremental.postgresCpuMs, full.postgresCpuMs)], {
        goal: atMost(5, '≤ 5%'), note: `incremental ${incremental.postgresCpuMs?.toFixed(0)} ms, full ${full.postgresCpuMs?.toFixed(0)} ms`,
      }),
      figure(S, 'incremental Postgres CPU without HubDB deletion sweeps / full sync Postgres CPU', '%', [100 * ratio(unswept.postgresCpuMs, full.postgresCpuMs)], {
        note: `incremental ${unswept.postgresCpuMs?.toFixed(0)} ms`,
      }),
      figure(S, 'incremental worker CPU / full sync worker CPU', '%', [100 * ratio(incremental.workerCpuMs, full.workerCpuMs)], {
        note: `incremental ${incremental.workerCpuMs.toFixed(0)} ms, full ${full.workerCpuMs.toFixed(0)} ms`,
      }),
      figure(S, 'freshness p50 (one-minute schedule)', 's', [percentile(freshness, 50)]),
      figure(S, 'freshness p95 (one-minute schedule)', 's', [percentile(freshness, 95)], { goal: atMost(90, '≤ 90 s') }),
      figure(S, '429s (full, incremental, schedule)', 'count', [full.rateLimited + incremental.rateLimited + freshRateLimited], { goal: atMost(0, '0') }),
    ];
    ctx.note(`${S}: ${items.toLocaleString()} items (${shape.hubdbTables} HubDB tables); churn ${JSON.stringify(churn)}; ` +
      `"incremental requests / full sync requests" and the other incremental rows are the sweep cycle (HubDB tables that lost rows read whole); ` +
      `the cycle without HubDB deletion sweeps came first, within the schedule's 60-minute cadence, each after the same churn. ` +
      `incremental requests by endpoint ${JSON.stringify(incremental.byEndpoint)}; freshness over ${freshness.length} changes, ${ticks} ticks. The functions reach Postgres ${pooler.via}.`);
    return { figures, details: { sizes: shape.sizes, full, unswept, incremental, churn, incrementalJobs: byType?.r ?? null, freshness, ticks, statements } };
  } finally {
    await sql.end({ timeout: 5 });
    await sys.stop();
    await pooler.stop();
  }
}
