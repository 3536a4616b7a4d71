// Scenario 1 (f), the ceiling: one single-row UPDATE by primary key per job
// (one round trip, one commit), same driver and settings as ours, same concurrency.
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

export async function runCeiling(o: { url: string; workers: number; rows: number; pgPid: number | null; checks: Checks; scenario: string }): Promise<QueueRunResult> {
  const conns = Array.from({ length: o.workers }, () => pool(o.url, 1));
  try {
    await Promise.all(conns.map((c) => c`select 1`));
    let next = 1;
    const meter = await cpuMeter(o.pgPid);
    const t0 = performance.now();
    await Promise.all(conns.map(async (sql) => {
      for (let id = next++; id <= o.rows; id = next++) {
        await sql`update bench.ceiling set n = n + 1, touched_at = now() where id = ${id}`;
      }
    }));
    const elapsed = performance.now() - t0;
    const cpu = await meter();
    const [row] = await conns[0]!`select count(*) filter (where n = 1)::int as once, count(*) filter (where n <> 1)::int as other from bench.ceiling`;
    o.checks.equal(o.scenario, 'ceiling: every row updated exactly once', row?.once, o.rows);
    o.checks.equal(o.scenario, 'ceiling: no row updated twice or missed', row?.other, 0);
    return queueRunResult(o.rows, elapsed, cpu);
  } finally {
    await Promise.all(conns.map((c) => c.end({ timeout: 5 })));
  }
}
