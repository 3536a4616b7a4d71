// Scenario 12: a sync fleet. N portals (default 1,000; --fleet-portals), mostly
// small (~250 items) with one large (~10,000 items) per 250, every one on a
// one-minute incremental schedule with the worker's default settings, run by
// the local cron (the schema's pg_cron jobs: schedule_due_syncs then the worker
// POST every minute, retention every 5) under the local edge runtime for
// --fleet-minutes (default 10). The simulator answers every CMS request 150 ms
// after it arrives. Before the clock starts the store is seeded through SQL:
// one template portal per size is fully synced by the real worker, then its
// rows and sync marks are copied to every portal of that size (the simulator
// gives portals of one seed the same items; their domain is rewritten). During
// the run 1% of the items change at random times (80% updated, 10% created,
// 10% archived), each change's time recorded; freshness is change → stored
// row. The functions reach Postgres through a transaction-mode PgBouncer, as
// hosted functions reach it through the pooler (bench/lib/pooler.ts); without
// pgbouncer on the machine, directly (the figures then say so). The last minutes are quiet (no changes): the per-cycle costs of an
// unchanged cycle are measured there. At the end the store is compared with
// the simulator. docs/scaling.md reads these figures.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { startLocalCron, type LocalCron } from '../../local/cron/cron.ts';
import { startLocalSystem, type LocalSystem } from '../../local/system.ts';
import { workerConfig } from '../../shared/config.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { createRun } from '../../shared/sql/runs.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { functionsPooler } from '../lib/pooler.ts';
import { workerCpuMs } from '../lib/edge.ts';
import { backendCpuDelta, backendCpuMs, cpuByKindDelta, migratedDatabase, postgresCpuByKind, totalCpuMs } from '../lib/pg.ts';
import { atLeast, atMost, figure } from '../lib/report.ts';
import { statementTrace } from '../lib/statements.ts';
import { percentile, round } from '../lib/stats.ts';

const S = '12';
/** The bench's own connections: their backends' CPU is left out of the fleet's. */
const BENCH_APP = 'bench-sync-fleet';
/** HubSpot's answer time: the issue's 150 ms (an unchanged job waits on ~2 answers, 0.3–0.5 s against the real API). */
const LATENCY_MS = 150;
const INTERVAL_MINUTES = 1;
const CHANGE_SHARE = 0.01;
const LARGE_EVERY = 250;
type Sizes = Record<ContentType, number>;
const SMALL: { sizes: Sizes; hubdbTables: number; seed: number } = {
  sizes: { site_pages: 30, landing_pages: 10, blog_posts: 60, blog_authors: 3, blog_tags: 7, hubdb_tables: 2, hubdb_rows: 80, url_redirects: 60 },
  hubdbTables: 2, seed: 12_001,
};
const LARGE: { sizes: Sizes; hubdbTables: number; seed: number } = {
  sizes: { site_pages: 1_500, landing_pages: 500, blog_posts: 3_000, blog_authors: 50, blog_tags: 150, hubdb_tables: 4, hubdb_rows: 3_000, url_redirects: 1_800 },
  hubdbTables: 4, seed: 12_002,
};
/** Types that change: HubDB tables stay (a table change is a schema change), HubDB rows are not archived (sweeps have their own cadence). */
const CHANGING: ContentType[] = CONTENT_TYPES.filter((t) => t !== 'hubdb_tables');
const HISTORY_TABLES = ['public.runs', 'public.jobs', 'public.notifications', 'private.worker_invocation_log', 'public.quiet_cycles'];

interface Shape { portals: number; minutes: number; quietMinutes: number; settleMinutes: number }

/** The scenario's size: --fleet-portals / --fleet-minutes, else 1,000 portals for 10 minutes (quick: 10 portals, one tick). */
function shapeOf(ctx: BenchContext): Shape {
  const portals = ctx.fleet?.portals ?? (ctx.quick ? 10 : 1_000);
  const minutes = ctx.fleet?.minutes ?? (ctx.quick ? 0.5 : 10);
  // The quiet window: the last fifth (at least a minute), after a settle of 1.5 intervals without changes.
  const quietMinutes = Math.max(1, Math.round(minutes / 5));
  return { portals, minutes, quietMinutes, settleMinutes: minutes <= 3 ? 1 : 1.5 };
}

interface Change {
  portalId: string; hubspotPortalId: number; type: ContentType; key: string; kind: 'updated' | 'created' | 'deleted'; at: number;
  storedAfterS: number | null;
  /** A later change of the same item came before this one was stored: only the later one can be seen. */
  superseded?: boolean;
}

interface Snapshot {
  at: number;
  postgresCpuMs: number | null;
  /** CPU of the bench's own backends (its sampling and checks), pid → ms: not the fleet's. */
  benchBackendsMs: Map<number, number>;
  /** The server's CPU by process kind (client backends, autovacuum, checkpointer, reaped children, ...). */
  pgByKind: Record<string, number> | null;
  workerCpuMs: number;
  hubspotRequests: number;
  rateLimited: number;
  workerRequests: number;
  cycles: number;
  /** Quiet schedule probes so far (the roll-ups' cycles less their folded runs' probe jobs). */
  quietProbes: number;
  /** Runs create_run inserted and dropped again (counted in the table statistics, not history). */
  dropped: number;
  /** Rows the steady-state mirror inserted (agedHistory): not history the fleet made. */
  aged: number;
  history: Record<string, { ins: number; del: number }>;
  machineBusyMs: number;
}

/** Busy CPU ms of the whole machine (all cores) since boot, from /proc/stat. */
async function machineBusyMs(): Promise<number> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = line;
  return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) * 1000) / 100;
}

async function historyCounters(sql: Sql): Promise<Snapshot['history']> {
  const rows = await sql`select schemaname || '.' || relname as t, n_tup_ins::float8 as ins, n_tup_del::float8 as del
                           from pg_stat_user_tables where schemaname || '.' || relname = any(${HISTORY_TABLES})`;
  return Object.fromEntries(rows.map((r) => [r.t as string, { ins: r.ins as number, del: r.del as number }]));
}

/**
 * The fleet in its steady state, as after months of running: history a cycle
 * keeps (a run that is not a quiet cycle, with its jobs and notification) is
 * deleted by retention once it is keep_finished old, at the rate it was made.
 * A 10-minute run has nothing that old, so every kept run that finishes gets a
 * copy that finished keep_finished earlier (the run of the same shape a month
 * ago), due for retention at once. The copies' inserts are not counted as
 * history created; their deletion is counted as pruned, so "pruned ÷ created"
 * says whether retention (pg_cron every 20 s, one bounded batch) keeps up.
 */
async function agedHistory(sql: Sql) {
  await sql.unsafe(`
    create table bench_fleet.aged (source_run uuid primary key, aged_run uuid not null, batch bigint not null);
    create sequence bench_fleet.aged_batch;
    create function bench_fleet.age_kept_history() returns integer language plpgsql as $f$
      declare
        v_age interval := (select s.keep_finished from private.retention_settings s where s.id);
        v_batch bigint := nextval('bench_fleet.aged_batch');
        v_columns text;
        v_runs integer;
        v_jobs integer;
        v_notes integer;
      begin
        insert into bench_fleet.aged (source_run, aged_run, batch)
        select r.id, gen_random_uuid(), v_batch from public.runs r
         where r.finished_at > now() - interval '2 minutes' and not r.quiet and r.created_at > now() - interval '1 day'
           and not exists (select 1 from bench_fleet.aged a where a.source_run = r.id);
        insert into public.runs
        select (jsonb_populate_record(null::public.runs, to_jsonb(r) || jsonb_build_object('id', a.aged_run,
                 'created_at', r.created_at - v_age, 'started_at', r.started_at - v_age, 'finished_at', r.finished_at - v_age))).*
          from public.runs r join bench_fleet.aged a on a.source_run = r.id where a.batch = v_batch;
        get diagnostics v_runs = row_count;
        select string_agg(quote_ident(c.attname), ', ' order by c.attnum) into v_columns
          from pg_attribute c where c.attrelid = 'public.jobs'::regclass and c.attnum > 0 and not c.attisdropped and c.attname <> 'id';
        execute format('insert into public.jobs (%1$s) select %1$s from jsonb_populate_recordset(null::public.jobs, $1)', v_columns)
          using (select coalesce(jsonb_agg(to_jsonb(j) || jsonb_build_object('run_id', a.aged_run, 'created_at', j.created_at - v_age,
                   'started_at', j.started_at - v_age, 'finished_at', j.finished_at - v_age, 'updated_at', j.updated_at - v_age)), '[]')
                   from public.jobs j join bench_fleet.aged a on a.source_run = j.run_id where a.batch = v_batch);
        get diagnostics v_jobs = row_count;
        insert into public.notifications (user_id, run_id, kind, message, created_at, read_at)
        select n.user_id, a.aged_run, n.kind, n.message, n.created_at - v_age, n.read_at
          from public.notifications n join bench_fleet.aged a on a.source_run = n.run_id where a.batch = v_batch;
        get diagnostics v_notes = row_count;
        return v_runs + v_jobs + v_notes;
      end $f$;`);
  let inserted = 0;
  return {
    /** Copies the kept runs finished since the last call (it runs every 2 s: a 2-minute look back); the rows inserted so far. */
    async step(): Promise<number> {
      const [row] = await sql`select bench_fleet.age_kept_history() as n`;
      inserted += Number(row!.n);
      return inserted;
    },
    inserted: () => inserted,
  };
}

export async function syncFleet(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = shapeOf(ctx);
  const dbUrl = await migratedDatabase(ctx.pg, 's12_sync_fleet');
  const sql: Sql = connectDatabase(dbUrl, { max: 3, applicationName: BENCH_APP });
  // --fleet-runs-per-tick: the tick's bound raised, to find what limits next (the default is the schema's).
  if (ctx.fleet?.runsPerTick !== undefined) await sql`update private.sync_settings set max_runs_per_tick = ${ctx.fleet.runsPerTick}`;
  // The worker's own defaults, where startLocalSystem sets shorter test values.
  const defaults = workerConfig({ SUPABASE_DB_URL: dbUrl, WORKER_SECRET: 'x', EXPORT_DIR: '/tmp' });
  // The functions' connections go through the pooler, as on hosted Supabase (the bench's own and the cron's do not).
  const pooler = await functionsPooler(ctx, dbUrl);
  const sys = await startLocalSystem(dbUrl, {
    env: {
      WORKER_TIME_BUDGET_MS: String(defaults.WORKER_TIME_BUDGET_MS), WORKER_MIN_START_MS: String(defaults.WORKER_MIN_START_MS),
      ...pooler.env,
    },
  });
  let cron: LocalCron | null = null;
  try {
    // Templates: one portal per size, fully synced by the real worker (no latency yet).
    const users = async (n: number) => {
      const ids = Array.from({ length: n }, () => randomUUID());
      await sql`insert into auth.users (id, email, aud, role) select u, u || '@fleet.test', 'authenticated', 'authenticated' from unnest(${ids}::uuid[]) u`;
      return ids;
    };
    const connect = async (hubspotPortalId: number, ownerId: string, cls: typeof SMALL) => {
      const token = `pat-fleet-${hubspotPortalId}-${randomUUID()}`;
      sys.sim.addPortal({ portalId: hubspotPortalId, token, sizes: cls.sizes, hubdbTables: cls.hubdbTables, seed: cls.seed });
      return await connectPrivateAppPortal(sql, sys.tokenKeys, { ownerId, hubspotPortalId, name: `Fleet portal ${hubspotPortalId}`, accessToken: token });
    };
    const [smallOwner, largeOwner] = await users(2);
    const templates = [
      { cls: SMALL, hubspotPortalId: 12_000_001, portalId: await connect(12_000_001, smallOwner!, SMALL), owner: smallOwner! },
      { cls: LARGE, hubspotPortalId: 12_000_002, portalId: await connect(12_000_002, largeOwner!, LARGE), owner: largeOwner! },
    ];
    const runIds: string[] = [];
    for (const t of templates) {
      const r = await createRun(sql, { portalId: t.portalId, requestedBy: t.owner, kind: 'fetch', contentTypes: CONTENT_TYPES, fetchMode: 'full' });
      runIds.push(r.runId!);
    }
    for (let waited = 0; ; waited += 2) {
      const [row] = await sql`select count(*) filter (where finished_at is null)::int as open, count(*) filter (where status <> 'completed')::int as bad
                                from public.runs where id = any(${runIds}::uuid[])`;
      if (row!.open === 0) {
        if (row!.bad > 0) throw new Error('a template sync did not complete');
        break;
      }
      if (waited > 600) throw new Error('the template syncs did not finish in 10 minutes');
      if (waited % 10 === 0) void sys.invokeWorker().catch(() => {});
      await sleep(2_000);
    }

    // The fleet: every portal a copy of its template, in the simulator and in the store.
    const largeCount = Math.max(shape.portals >= 100 ? 2 : 0, Math.floor(shape.portals / LARGE_EVERY));
    ctx.log(`${S}: seeding ${shape.portals} portals (${largeCount} large) by copying the synced templates`);
    const owners = await users(shape.portals);
    const fleet: { portalId: string; hubspotPortalId: number; items: number; large: boolean }[] = [];
    for (let i = 0; i < shape.portals; i++) {
      const large = i < largeCount;
      const hubspotPortalId = 12_100_000 + i;
      const portalId = await connect(hubspotPortalId, owners[i]!, large ? LARGE : SMALL);
      fleet.push({ portalId, hubspotPortalId, large, items: Object.values((large ? LARGE : SMALL).sizes).reduce((a, b) => a + b, 0) });
    }
    for (const t of templates) {
      const ids = fleet.filter((p) => p.large === (t.cls === LARGE)).map((p) => p.portalId);
      if (ids.length === 0) continue;
      await sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, fetched_at, deleted_at)
        select p.id, p.owner_id, c.content_type, c.hubspot_id,
               replace(c.data::text, ${`www.portal-${t.hubspotPortalId}.example.com`}, 'www.portal-' || p.hubspot_portal_id || '.example.com')::jsonb,
               c.hubspot_updated_at, c.fetched_at, c.deleted_at
          from public.hubspot_content c cross join public.portals p
         where c.portal_id = ${t.portalId} and p.id = any(${ids}::uuid[])`;
      await sql`insert into public.sync_marks (portal_id, owner_id, content_type, high_water, archived_high_water, last_full_at, last_incremental_at, last_sweep_at)
        select p.id, p.owner_id, m.content_type, m.high_water, m.archived_high_water, m.last_full_at, m.last_incremental_at, m.last_sweep_at
          from public.sync_marks m cross join public.portals p where m.portal_id = ${t.portalId} and p.id = any(${ids}::uuid[])`;
    }
    // The templates get no schedule: only fleet portals cycle.
    await sql`vacuum (analyze) public.hubspot_content`;
    // Every portal on a one-minute incremental schedule, created together (the fill trigger makes each due at once).
    await sql`insert into public.sync_schedules (portal_id, owner_id, incremental_every_minutes)
              select p.id, p.owner_id, ${INTERVAL_MINUTES} from public.portals p where p.id = any(${fleet.map((p) => p.portalId)}::uuid[])`;
    // The steady state's quiet history: a fleet that has run for months holds each portal's last keep_quiet_cycles
    // quiet cycles in full and 0 to quiet_cycles_per_fold - 1 more gathered for the next fold, spread evenly over
    // the portals (a run and its probe each, a minute apart), so the run's quiet cycles fold older ones at the rate
    // they will for months; a fresh fleet would fill those places first and count them as growth.
    await sql`insert into public.runs (portal_id, owner_id, requested_by, kind, status, content_types, jobs_total, jobs_completed,
                                       created_at, started_at, finished_at, fetch_mode, trigger, quiet)
              select p.id, p.owner_id, p.owner_id, 'fetch', 'completed', ${CONTENT_TYPES as unknown as string[]}::text[], 1, 1,
                     now() - make_interval(mins => g), now() - make_interval(mins => g), now() - make_interval(mins => g) + interval '1 second',
                     'incremental', 'schedule', true
                from (select p.*, row_number() over (order by p.id) as i from public.portals p
                       where p.id = any(${fleet.map((p) => p.portalId)}::uuid[])) p
                cross join private.retention_settings s
                cross join lateral generate_series(1, s.keep_quiet_cycles + ((p.i - 1) % s.quiet_cycles_per_fold)::int) g`;
    await sql`insert into public.jobs (run_id, portal_id, owner_id, kind, status, attempts, created_at, started_at, finished_at, updated_at, result)
              select r.id, r.portal_id, r.owner_id, 'probe', 'completed', 1, r.created_at, r.started_at, r.finished_at, r.finished_at,
                     jsonb_build_object('mode', 'probe', 'changed', '[]'::jsonb, 'fetched', 0, 'added', 0, 'updated', 0, 'deleted', 0)
                from public.runs r where r.quiet and r.portal_id = any(${fleet.map((p) => p.portalId)}::uuid[])`;
    // The bench's own count of portal-cycles: one row per scheduled run created (compaction may delete runs later).
    // Quiet schedule probes leave no run: they are counted from the day's roll-ups at each snapshot (quietProbes),
    // with no trigger of the bench's in the product's statements.
    // A run create_run drops again (every type still busy in the portal's previous run) is no cycle: it goes to `dropped`.
    await sql.unsafe(`create schema bench_fleet;
      create table bench_fleet.cycles (run_id uuid primary key, created_at timestamptz not null default clock_timestamp());
      create table bench_fleet.dropped (run_id uuid primary key, at timestamptz not null default clock_timestamp());
      create function bench_fleet.count_cycle() returns trigger language plpgsql as $f$
        begin
          if tg_op = 'INSERT' and new.trigger = 'schedule' and new.created_at > now() - interval '1 day' then insert into bench_fleet.cycles (run_id) values (new.id); end if;
          if tg_op = 'DELETE' and old.finished_at is null then
            delete from bench_fleet.cycles where run_id = old.id;
            insert into bench_fleet.dropped (run_id) values (old.id) on conflict do nothing;
          end if;
          return null;
        end $f$;
      create trigger bench_fleet_cycles after insert or delete on public.runs for each row execute function bench_fleet.count_cycle();
`);
    const aged = await agedHistory(sql);
    sys.sim.setLatency(LATENCY_MS);
    const traceStatements = statementTrace(ctx, sql, dbUrl, `${S}: the quiet window`);

    const items = fleet.reduce((a, p) => a + p.items, 0);
    const totalChanges = Math.max(ctx.quick ? 20 : 1, Math.round(items * CHANGE_SHARE));
    const runMs = shape.minutes * 60_000;
    const quietFrom = ctx.quick ? runMs : runMs - shape.quietMinutes * 60_000;
    const changeUntil = ctx.quick ? 1_500 : quietFrom - shape.settleMinutes * 60_000;
    // Quick: the cron's clock is shifted so its first minute starts 2 s in (one tick, changes made before it).
    const shift = ctx.quick ? Math.ceil(Date.now() / 60_000) * 60_000 + 60_000 - 2_000 - Date.now() : 0;
    const t0 = Date.now();
    cron = await startLocalCron(dbUrl, { projectUrl: sys.functions.url, workerSecret: sys.workerSecret, now: () => Date.now() + shift, log: ctx.log });
    const changeTimes = Array.from({ length: totalChanges }, () => t0 + Math.random() * changeUntil).sort((a, b) => a - b);
    const cumulative: number[] = [];
    fleet.reduce((acc, p) => (cumulative.push(acc + p.items), acc + p.items), 0);
    ctx.log(`${S}: clock started: ${items.toLocaleString()} items, ${totalChanges} changes over ${(changeUntil / 60_000).toFixed(1)} min, quiet window ${shape.quietMinutes} min`);

    const snapshot = async (): Promise<Snapshot> => {
      // A quiet probe adds a cycle and no job to its day's roll-up; a folded quiet run adds its one probe job too.
      const [c] = await sql`select (select count(*)::int from bench_fleet.cycles) as runs, (select count(*)::int from bench_fleet.dropped) as dropped,
                                   (select coalesce(sum(q.cycles - q.jobs), 0)::int from public.quiet_cycles q) as quiet_probes`;
      const sim = sys.sim.stats();
      const pgByKind = await postgresCpuByKind(ctx.pg.pid);
      return {
        at: Date.now(), postgresCpuMs: totalCpuMs(pgByKind), benchBackendsMs: await backendCpuMs(sql, BENCH_APP), pgByKind, workerCpuMs: workerCpuMs(sys), hubspotRequests: sim.requests,
        rateLimited: sim.rateLimited, workerRequests: sys.functions.stats().worker?.requests ?? 0,
        cycles: (c!.runs as number) + (c!.quiet_probes as number), quietProbes: c!.quiet_probes as number,
        dropped: c!.dropped as number, aged: await aged.step(), history: await historyCounters(sql), machineBusyMs: await machineBusyMs(),
      };
    };
    const start = await snapshot();
    let half: Snapshot | null = null;
    let quiet: Snapshot | null = null;
    const changes: Change[] = [];
    const samples: { s: number; due: number; running: number; oldestDueS: number; leases: number; cap: number; isolates: number }[] = [];
    let nextSample = t0;
    let nextPoll = t0;

    /** Marks changes now visible in the store; the first sighting's fetched_at (or deleted_at) is its store time. */
    const poll = async () => {
      const open = changes.filter((c) => c.storedAfterS === null && !c.superseded);
      if (open.length === 0) return;
      const rows = await sql`select c.i, extract(epoch from h.fetched_at) * 1000 as fetched, extract(epoch from h.deleted_at) * 1000 as deleted,
                                    extract(epoch from h.hubspot_updated_at) * 1000 as updated
        from unnest(${open.map((c) => c.portalId)}::uuid[], ${open.map((c) => c.type)}::text[], ${open.map((c) => c.key)}::text[], ${open.map((_, i) => i)}::int[]) c(p, t, k, i)
        join public.hubspot_content h on h.portal_id = c.p and h.content_type = c.t and h.hubspot_id = c.k`;
      for (const r of rows) {
        const c = open[r.i as number]!;
        const deleted = r.deleted === null ? null : Number(r.deleted);
        const storedAt = c.kind === 'deleted' ? deleted : (deleted === null && Number(r.updated) >= c.at - 1 ? Number(r.fetched) : null);
        if (storedAt !== null && storedAt >= c.at - 1_000) c.storedAfterS = Math.max(0, storedAt - c.at) / 1000;
      }
    };

    const change = (at: number) => {
      let pick = Math.random() * cumulative[cumulative.length - 1]!;
      const p = fleet[Math.max(0, cumulative.findIndex((c) => c > pick))]!;
      pick = Math.random();
      const kind: Change['kind'] = pick < 0.8 ? 'updated' : pick < 0.9 ? 'created' : 'deleted';
      const types = kind === 'deleted' ? CHANGING.filter((t) => t !== 'hubdb_rows') : CHANGING;
      const type = types[Math.floor(Math.random() * types.length)]!;
      const keys = kind === 'updated' ? sys.sim.touchItems(p.hubspotPortalId, type, 1)
        : kind === 'created' ? sys.sim.addItems(p.hubspotPortalId, type, 1) : sys.sim.deleteItems(p.hubspotPortalId, type, 1);
      for (const key of keys) {
        for (const c of changes) if (c.storedAfterS === null && c.portalId === p.portalId && c.type === type && c.key === key) c.superseded = true;
        changes.push({ portalId: p.portalId, hubspotPortalId: p.hubspotPortalId, type, key, kind, at, storedAfterS: null });
      }
    };

    // The run: changes at their times, the store polled for them, the queue sampled.
    while (Date.now() < t0 + runMs) {
      const now = Date.now();
      while (changeTimes.length > 0 && changeTimes[0]! <= now) change(Math.max(changeTimes.shift()!, now));
      if (!half && now >= t0 + runMs / 2) half = await snapshot();
      if (!quiet && now >= t0 + quietFrom) {
        quiet = await snapshot();
        if (traceStatements) await traceStatements.begin();
      }
      if (now >= nextPoll) {
        nextPoll = now + 2_000;
        await poll();
        await aged.step();
      }
      if (now >= nextSample) {
        nextSample = now + 5_000;
        const [q] = await sql`select count(*) filter (where status = 'pending' and run_after <= now())::int as due, count(*) filter (where status = 'running')::int as running,
                                     coalesce(extract(epoch from now() - min(run_after) filter (where status = 'pending' and run_after <= now())), 0)::float8 as oldest
                                from public.jobs where status in ('pending', 'running')`;
        const [l] = await sql`select * from public.worker_invocation_leases()`;
        samples.push({ s: Math.round((now - t0) / 1000), due: q!.due, running: q!.running, oldestDueS: round(q!.oldest, 1), leases: l!.active, cap: l!.cap,
          isolates: sys.functions.isolates('worker').length });
      }
      await sleep(200);
    }
    const end = await snapshot();
    const statements = await traceStatements?.end(end.cycles - (quiet?.cycles ?? end.cycles));
    quiet ??= end;
    half ??= start;
    // The quiet window's cycles, once all of them have finished (and been compacted, where history is compacted).
    const windowFrom = new Date(quiet.at);
    const windowTo = new Date(end.at);
    for (const until = Date.now() + 180_000; Date.now() < until;) {
      const [open] = await sql`select count(*)::int as n from public.runs r join bench_fleet.cycles c on c.run_id = r.id
                                 where c.created_at >= ${windowFrom} and c.created_at < ${windowTo} and r.finished_at is null`;
      if (open!.n === 0) break;
      await sleep(2_000);
    }
    const [left] = await sql`with w as (select run_id from bench_fleet.cycles where created_at >= ${windowFrom} and created_at < ${windowTo})
      select (select count(*)::int from public.runs where id in (select run_id from w)) as runs,
             (select count(*)::int from public.jobs where run_id in (select run_id from w)) as jobs,
             (select count(*)::int from public.notifications where run_id in (select run_id from w)) as notifications`;
    const logRows = (end.history['private.worker_invocation_log']?.ins ?? 0) - (quiet.history['private.worker_invocation_log']?.ins ?? 0)
      - ((end.history['private.worker_invocation_log']?.del ?? 0) - (quiet.history['private.worker_invocation_log']?.del ?? 0));
    // Drain: the cron keeps running until every change is stored and every window cycle has finished: at most
    // 5 minutes, or three times the backlog's age when the fleet fell behind (late is not lost), 30 at most.
    const [backlog] = await sql`select coalesce(extract(epoch from now() - min(run_after)), 0)::float8 as s
                                  from public.jobs where status = 'pending' and run_after <= now()`;
    const drainMs = ctx.quick ? 120_000 : Math.min(1_800_000, Math.max(300_000, 3_000 * Number(backlog!.s)));
    // An item created and deleted in the run before any read saw it has no row to tombstone: its deletion
    // is stored by storing nothing (and the drain waits for no sighting of it).
    const unseenDeletion = async (c: Change): Promise<boolean> => {
      if (c.kind !== 'deleted' || c.storedAfterS !== null || c.superseded) return false;
      if (!changes.some((e) => e.kind === 'created' && e.portalId === c.portalId && e.type === c.type && e.key === c.key)) return false;
      const [row] = await sql`select 1 from public.hubspot_content where portal_id = ${c.portalId} and content_type = ${c.type} and hubspot_id = ${c.key}`;
      return !row;
    };
    const drainFrom = Date.now();
    const drainUntil = drainFrom + drainMs;
    while (Date.now() < drainUntil) {
      await poll();
      const [open] = await sql`select count(*)::int as n from public.runs where trigger = 'schedule' and finished_at is null
                                 and id in (select run_id from bench_fleet.cycles where created_at <= to_timestamp(${end.at / 1000}))`;
      const pending = changes.filter((c) => c.storedAfterS === null && !c.superseded);
      if (open!.n === 0 && (await Promise.all(pending.map(unseenDeletion))).every(Boolean)) break;
      await sleep(2_000);
    }
    const afterDrain = await snapshot();
    const drainedS = (Date.now() - drainFrom) / 1000;
    await cron.stop();
    cron = null;

    // The window's unchanged cycles: its quiet schedule probes and scheduled runs, less the runs that stored a change
    // (compacted runs are gone: quiet ones).
    const [w] = await sql`select count(*)::int + ${end.quietProbes - quiet.quietProbes}::int as cycles,
        count(*) filter (where exists (select 1 from public.jobs j where j.run_id = c.run_id
          and coalesce((j.result ->> 'added')::int, 0) + coalesce((j.result ->> 'updated')::int, 0) + coalesce((j.result ->> 'deleted')::int, 0) > 0))::int as changed
        from bench_fleet.cycles c where c.created_at >= ${windowFrom} and c.created_at < ${windowTo}`;
    const unchanged = Math.max(0, (w!.cycles as number) - (w!.changed as number));
    // Rows a quiet cycle leaves: the history tables' growth (inserted less deleted) over the window, where each
    // cycle's rows come and an older cycle's go (compaction keeps a portal's last few in full, and a roll-up row a day).
    const delta = (t: string, k: 'ins' | 'del') => (end.history[t]?.[k] ?? 0) - (quiet!.history[t]?.[k] ?? 0);
    const rowsLeft = HISTORY_TABLES.reduce((s, t) => s + delta(t, 'ins') - delta(t, 'del'), 0) - (end.aged - quiet.aged);
    const notificationsSent = delta('public.notifications', 'ins');
    // History created and deleted (table statistics), less the runs create_run inserted and dropped at once,
    // and (created) less the steady state's aged copies.
    const sum = (a: Snapshot, b: Snapshot, k: 'ins' | 'del') => ['public.runs', 'public.jobs', 'public.notifications']
      .reduce((s, t) => s + (b.history[t]?.[k] ?? 0) - (a.history[t]?.[k] ?? 0), 0) - (b.dropped - a.dropped) - (k === 'ins' ? b.aged - a.aged : 0);
    const per = (x: number) => (unchanged > 0 ? x / unchanged : Number.NaN);
    // The bench's own queries (sampling, freshness polls, the steady-state mirror) are not the fleet's cost.
    const windowBenchPg = backendCpuDelta(quiet.benchBackendsMs, end.benchBackendsMs);
    const windowPg = quiet.postgresCpuMs === null || end.postgresCpuMs === null ? Number.NaN : end.postgresCpuMs - quiet.postgresCpuMs - windowBenchPg;
    // Where the window's Postgres CPU went, per unchanged cycle (the bench's backends left out of the client backends).
    const byKind = quiet.pgByKind && end.pgByKind ? cpuByKindDelta(quiet.pgByKind, end.pgByKind) : null;
    if (byKind) byKind['client backends'] = (byKind['client backends'] ?? 0) - windowBenchPg;
    const pgByKind = byKind ? Object.fromEntries(Object.entries(byKind).filter(([, v]) => v !== 0).map(([k, v]) => [k, round(per(v), 2)])) : null;
    if (pgByKind) ctx.log(`${S}: Postgres CPU per unchanged cycle by process: ${Object.entries(pgByKind).map(([k, v]) => `${k} ${v} ms`).join(', ')}`);

    // Changes: lost = never stored; and the whole store against the simulator.
    const neverSeen = new Set<Change>();
    for (const c of changes) if (await unseenDeletion(c)) neverSeen.add(c);
    const lost = changes.filter((c) => c.storedAfterS === null && !c.superseded && !neverSeen.has(c));
    let differences = 0;
    const byHubspotId = new Map(fleet.map((p) => [p.portalId, p.hubspotPortalId]));
    for (const type of CONTENT_TYPES) {
      const rows = await sql`select portal_id::text, hubspot_id, extract(epoch from hubspot_updated_at) * 1000 as updated from public.hubspot_content
        where content_type = ${type} and deleted_at is null and portal_id = any(${fleet.map((p) => p.portalId)}::uuid[])`;
      const stored = new Map<string, number>();
      for (const r of rows) stored.set(`${r.portal_id as string}|${r.hubspot_id as string}`, Number(r.updated));
      for (const p of fleet) {
        for (const item of sys.sim.items(p.hubspotPortalId, type)) {
          const k = `${p.portalId}|${item.key}`;
          if (stored.get(k) !== Date.parse(item.updatedAt)) differences++;
          stored.delete(k);
        }
      }
      differences += [...stored.keys()].filter((k) => byHubspotId.has(k.split('|')[0]!)).length;
    }
    const freshness = changes.filter((c) => c.storedAfterS !== null).map((c) => c.storedAfterS!);
    const p95 = percentile(freshness, 95);
    const ratio = p95 / ((INTERVAL_MINUTES * 60) + 60);
    const cycles = end.cycles - start.cycles;
    const invocations = end.workerRequests - start.workerRequests;
    const created = sum(half, end, 'ins');
    const pruned = sum(half, end, 'del');
    const wallMs = end.at - start.at;
    const pgShare = start.postgresCpuMs === null || end.postgresCpuMs === null ? Number.NaN : (end.postgresCpuMs - start.postgresCpuMs) / wallMs;
    const workerShare = (end.workerCpuMs - start.workerCpuMs) / wallMs;
    const machineShare = (end.machineBusyMs - start.machineBusyMs) / wallMs;
    const lastSamples = samples.slice(-Math.max(1, Math.floor(samples.length / 5)));
    const atCap = samples.filter((s) => s.leases >= s.cap).length / Math.max(1, samples.length);
    const backlogEnd = Math.max(...lastSamples.map((s) => s.oldestDueS));
    const expectedCycles = shape.portals * (runMs / 60_000) / INTERVAL_MINUTES;
    // What limits first: the resource nearest its ceiling while freshness holds or breaks.
    const [tick] = await sql`select max_runs_per_tick as n, probe_grace_seconds as grace from private.sync_settings`;
    const runsPerTick = Number(tick!.n);
    const limits = [
      // With schedule probes (decision 0058) the tick makes only full reconciles and the incrementals no lane probed.
      { what: `the tick's bound (max_runs_per_tick ${runsPerTick} runs a minute)`, used: Number(tick!.grace) > 0 ? 0 : shape.portals / INTERVAL_MINUTES / runsPerTick },
      { what: 'the machine\'s 2 cores (simulator, Postgres, edge runtime and bench share them)', used: machineShare / 2 },
      { what: 'Postgres CPU (one core per busy backend)', used: pgShare / 2 },
      { what: 'worker invocations at their cap (max_concurrent_invocations)', used: atCap },
    ].sort((a, b) => b.used - a.used);
    const verdict = `${ratio <= 1 ? 'freshness holds' : 'freshness breaks'} at ${shape.portals} portals: p95 ${round(p95, 1)} s against ${(INTERVAL_MINUTES * 60) + 60} s; ` +
      `cycles run ${cycles} of ${Math.round(expectedCycles)} due; oldest due job at the end ${backlogEnd} s; ` +
      `Postgres ${round(100 * pgShare, 0)}% of a core, worker isolates ${round(100 * workerShare, 0)}% of a core, machine ${round(100 * machineShare / 2, 0)}% of 2 cores, ` +
      `invocations at the cap ${round(100 * atCap, 0)}% of samples; nearest its limit: ${limits[0]!.what}; ` +
      `drained in ${round(drainedS, 0)} s (of at most ${round(drainMs / 1000, 0)} s)`;
    ctx.log(`${S}: ${verdict}`);

    ctx.checks.equal(S, 'every change reached the store', lost.length, 0);
    ctx.checks.equal(S, 'the store equals the simulator at the end', differences, 0);
    ctx.checks.expect(S, 'the local cron ran the schedules (runs created by schedule)', cycles > 0, `${cycles} scheduled runs`);
    const figures = [
      figure(S, 'sync fleet: portals', 'count', [shape.portals], { note: `${largeCount} large; ${items.toLocaleString()} items; ${shape.minutes} min` }),
      figure(S, 'sync fleet: freshness p95 ÷ (interval + 60 s)', 'ratio', [ratio], { goal: atMost(1, '≤ 1.0'), note: `p50 ${round(percentile(freshness, 50), 1)} s, p95 ${round(p95, 1)} s over ${freshness.length} changes` }),
      figure(S, 'sync fleet: changes lost', 'count', [lost.length], { goal: atMost(0, '0'), note: `${differences} rows differ from the simulator` }),
      figure(S, 'sync fleet: 429s', 'count', [afterDrain.rateLimited - start.rateLimited], { goal: atMost(0, '0') }),
      figure(S, 'sync fleet: history rows per unchanged portal-cycle', 'count', [per(rowsLeft)], { goal: atMost(1, '≤ 1'), note: `${unchanged} unchanged cycles of ${w!.cycles} in the quiet window; of its cycles ${left!.runs} runs, ${left!.jobs} jobs, ${left!.notifications} notifications still stored; log +${logRows}` }),
      figure(S, 'sync fleet: notifications per unchanged portal-cycle', 'count', [per(notificationsSent)], { goal: atMost(0, '0') }),
      figure(S, 'sync fleet: history pruned ÷ created', 'ratio', [created > 0 ? pruned / created : Number.NaN], { goal: atLeast(1, '≥ 1'), note: `second half: ${created} rows created, ${pruned} deleted (runs, jobs, notifications; steady state: each kept run mirrored by one keep_finished older, ${end.aged - half.aged} rows)` }),
      figure(S, 'sync fleet: Postgres CPU per unchanged portal-cycle', 'ms', [per(windowPg)], { goal: atMost(3, '≤ 3 ms'), note: `the bench's own queries left out: ${round(per(windowBenchPg), 2)} ms` }),
      figure(S, 'sync fleet: worker CPU per unchanged portal-cycle', 'ms', [per(end.workerCpuMs - quiet.workerCpuMs)]),
      figure(S, 'sync fleet: worker invocations per portal-cycle', 'ratio', [cycles > 0 ? invocations / cycles : Number.NaN], { goal: atMost(0.05, '≤ 0.05'), note: `${invocations} worker requests, ${cycles} cycles` }),
      figure(S, 'sync fleet: HubSpot requests per unchanged portal-cycle', 'count', [per(end.hubspotRequests - quiet.hubspotRequests)]),
    ];
    ctx.note(`${S}: ${verdict}. Seeded through SQL: a template portal per size fully synced by the worker, its rows and marks copied per portal. ` +
      `The simulator answers after ${LATENCY_MS} ms; 2 cores shared by the simulator, Postgres, the edge runtime and the bench. The functions reach Postgres ${pooler.via}.`);
    return {
      figures,
      details: { shape, largeCount, items, totalChanges, changes: { made: changes.length, superseded: changes.filter((c) => c.superseded).length, createdAndDeletedUnseen: neverSeen.size, lost: lost.length, differences,
          lostChanges: lost.slice(0, 20).map(({ type, key, kind, at }) => ({ type, key, kind, at: new Date(at).toISOString() })) }, freshness: { p50: percentile(freshness, 50), p95 },
        cycles, expectedCycles, invocations, window: { ...w, unchanged, pgByKind }, samples, verdict, statements, edge: sys.functions.stats().worker?.shutdowns },
    };
  } finally {
    await cron?.stop().catch(() => {});
    await sql.end({ timeout: 5 });
    await sys.stop();
    await pooler.stop();
  }
}
