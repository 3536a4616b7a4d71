// Postgres CPU of a quiet incremental portal-cycle: a portal on a schedule
// whose HubSpot content did not change. Each cycle makes every schedule due,
// runs the tick (public.schedule_due_syncs: one incremental run of 8 types per
// portal), then drains the jobs as one worker lane would: claim, the run's
// HubDB tables list (taken by both HubDB jobs, stored by the first), save the
// empty listing pages the worker saves when nothing changed (per CMS type the
// changed and the archived listing; HubDB tables their whole list, read in
// full; HubDB rows their changed pass, plus the sweep pass on a sweep cycle),
// complete_fetch_job (which settles the run).
// All calls go through one connection; its backend's CPU (utime + stime from
// /proc, 10 ms ticks) over all cycles ÷ portal-cycles. A last cycle runs with
// pg_stat_statements tracking every statement (not in the CPU figure) and
// prints the statements per portal-cycle and the costliest ones.
//   npx tsx bench/quiet-cycle.ts [--portals 200] [--cycles 3]
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { completeFetchJob, saveFetchedPageRaw, storeHubdbTablesList, takeHubdbTablesList } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { migratedDatabase, pool, postgresCpuMs, startBenchPostgres } from './lib/pg.ts';
import { seedUsersAndPortals } from './lib/seed.ts';

const EMPTY = '{"results":[]}';
const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
/** HubDB rows' last page when no table is left to read (shared/hubspot/hubdb-rows.ts). */
const NO_TABLE = { tableId: null, nextTableId: null };

type Step = 'tick' | 'claim' | 'list' | 'save' | 'complete';

/** One quiet job as the worker runs it: the run's tables list (HubDB jobs), empty pages until its checkpoint says finished. */
async function quietJob(sql: Sql, job: ClaimedJob, add: (step: Step, f: () => Promise<unknown>) => Promise<unknown>): Promise<number> {
  if (job.contentType === 'hubdb_tables' || job.contentType === 'hubdb_rows') {
    const taken = (await add('list', () => takeHubdbTablesList(sql, job, 20))) as Awaited<ReturnType<typeof takeHubdbTablesList>>;
    if (taken?.decision === 'read') await add('list', () => storeHubdbTablesList(sql, job, [EMPTY]));
    else if (taken?.decision !== 'use') throw new Error(`job ${job.id}: tables list ${JSON.stringify(taken)}`);
  }
  let saves = 0;
  for (;;) {
    const saved = (await add('save', () => saveFetchedPageRaw(sql, job, EMPTY, job.contentType === 'hubdb_rows' ? NO_TABLE : null))) as
      { checkpoint: { finished?: boolean } } | null;
    if (!saved) throw new Error(`job ${job.id}: page refused`);
    saves++;
    if (saved.checkpoint.finished) break;
    if (saves > 4) throw new Error(`job ${job.id}: not finished after ${saves} empty pages`);
  }
  if (!(await add('complete', () => completeFetchJob(sql, job)))) throw new Error(`job ${job.id}: completion refused`);
  return saves;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { portals: { type: 'string', default: '200' }, cycles: { type: 'string', default: '3' } } });
  const portals = Number(values.portals);
  const cycles = Number(values.cycles);
  const log = (s: string) => console.error(s);
  const pg = await startBenchPostgres(log);
  try {
    const url = await migratedDatabase(pg, 'quiet_cycle');
    const sql = pool(url, 1) as unknown as Sql;
    await seedUsersAndPortals(sql, 1, portals);
    // Fully synced: every type has a mark; a one-minute incremental schedule, the full reconcile far off.
    await sql`insert into public.sync_marks (portal_id, owner_id, content_type, high_water, last_full_at)
      select p.id, p.owner_id, t, now() - interval '1 hour', now() from public.portals p, unnest(${CONTENT_TYPES as unknown as string[]}::text[]) t`;
    await sql`insert into public.sync_schedules (portal_id, incremental_every_minutes) select id, 1 from public.portals`;
    const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    // The backend's own utime + stime (its stat file only: postgresCpuMs also walks every process).
    const cpu = async () => {
      const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS_PER_SECOND;
    };
    if ((await postgresCpuMs(Number(pid))) === null) throw new Error('backend CPU is readable only for a local server (/proc)');
    const byStep: Record<Step, number> = { tick: 0, claim: 0, list: 0, save: 0, complete: 0 };
    const calls: Record<Step, number> = { tick: 0, claim: 0, list: 0, save: 0, complete: 0 };
    const add = async (step: Step, f: () => Promise<unknown>) => {
      const c0 = await cpu();
      const out = await f();
      byStep[step] += (await cpu()) - c0;
      calls[step]++;
      return out;
    };
    const cycle = async () => {
      await sql`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
      const [row] = (await add('tick', () => sql`select public.schedule_due_syncs() as n`)) as { n: number }[];
      if (row!.n !== portals) throw new Error(`the tick created ${row!.n} runs, not ${portals}`);
      let jobs = 0;
      for (;;) {
        const job = (await add('claim', () => claimNextJob(sql, 'bench-quiet', ['fetch']))) as ClaimedJob | null;
        if (!job) break;
        // Every type incremental but HubDB tables, read in full (docs/decisions/0045).
        if (((job.checkpoint as { mode?: string } | null)?.mode === 'incremental') !== (job.contentType !== 'hubdb_tables')) {
          throw new Error(`job ${job.id} (${job.contentType}) has the wrong mode`);
        }
        await quietJob(sql, job, add);
        jobs++;
      }
      if (jobs !== portals * 8) throw new Error(`drained ${jobs} jobs, not ${portals * 8}`);
      const [open] = await sql`select count(*)::int as n from public.runs where finished_at is null`;
      if (open!.n !== 0) throw new Error(`${open!.n} runs not settled`);
    };
    await cycle(); // warm-up (caches, plans), not measured
    for (const k of Object.keys(byStep) as Step[]) byStep[k] = calls[k] = 0;
    const total0 = await cpu();
    for (let c = 0; c < cycles; c++) {
      await cycle();
      log(`quiet cycle ${c + 1}/${cycles} done`);
    }
    const totalMs = (await cpu()) - total0;
    const n = portals * cycles;
    console.log(`${portals} portals × ${cycles} quiet incremental cycles, one connection (backend CPU, /proc, 10 ms ticks)`);
    console.log(`Postgres CPU per quiet portal-cycle: ${(totalMs / n).toFixed(2)} ms`);
    for (const k of Object.keys(byStep) as Step[]) {
      console.log(`  ${k.padEnd(8)} ${(byStep[k] / n).toFixed(2)} ms  (${(calls[k] / n).toFixed(1)} calls, ${((byStep[k] * 1000) / Math.max(1, calls[k])).toFixed(0)} µs each)`);
    }

    // Statements per portal-cycle: one more cycle with tracking on for this session only.
    await sql`create extension if not exists pg_stat_statements`;
    await sql.end({ timeout: 5 });
    const traced = postgres(url, { prepare: false, max: 1, onnotice: () => {}, connection: { 'pg_stat_statements.track': 'all' } });
    const plain = pool(url, 1);
    try {
      await plain`select pg_stat_statements_reset()`;
      const tracedSql = traced as unknown as Sql;
      await tracedSql`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
      await tracedSql`select public.schedule_due_syncs()`;
      for (;;) {
        const job = await claimNextJob(tracedSql, 'bench-quiet', ['fetch']);
        if (!job) break;
        await quietJob(tracedSql, job, (_s, f) => f());
      }
      const rows = await plain`select s.toplevel, s.calls, s.total_exec_time, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) as query
          from pg_stat_statements s
         where s.dbid = (select oid from pg_database where datname = current_database()) and s.calls > 0
           and s.query !~ 'pg_stat_statements|pg_catalog\\.|pg_type|sync_schedules set next_incremental_at'
         order by s.total_exec_time desc`;
      const nested = rows.filter((r) => !r.toplevel);
      const count = (rs: readonly (typeof rows)[number][]) => rs.reduce((a, r) => a + Number(r.calls), 0) / portals;
      console.log(`statements per quiet portal-cycle: ${count(rows.filter((r) => r.toplevel)).toFixed(1)} calls, ${count(nested).toFixed(1)} statements inside them`);
      for (const r of rows.slice(0, 12)) {
        console.log(`  ${((Number(r.total_exec_time) * 1000) / portals).toFixed(0).padStart(5)} µs ${(Number(r.calls) / portals).toFixed(1).padStart(5)}× ${r.toplevel ? 'top ' : '    '}${r.query}`);
      }
    } finally {
      await traced.end({ timeout: 5 });
      await plain.end({ timeout: 5 });
    }
  } finally {
    await pg.stop();
  }
}

await main();
