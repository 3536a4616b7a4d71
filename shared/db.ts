// Database access shared by both functions: postgres.js configured for a
// transaction-mode pooler (no prepared statements, no session state, and no
// pipelining: see pg-socket.ts).
import postgres from 'postgres';
import { openGatedSocket } from './pg-socket.ts';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
export type ReservedSql = postgres.ReservedSql;

export interface DatabaseOptions {
  /** Pool size for this process (edge functions: small). */
  max?: number;
  applicationName?: string;
  /**
   * One request in flight per connection (default true): required behind a
   * transaction-mode pooler, harmless elsewhere. False lets postgres.js pipeline.
   */
  serialize?: boolean;
}

/** Where a postgres:// URL points, for the gated socket; null for what it does not handle (Unix sockets, several hosts). */
function socketTarget(url: string): { host: string; port: number; sslmode?: string } | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (!u.hostname || u.searchParams.has('host') || u.hostname.includes(',')) return null;
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port || 5432), sslmode: u.searchParams.get('sslmode') ?? undefined };
}

/** Opens a pool that is safe behind Supavisor's (or PgBouncer's) transaction mode. */
export function connectDatabase(url: string, opts: DatabaseOptions = {}): Sql {
  const target = opts.serialize === false ? null : socketTarget(url);
  return postgres(url, {
    prepare: false,
    max: opts.max ?? 4,
    idle_timeout: 20,
    connect_timeout: 10,
    onnotice: () => {},
    connection: { application_name: opts.applicationName ?? 'pg-edge-queue' },
    // TLS, when the URL asks for it, is negotiated by the gated socket itself.
    ...(target ? { ssl: false, socket: () => openGatedSocket({ ...target, connectTimeoutMs: 10_000 }) } : {}),
  });
}

/** Claims PostgREST would put in request.jwt.claims for a signed-in user. */
export interface UserClaims {
  sub: string;
  role: string;
  [claim: string]: unknown;
}

/**
 * Runs `fn` in one transaction as the user, exactly as PostgREST does:
 * `set local role authenticated` plus request.jwt.claims, so RLS decides.
 */
export async function asUser<T>(sql: Sql, claims: UserClaims, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  const role = claims.role === 'anon' ? 'anon' : 'authenticated';
  return (await sql.begin(async (tx) => {
    await tx`select set_config('role', ${role}, true), set_config('request.jwt.claims', ${JSON.stringify(claims)}, true)`;
    return await fn(tx);
  })) as T;
}
