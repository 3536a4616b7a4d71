// A diagnostic, on with BENCH_STATEMENTS=1 where pg_stat_statements is preloaded
// (bench/lib/pg.ts): every statement of one window, nested ones too, the
// costliest per unit of work logged. Its own overhead lands in the window's
// CPU figures, and its times are wall times (on a busy machine, not CPU).
// BENCH_STATEMENTS=top tracks only the calls the clients make: how many a
// cycle, at a fraction of the overhead.
import type { Sql } from '../../shared/db.ts';
import type { BenchContext } from './context.ts';
import { round } from './stats.ts';

export interface StatementRow {
  toplevel: boolean;
  calls: number;
  ms: number;
  query: string;
}

/** A trace to begin and end around a window (`what` names it in the log), or null when not asked for. */
export function statementTrace(ctx: BenchContext, sql: Sql, dbUrl: string, what: string) {
  const track = { '1': 'all', top: 'top' }[process.env.BENCH_STATEMENTS ?? ''];
  if (!track || !ctx.pg.statStatements) return null;
  return {
    async begin(): Promise<void> {
      await sql`create extension if not exists pg_stat_statements`;
      await sql.unsafe(`alter system set pg_stat_statements.track = '${track}'`);
      await sql`select pg_reload_conf()`;
      await sql`select pg_stat_statements_reset()`;
    },
    /** Ends the trace and logs the costliest statements per `units` (the window's cycles; 1 for a whole window). */
    async end(units: number, unit = 'cycle'): Promise<StatementRow[]> {
      await sql.unsafe(`alter system set pg_stat_statements.track = 'none'`);
      await sql`select pg_reload_conf()`;
      const rows = await sql`select s.toplevel, s.calls::float8 as calls, s.total_exec_time::float8 as ms, s.max_exec_time::float8 as max_ms, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 120) as query
          from pg_stat_statements s where s.dbid = (select oid from pg_database where datname = current_database()) and s.calls > 0
         order by s.total_exec_time desc limit 40`;
      const top = rows.filter((r) => r.toplevel);
      const per = (ms: number) => (units > 0 ? (ms * 1000) / units : Number.NaN);
      ctx.log(`${what}: statements (${units} ${unit}s; ${new URL(dbUrl).pathname}): top level ${round(top.reduce((a, r) => a + (r.ms as number), 0), 0)} ms in all`);
      for (const r of rows.slice(0, 30)) {
        // The slowest call too: one call's first read of pages others wrote shows there, not in the mean.
        ctx.log(`  ${round(per(r.ms as number), 0).toString().padStart(8)} µs/${unit} ${round((r.calls as number) / Math.max(1, units), 2).toString().padStart(7)}× max ${round(r.max_ms as number, 1).toString().padStart(7)} ms ${r.toplevel ? 'top ' : '    '}${r.query as string}`);
      }
      return rows.map((r) => ({ toplevel: r.toplevel as boolean, calls: r.calls as number, ms: r.ms as number, query: r.query as string }));
    },
  };
}
