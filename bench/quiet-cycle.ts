// Postgres CPU of a quiet incremental portal-cycle: a portal on a schedule
// whose HubSpot content did not change. Each cycle makes every schedule due,
// runs the tick (public.schedule_due_syncs), then drains the due schedules as
// one worker lane would: a schedule probe claimed from the row
// (claim_schedule_probe, with the portal's token and a grant of the probe's
// requests from its HubSpot budget) and reported with HubSpot's answers (and
// their rate headers) for a portal where nothing changed (report_schedule_probe: the CMS totals and the tables
// list; no run: docs/decisions/0058). With --runs, the tick's path instead
// (probe_grace_seconds 0): one scheduled incremental run per portal, which
// starts as one probe job (docs/decisions/0046), claimed, then completed by
// complete_probe_job, which settles the run as a quiet cycle; between them
// the token, the grant and the rate headers are calls of their own, as a
// probe job's worker makes them.
// All calls go through one connection; its backend's CPU (utime + stime from
// /proc, 10 ms ticks) over all cycles ÷ portal-cycles. A last cycle runs with
// pg_stat_statements tracking every statement (not in the CPU figure) and
// prints the statements per portal-cycle, the costliest ones, and those
// planned anew at nearly every call.
// With --lanes N the probes are drained by N lanes at once, each on its own
// connection, waiting --latency-ms (HubSpot's answer) between claim and
// report, as a fleet's lanes do; the figure is then all of Postgres's CPU, by
// process kind, with the tables autovacuum visited. --latency-ms alone: the
// one connection waits as long between claim and report.
// --per-fold N sets private.retention_settings.quiet_cycles_per_fold (decision 0053).
// --each-claim: every schedule probe claimed by a call of its own, not with the last one's report (decision 0061).
// --batch N (with --lanes): each lane holds N probes, reported and claimed together in one call (decision 0065).
//   npx tsx bench/quiet-cycle.ts [--portals 200] [--cycles 3] [--lanes 16 [--batch 4]] [--latency-ms 150] [--per-fold 1] [--runs | --each-claim]
// QC_TOP=N and QC_WIDTH=N: how many traced statements to print, and how much of each; QC_POOL=N: the
// connections the lanes share (default one each).
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { completeProbeJob } from '../shared/sql/fetch.ts';
import { claimScheduleProbe, reportAndClaimScheduleProbes, reportScheduleProbe, type ScheduleProbe } from '../shared/sql/schedule-probe.ts';
import { acquireHubSpotRequests, recordHubSpotRateHeaders } from '../shared/sql/budget.ts';
import type { RateLimitHeaders } from '../shared/hubspot/transport.ts';
import { claimPortalToken } from '../shared/sql/credentials.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { cpuByKindDelta, migratedDatabase, pool, postgresCpuByKind, postgresCpuMs, startBenchPostgres } from './lib/pg.ts';
import { seedUsersAndPortals } from './lib/seed.ts';

const EMPTY = '{"results":[]}';
const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
/** HubSpot's answers where nothing changed: no CMS item changed or archived after its marks. */
const NOTHING_CHANGED = Object.fromEntries(CONTENT_TYPES.filter((t) => t !== 'hubdb_tables' && t !== 'hubdb_rows').map((t) => [t, { changed: 0, archived: 0 }]));

const BUDGET = { maxRequests: 190, windowMs: 10_000, ceiling: null, dailyReservePercent: 0 };

type Step = 'tick' | 'claim' | 'budget' | 'complete';

/** A claimed quiet cycle: a probe job of the tick's run (--runs), or a schedule probe. */
type Claimed = { job: ClaimedJob } | { probe: ScheduleProbe };

const CLAIM_ARGS = { holder: '', refreshLeaseSeconds: 30, minValidSeconds: 5, budget: BUDGET };

/** A schedule probe's claim as a lane makes it: with the portal's token and the first round's grant. */
function checkedProbe(probe: ScheduleProbe | null): ScheduleProbe | null {
  if (probe && (probe.token?.claim.decision !== 'use' || probe.granted !== 13)) throw new Error(`portal ${probe.portalId}: token or grant missing`);
  return probe;
}

/** Claims one quiet cycle's probe as a worker lane does. */
async function claimOne(sql: Sql, lane: string, runs: boolean): Promise<Claimed | null> {
  if (runs) {
    const job = await claimNextJob(sql, lane, ['probe']);
    return job && { job };
  }
  const probe = checkedProbe(await claimScheduleProbe(sql, { ...CLAIM_ARGS, holder: lane }));
  return probe && { probe };
}

/** The last answer's rate limits (a limit high enough for every grant). */
function rateHeaders(): RateLimitHeaders {
  const at = Date.now();
  return { max: 1_000, intervalMs: 10_000, remaining: 999, daily: 250_000, dailyRemaining: 240_000, sentAt: at - 150, answeredAt: at };
}

/** What a probe job's worker asks between claim and report (a schedule probe's claim and report do it): token, grant, rate headers. */
async function budgetCalls(sql: Sql, c: Claimed): Promise<void> {
  if (!('job' in c)) return;
  const token = await claimPortalToken(sql, c.job.portalId, 'bench-quiet', null, 30, 5);
  if (token?.decision !== 'use') throw new Error(`portal ${c.job.portalId}: token ${token?.decision ?? 'missing'}`);
  await acquireHubSpotRequests(sql, token.hubspot_portal_id, 13, 190, 10_000, { authKind: 'private_app', ceiling: null, dailyReservePercent: 0 });
  await recordHubSpotRateHeaders(sql, token.hubspot_portal_id, rateHeaders());
}

/**
 * Reports a quiet cycle's probe with HubSpot's answers where nothing changed
 * (and the tables list); chained, a lane's next probe is claimed with it and returned.
 */
async function reportOne(sql: Sql, c: Claimed, chainedLane: string | null): Promise<Claimed | null> {
  let ok: boolean;
  let next: ScheduleProbe | null = null;
  if ('job' in c) ok = await completeProbeJob(sql, c.job, NOTHING_CHANGED, [EMPTY]);
  else if (chainedLane === null) ok = (await reportScheduleProbe(sql, c.probe, NOTHING_CHANGED, [EMPTY], rateHeaders())) === 'quiet';
  else {
    const done = await reportAndClaimScheduleProbes(sql, [{ probe: c.probe, answers: NOTHING_CHANGED, tablesPages: [EMPTY], rateHeaders: rateHeaders() }],
      1, { ...CLAIM_ARGS, holder: chainedLane });
    ok = done.outcomes[0] === 'quiet';
    next = checkedProbe(done.next[0] ?? null);
  }
  if (!ok) throw new Error(`probe ${'job' in c ? c.job.id : c.probe.portalId}: report refused`);
  return next && { probe: next };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    portals: { type: 'string', default: '200' }, cycles: { type: 'string', default: '3' },
    lanes: { type: 'string', default: '1' }, 'latency-ms': { type: 'string', default: '0' }, 'per-fold': { type: 'string' },
    runs: { type: 'boolean', default: false }, 'each-claim': { type: 'boolean', default: false }, batch: { type: 'string', default: '1' },
  } });
  const runs = values.runs!;
  const chained = !runs && !values['each-claim'];
  const portals = Number(values.portals);
  const cycles = Number(values.cycles);
  const lanes = Number(values.lanes);
  const latencyMs = Number(values['latency-ms']);
  const batch = Number(values.batch);
  if (batch > 1 && (runs || !chained || lanes < 2)) throw new Error('--batch is for lanes of chained schedule probes');
  const log = (s: string) => console.error(s);
  const pg = await startBenchPostgres(log);
  try {
    const url = await migratedDatabase(pg, 'quiet_cycle');
    const sql = pool(url, 1) as unknown as Sql;
    const setup = pool(url, 1) as unknown as Sql;
    const lanePool = lanes > 1 ? (pool(url, Number(process.env.QC_POOL ?? lanes)) as unknown as Sql) : null;
    await seedUsersAndPortals(sql, 1, portals);
    if (values['per-fold'] !== undefined) await sql`update private.retention_settings set quiet_cycles_per_fold = ${Number(values['per-fold'])}`;
    if (runs) await sql`update private.sync_settings set probe_grace_seconds = 0`;
    // Fully synced an hour ago: every type has its marks; a one-minute incremental schedule, the full reconcile far off.
    await sql`insert into public.sync_marks (portal_id, owner_id, content_type, high_water, archived_high_water, last_full_at, last_sweep_at)
      select p.id, p.owner_id, t, now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'
        from public.portals p, unnest(${CONTENT_TYPES as unknown as string[]}::text[]) t`;
    await sql`insert into public.sync_schedules (portal_id, incremental_every_minutes) select id, 1 from public.portals`;
    // A private-app token each (never opened here: HubSpot is not asked).
    await sql`insert into private.portal_credentials (portal_id, key_id, access_token_enc) select id, 'bench', 'v2.bench' from public.portals`;
    const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    // The backend's own utime + stime (its stat file only: postgresCpuMs also walks every process).
    const cpu = async () => {
      const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND;
    };
    if ((await postgresCpuMs(Number(pid))) === null) throw new Error('backend CPU is readable only for a local server (/proc)');
    const byStep: Record<Step, number> = { tick: 0, claim: 0, budget: 0, complete: 0 };
    const calls: Record<Step, number> = { tick: 0, claim: 0, budget: 0, complete: 0 };
    const add = async (step: Step, f: () => Promise<unknown>) => {
      const c0 = await cpu();
      const out = await f();
      byStep[step] += (await cpu()) - c0;
      calls[step]++;
      return out;
    };
    const cycle = async () => {
      // Every schedule due, and (as a minute after its last cycle) no grant left in any portal's window:
      // through another connection, not in the measured backend's CPU.
      await setup`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
      await setup`update private.hubspot_request_budgets set granted_at = '{}'`;
      const [row] = (await add('tick', () => sql`select public.schedule_due_syncs() as n`)) as { n: number }[];
      if (row!.n !== (runs ? portals : 0)) throw new Error(`the tick created ${row!.n} runs, not ${runs ? portals : 0}`);
      let jobs = 0;
      if (lanePool) {
        // Lanes at once: each claims, waits for HubSpot, reports, until no probe is left.
        await Promise.all(Array.from({ length: lanes }, async (_, i) => {
          const lane = `bench-quiet/${i}`;
          if (batch > 1) {
            // The lane holds up to --batch probes: all reported, and as many claimed, in one call.
            const args = { ...CLAIM_ARGS, holder: lane };
            let held = (await reportAndClaimScheduleProbes(lanePool, [], batch, args)).next.map((p) => checkedProbe(p)!);
            while (held.length > 0) {
              if (latencyMs > 0) await sleep(latencyMs);
              const done = await reportAndClaimScheduleProbes(lanePool, held.map((probe) => ({
                probe, answers: NOTHING_CHANGED, tablesPages: [EMPTY], rateHeaders: rateHeaders() })), batch, args);
              if (done.outcomes.some((o) => o !== 'quiet')) throw new Error(`lane ${lane}: a report refused`);
              jobs += held.length;
              held = done.next.map((p) => checkedProbe(p)!);
            }
            return;
          }
          for (let c = await claimOne(lanePool, lane, runs); c;) {
            await budgetCalls(lanePool, c);
            if (latencyMs > 0) await sleep(latencyMs);
            const next = await reportOne(lanePool, c, chained ? lane : null);
            jobs++;
            c = chained ? next : await claimOne(lanePool, lane, runs);
          }
        }));
      } else {
        const claim = () => add('claim', () => claimOne(sql, 'bench-quiet', runs)) as Promise<Claimed | null>;
        for (let c = await claim(); c;) {
          const claimed: Claimed = c;
          await add('budget', () => budgetCalls(sql, claimed));
          if (latencyMs > 0) await sleep(latencyMs);
          const next = (await add('complete', () => reportOne(sql, claimed, chained ? 'bench-quiet' : null))) as Claimed | null;
          jobs++;
          c = chained ? next : await claim();
        }
      }
      if (jobs !== portals) throw new Error(`drained ${jobs} probes, not ${portals}`);
      const [others] = await sql`select count(*)::int as n from public.jobs where kind <> 'probe'`;
      if (others!.n !== 0) throw new Error(`${others!.n} fetch jobs added to quiet cycles`);
      const [open] = await sql`select count(*)::int as n from public.runs where finished_at is null`;
      if (open!.n !== 0) throw new Error(`${open!.n} runs not settled`);
    };
    await cycle(); // warm-up (caches, plans), not measured
    for (const k of Object.keys(byStep) as Step[]) byStep[k] = calls[k] = 0;
    // One lane: its backend's CPU; lanes: all of Postgres (every backend, the postmaster, background workers).
    const totalCpu = async () => (lanePool ? (await postgresCpuMs(pg.pid))! : await cpu());
    const total0 = await totalCpu();
    const kinds0 = lanePool ? await postgresCpuByKind(pg.pid) : null;
    for (let c = 0; c < cycles; c++) {
      await cycle();
      log(`quiet cycle ${c + 1}/${cycles} done`);
    }
    const totalMs = (await totalCpu()) - total0;
    const n = portals * cycles;
    const kinds1 = kinds0 ? await postgresCpuByKind(pg.pid) : null;
    // Autovacuum and autoanalyze of the hot tables: each sends a relcache invalidation every backend rebuilds after.
    const vacuums = await setup`select relname, n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count
        from pg_stat_user_tables where autovacuum_count + autoanalyze_count > 0 order by autovacuum_count + autoanalyze_count desc`;
    for (const v of vacuums) console.log(`  ${v.relname}: ${v.n_tup_upd} updates (${v.n_tup_hot_upd} HOT), ${v.autovacuum_count} autovacuums, ${v.autoanalyze_count} autoanalyzes`);
    console.log(`${runs ? 'the tick\'s runs (probe jobs)' : chained ? 'schedule probes, each claimed with the last report' : 'schedule probes, each claimed on its own'}: ` + (lanePool
      ? `${portals} portals × ${cycles} quiet incremental cycles, ${lanes} lanes${batch > 1 ? ` of ${batch} probes` : ''} on their own connections, ${latencyMs} ms HubSpot latency (all Postgres CPU, /proc, 10 ms ticks)`
      : `${portals} portals × ${cycles} quiet incremental cycles, one connection (backend CPU, /proc, 10 ms ticks)`));
    console.log(`Postgres CPU per quiet portal-cycle: ${(totalMs / n).toFixed(2)} ms`);
    if (kinds0 && kinds1) {
      console.log(`  by process: ${Object.entries(cpuByKindDelta(kinds0, kinds1)).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${(v / n).toFixed(2)} ms`).join(', ')}`);
    }
    for (const k of Object.keys(byStep) as Step[]) {
      console.log(`  ${k.padEnd(8)} ${(byStep[k] / n).toFixed(2)} ms  (${(calls[k] / n).toFixed(1)} calls, ${((byStep[k] * 1000) / Math.max(1, calls[k])).toFixed(0)} µs each)`);
    }

    // Statements per portal-cycle: one more cycle with tracking on for this session only.
    await sql`create extension if not exists pg_stat_statements`;
    await sql.end({ timeout: 5 });
    await setup.end({ timeout: 5 });
    await lanePool?.end({ timeout: 5 });
    const traced = postgres(url, { prepare: false, max: 1, onnotice: () => {}, connection: { 'pg_stat_statements.track': 'all', 'pg_stat_statements.track_planning': 'on' } });
    const plain = pool(url, 1);
    try {
      await plain`select pg_stat_statements_reset()`;
      const tracedSql = traced as unknown as Sql;
      await plain`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
      await plain`update private.hubspot_request_budgets set granted_at = '{}'`;
      await tracedSql`select public.schedule_due_syncs()`;
      for (let c = await claimOne(tracedSql, 'bench-quiet', runs); c;) {
        await budgetCalls(tracedSql, c);
        const next = await reportOne(tracedSql, c, chained ? 'bench-quiet' : null);
        c = chained ? next : await claimOne(tracedSql, 'bench-quiet', runs);
      }
      const rows = await plain`select s.toplevel, s.calls, s.plans, s.total_exec_time + s.total_plan_time as total_exec_time, left(regexp_replace(s.query, '\\s+', ' ', 'g'), ${Number(process.env.QC_WIDTH ?? 110)}::int) as query
          from pg_stat_statements s
         where s.dbid = (select oid from pg_database where datname = current_database()) and s.calls > 0
           and s.query !~ 'pg_stat_statements|pg_catalog\\.|pg_type|sync_schedules set next_incremental_at'
         order by s.total_exec_time desc`;
      const nested = rows.filter((r) => !r.toplevel);
      const count = (rs: readonly (typeof rows)[number][]) => rs.reduce((a, r) => a + Number(r.calls), 0) / portals;
      console.log(`statements per quiet portal-cycle: ${count(rows.filter((r) => r.toplevel)).toFixed(1)} calls, ${count(nested).toFixed(1)} statements inside them`);
      // Counts that do not move with the machine's speed (a top-level statement's include its nested ones'): a change's
      // effect shows here when the CPU figure's run-to-run noise (15–30% on a shared machine) hides it.
      const [work] = await plain`select sum(s.shared_blks_hit + s.shared_blks_read)::float8 as buffers, sum(s.shared_blks_dirtied)::float8 as dirtied,
            sum(s.wal_records)::float8 as wal_records, sum(s.wal_bytes)::float8 as wal_bytes
          from pg_stat_statements s
         where s.dbid = (select oid from pg_database where datname = current_database()) and s.toplevel
           and s.query !~ 'pg_stat_statements|pg_catalog\\.|pg_type|sync_schedules set next_incremental_at|hubspot_request_budgets set granted_at'`;
      const perCycle = (v: unknown) => (Number(v) / portals).toFixed(1);
      console.log(`work per quiet portal-cycle: ${perCycle(work!.buffers)} buffer reads, ${perCycle(work!.dirtied)} pages dirtied, ${perCycle(work!.wal_records)} WAL records, ${perCycle(work!.wal_bytes)} WAL bytes`);
      for (const r of rows.slice(0, Number(process.env.QC_TOP ?? 12))) {
        console.log(`  ${((Number(r.total_exec_time) * 1000) / portals).toFixed(0).padStart(5)} µs ${(Number(r.calls) / portals).toFixed(1).padStart(5)}× ${r.toplevel ? 'top ' : '    '}${r.query}`);
      }
      // Statements planned at (nearly) every call: a plpgsql statement whose custom plans keep beating its generic one.
      const replanned = rows.filter((r) => !r.toplevel && Number(r.calls) >= portals / 2 && Number(r.plans) / Number(r.calls) > 0.5);
      console.log(`statements planned at every call (plans ÷ calls > 0.5): ${replanned.length}`);
      for (const r of replanned) console.log(`  ${(Number(r.plans) / Number(r.calls)).toFixed(2)} plans a call, ${(Number(r.calls) / portals).toFixed(1)}× ${r.query}`);
    } finally {
      await traced.end({ timeout: 5 });
      await plain.end({ timeout: 5 });
    }
  } finally {
    await pg.stop();
  }
}

await main();
