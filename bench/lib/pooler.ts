// How a bench's functions reach Postgres: through a transaction-mode PgBouncer, as
// hosted functions reach it through the pooler (a fresh backend costs ~25 ms of
// Postgres CPU, ~45 ms with the worker's first calls, and every isolate opens its
// own); without pgbouncer on the machine, directly (`via` says which).
import { findPgBouncer, startPgBouncer } from '../../local/pgbouncer.ts';
import type { BenchContext } from './context.ts';

export interface FunctionsPooler {
  /** The functions' environment: their database URL through the pooler (none when direct). */
  env: Record<string, string>;
  /** For the scenario's notes: how the functions reached Postgres. */
  via: string;
  stop(): Promise<void>;
}

/** The pooler's server connections per database: 20 (about a hosted pooler's default), BENCH_POOL_SIZE to try another. */
function poolSize(): number {
  const n = Number(process.env.BENCH_POOL_SIZE ?? 20);
  if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_POOL_SIZE must be a positive integer');
  return n;
}

export async function functionsPooler(ctx: BenchContext, dbUrl: string): Promise<FunctionsPooler> {
  const bin = findPgBouncer();
  const size = poolSize();
  const pooler = bin ? await startPgBouncer({ upstreamUrl: ctx.pg.adminUrl, bin, poolSize: size }) : null;
  return {
    env: pooler ? { SUPABASE_DB_URL: pooler.urlFor(dbUrl) } : {},
    via: pooler ? `through a transaction-mode PgBouncer (pool ${size}), as hosted functions use the pooler`
      : 'directly (no pgbouncer on this machine): every isolate\'s new connections cost Postgres their start',
    stop: async () => { await pooler?.stop(); },
  };
}
