// Scenario 1 (f), the ceiling: one single-row UPDATE by primary key per job
// (one round trip, one commit), same driver and settings as ours, same
// concurrency. And the floor of any SKIP LOCKED queue driven like ours (a):
// a five-column table with one partial index, a claim statement and a
// completion by primary key, nothing else (no fairness, caps, runs,
// notifications, RLS-visible columns or plpgsql): how close to the ceiling a
// two-call claim/complete path can come on this machine.
import type postgres from 'postgres';
import { cpuMeter, pool } from '../lib/pg.ts';
import { queueRunResult, type Checks, type QueueRunResult } from '../lib/result.ts';

/** Adds the ceiling table to a template database: `rows` rows with a counter at 0. */
export async function seedCeiling(sql: postgres.Sql, rows: number): Promise<void> {
  await sql.unsafe(`
    create schema if not exists bench;
    create table bench.ceiling (id integer primary key, n integer not null default 0, touched_at timestamptz);
    insert into bench.ceiling (id) select i from generate_series(1, ${rows}) i;`);
}

interface RunOptions { url: string; workers: number; rows: number; pgPid: number | null; checks: Checks; scenario: string }

/**
 * Runs `work` on `workers` connections of their own at once (warmed first),
 * timing it and metering Postgres CPU; then `verify` on one of them.
 */
async function driveWorkers(
  o: RunOptions, work: (sql: postgres.Sql) => Promise<void>, verify: (sql: postgres.Sql) => Promise<void>,
): Promise<QueueRunResult> {
  const conns = Array.from({ length: o.workers }, () => pool(o.url, 1));
  try {
    await Promise.all(conns.map((c) => c`select 1`));
    const meter = await cpuMeter(o.pgPid);
    const t0 = performance.now();
    await Promise.all(conns.map(work));
    const elapsed = performance.now() - t0;
    const cpu = await meter();
    await verify(conns[0]!);
    return queueRunResult(o.rows, elapsed, cpu);
  } finally {
    await Promise.all(conns.map((c) => c.end({ timeout: 5 })));
  }
}

export async function runCeiling(o: RunOptions): Promise<QueueRunResult> {
  let next = 1;
  return await driveWorkers(o, async (sql) => {
    for (let id = next++; id <= o.rows; id = next++) {
      await sql`update bench.ceiling set n = n + 1, touched_at = now() where id = ${id}`;
    }
  }, async (sql) => {
    const [row] = await sql`select count(*) filter (where n = 1)::int as once, count(*) filter (where n <> 1)::int as other from bench.ceiling`;
    o.checks.equal(o.scenario, 'ceiling: every row updated exactly once', row?.once, o.rows);
    o.checks.equal(o.scenario, 'ceiling: no row updated twice or missed', row?.other, 0);
  });
}

/** Adds the bare queue to a template database: `rows` pending jobs. */
export async function seedFloor(sql: postgres.Sql, rows: number): Promise<void> {
  await sql.unsafe(`
    create schema if not exists bench;
    create table bench.floor_queue (id bigint primary key, status smallint not null default 0,
      run_after timestamptz not null default now(), lease_expires_at timestamptz, token bigint);
    create index floor_queue_pending on bench.floor_queue (run_after, id) where status = 0;
    create sequence bench.floor_token;
    insert into bench.floor_queue (id) select i from generate_series(1, ${rows}) i;`);
}

export async function runFloor(o: RunOptions): Promise<QueueRunResult> {
  return await driveWorkers(o, async (sql) => {
    for (;;) {
      const [job] = await sql`update bench.floor_queue q
                                 set status = 1, lease_expires_at = now() + interval '5 minutes', token = nextval('bench.floor_token')
                               where q.id = (select p.id from bench.floor_queue p where p.status = 0 and p.run_after <= now()
                                              order by p.run_after, p.id limit 1 for update skip locked)
                              returning q.id, q.token`;
      if (!job) return;
      await sql`update bench.floor_queue set status = 2, lease_expires_at = null where id = ${job.id} and token = ${job.token} and status = 1`;
    }
  }, async (sql) => {
    const [row] = await sql`select count(*) filter (where status = 2)::int as done, count(*) filter (where status <> 2)::int as other from bench.floor_queue`;
    o.checks.equal(o.scenario, 'floor: every job completed', row?.done, o.rows);
    o.checks.equal(o.scenario, 'floor: no job left pending or running', row?.other, 0);
  });
}
