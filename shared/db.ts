// Database access shared by both functions: postgres.js configured for a
// transaction-mode pooler (no prepared statements, no session state).
import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;

export interface DatabaseOptions {
  /** Pool size for this process (edge functions: small). */
  max?: number;
  applicationName?: string;
}

/** Opens a pool that is safe behind Supavisor's transaction mode. */
export function connectDatabase(url: string, opts: DatabaseOptions = {}): Sql {
  return postgres(url, {
    prepare: false,
    max: opts.max ?? 4,
    idle_timeout: 20,
    connect_timeout: 10,
    onnotice: () => {},
    connection: { application_name: opts.applicationName ?? 'pg-edge-queue' },
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
