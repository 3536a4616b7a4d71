// The orchestrator handler wired to a real database and the simulator, for direct calls.
import { createOrchestratorHandler } from '../../functions/orchestrator/handler.ts';
import { createSigningKeys, type SigningKeys } from '../../local/supabase.ts';
import { createUserVerifier } from '../../shared/auth.ts';
import type { Sql } from '../../shared/db.ts';
import { hubspotDeps } from '../../functions/orchestrator/hubspot-deps.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import { silentLogger, type Logger } from '../../shared/log.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface OrchestratorHarness {
  handler: (req: Request) => Promise<Response>;
  keys: SigningKeys;
  wakes: { count: number };
  /** A request to the handler with the user's bearer token (when given). */
  request(method: string, opts?: { token?: string | null; body?: unknown; rawBody?: string; query?: string; headers?: Record<string, string> }): Request;
}

/** Builds the handler as the Deno entrypoint does, minus the environment. */
export async function orchestratorHarness(sql: Sql, hubspotUrl: string, opts: { maxBodyBytes?: number; log?: Logger } = {}): Promise<OrchestratorHarness> {
  const keys = await createSigningKeys();
  const wakes = { count: 0 };
  const handler = createOrchestratorHandler({
    sql,
    log: opts.log ?? silentLogger,
    maxBodyBytes: opts.maxBodyBytes ?? 64 * 1024,
    verifyUser: createUserVerifier({ jwks: keys.jwks, legacySecret: 'legacy-test-secret-0123456789abcdef' }),
    ...hubspotDeps({
      sql,
      basePath: hubspotUrl,
      rateLimit: { maxPer10s: 190 },
      tokenKeys: testTokenKeys, // the fixtures' keys: portals connected by createUserWithPortal open here
      oauthApp: null,
      client: { maxTransientRetries: 1, sleep: (ms) => sleep(Math.min(ms, 20)) },
    }),
    wakeWorker: () => {
      wakes.count++;
    },
  });
  return {
    handler,
    keys,
    wakes,
    request(method, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) };
      if (o.token) headers.Authorization = `Bearer ${o.token}`;
      const body = o.rawBody ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      return new Request(`http://127.0.0.1/functions/v1/orchestrator${o.query ?? ''}`, { method, headers, body: method === 'GET' || method === 'HEAD' ? undefined : body });
    },
  };
}

/** Row counts of the tables a request could write to. */
export async function writeCounts(sql: Sql): Promise<Record<string, number>> {
  const [row] = await sql`select
    (select count(*)::int from public.portals) as portals,
    (select count(*)::int from public.runs) as runs,
    (select count(*)::int from public.jobs) as jobs,
    (select count(*)::int from public.notifications) as notifications,
    (select count(*)::int from private.portal_credentials) as credentials,
    (select count(*)::int from public.jobs where status = 'stopped') as stopped_jobs`;
  return row as Record<string, number>;
}
