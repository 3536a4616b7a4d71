// Builds the orchestrator handler from environment variables (what Supabase gives an edge function).
import { createUserVerifier } from '../../shared/auth.ts';
import { orchestratorConfig, type Env } from '../../shared/config.ts';
import { connectDatabase } from '../../shared/db.ts';
import { createHubSpotClient } from '../../shared/hubspot/client.ts';
import { sharedRequestBudget } from '../../shared/hubspot-budget.ts';
import { createLogger } from '../../shared/log.ts';
import { createOrchestratorHandler } from './handler.ts';

export interface RuntimeHooks {
  /** Keeps background work alive after the response (Supabase: EdgeRuntime.waitUntil). */
  waitUntil?: (p: Promise<unknown>) => void;
}

/** The orchestrator handler for this environment. */
export function orchestratorHandlerFromEnv(env: Env, hooks: RuntimeHooks = {}): (req: Request) => Promise<Response> {
  const cfg = orchestratorConfig(env);
  const workerSecret = cfg.WORKER_SECRET ?? cfg.SUPABASE_SERVICE_ROLE_KEY;
  const log = createLogger({ base: { fn: 'orchestrator' }, secrets: [workerSecret, cfg.SUPABASE_JWT_SECRET, cfg.SUPABASE_DB_URL] });
  const supabaseUrl = cfg.SUPABASE_URL?.replace(/\/$/, '');
  const workerUrl = cfg.WORKER_URL ?? (supabaseUrl ? `${supabaseUrl}/functions/v1/worker` : undefined);
  const sql = connectDatabase(cfg.SUPABASE_DB_URL, { max: cfg.DB_POOL_MAX, applicationName: 'queue-orchestrator' });
  const rateLimit = { maxPer10s: cfg.HUBSPOT_RATE_LIMIT_PER_10S };
  return createOrchestratorHandler({
    sql,
    log,
    maxBodyBytes: cfg.MAX_BODY_BYTES,
    verifyUser: createUserVerifier({
      jwks: cfg.SUPABASE_JWKS ? JSON.parse(cfg.SUPABASE_JWKS) : undefined,
      jwksUrl: !cfg.SUPABASE_JWKS && supabaseUrl ? `${supabaseUrl}/auth/v1/.well-known/jwks.json` : undefined,
      legacySecret: cfg.SUPABASE_JWT_SECRET,
      issuer: cfg.SUPABASE_JWT_ISSUER,
    }),
    hubspotClient: (accessToken, hubspotPortalId) =>
      createHubSpotClient({
        accessToken,
        basePath: cfg.HUBSPOT_BASE_URL,
        requestTimeoutMs: cfg.HUBSPOT_REQUEST_TIMEOUT_MS,
        beforeRequest: hubspotPortalId ? sharedRequestBudget(sql, hubspotPortalId, rateLimit) : undefined,
      }),
    wakeWorker: () => {
      if (!workerUrl || !workerSecret) return;
      const wake = fetch(workerUrl, {
        method: 'POST',
        headers: { Authorization: `Bearer ${workerSecret}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ source: 'orchestrator' }),
      })
        .then((r) => r.body?.cancel())
        .catch((e) => log.warn('worker_wake_failed', { error: e instanceof Error ? e.message : String(e) }));
      hooks.waitUntil?.(wake);
    },
  });
}
