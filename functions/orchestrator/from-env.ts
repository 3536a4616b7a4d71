// Builds the orchestrator handler from environment variables (what Supabase gives an edge function).
import { createUserVerifier, parseJwks } from '../../shared/auth.ts';
import { configSecrets, databaseUrl, oauthApp, orchestratorConfig, tokenKeys, type Env } from '../../shared/config.ts';
import { connectDatabase } from '../../shared/db.ts';
import { createLogger } from '../../shared/log.ts';
import { supabaseKeys } from '../../shared/supabase-keys.ts';
import { localExportFiles, storageExportFiles } from './export-files.ts';
import { exportLinks } from './export-links.ts';
import { createOrchestratorHandler } from './handler.ts';
import { hubspotDeps } from './hubspot-deps.ts';
import { installConfigFromEnv } from './oauth-install.ts';

export interface RuntimeHooks {
  /** Keeps background work alive after the response (Supabase: EdgeRuntime.waitUntil). */
  waitUntil?: (p: Promise<unknown>) => void;
}

/** The orchestrator handler for this environment. */
export function orchestratorHandlerFromEnv(env: Env, hooks: RuntimeHooks = {}): (req: Request) => Promise<Response> {
  const cfg = orchestratorConfig(env);
  const keys = supabaseKeys(cfg);
  // Wakes the worker with its own secret, else a server key the worker also accepts.
  const workerSecret = cfg.WORKER_SECRET ?? keys.serverKey;
  const log = createLogger({
    base: { fn: 'orchestrator' },
    secrets: [workerSecret, ...keys.serverKeys, ...configSecrets(cfg), ...(env.EXPORT_URL_KEY ? [env.EXPORT_URL_KEY] : [])],
  });
  // OAuth installs: the app (HUBSPOT_CLIENT_ID / _SECRET) and its redirect URL; without them the install routes answer 501.
  const oauthInstall = installConfigFromEnv(cfg, {
    tokenBasePath: cfg.HUBSPOT_BASE_URL,
    requestTimeoutMs: cfg.HUBSPOT_REQUEST_TIMEOUT_MS,
    refreshMarginSeconds: cfg.HUBSPOT_TOKEN_REFRESH_MARGIN_SECONDS,
  });
  const supabaseUrl = cfg.SUPABASE_URL?.replace(/\/+$/, '');
  const workerUrl = cfg.WORKER_URL ?? (supabaseUrl ? `${supabaseUrl}/functions/v1/worker` : undefined);
  let jwks;
  try {
    jwks = cfg.SUPABASE_JWKS ? parseJwks(cfg.SUPABASE_JWKS) : undefined;
  } catch (e) {
    throw new Error(`orchestrator: missing or invalid environment variables: SUPABASE_JWKS (${(e as Error).message})`);
  }
  const sql = connectDatabase(databaseUrl(cfg), { max: cfg.DB_POOL_MAX, applicationName: 'queue-orchestrator' });
  const rateLimit = { maxPer10s: cfg.HUBSPOT_RATE_LIMIT_PER_10S ?? null, dailyReservePercent: cfg.HUBSPOT_DAILY_RESERVE_PERCENT };
  // Export files are read where the worker writes them: EXPORT_DIR (read from the raw
  // environment: the shared config schema does not list it for the orchestrator yet), else Storage.
  const exportDir = env.EXPORT_DIR?.trim() || undefined;
  const exportFiles = exportDir
    ? localExportFiles(exportDir)
    : supabaseUrl && keys.serverKey
      ? storageExportFiles({ supabaseUrl, serviceKey: keys.serverKey })
      : undefined;
  // Local files get signed links of their own (result.url) when EXPORT_URL_KEY is set (raw environment, as EXPORT_DIR).
  const urlKey = env.EXPORT_URL_KEY?.trim() || undefined;
  const links = exportDir && urlKey && supabaseUrl ? exportLinks(`${supabaseUrl}/functions/v1/orchestrator`, urlKey) : undefined;
  return createOrchestratorHandler({
    sql,
    log,
    maxBodyBytes: cfg.MAX_BODY_BYTES,
    exportFiles,
    exportLinks: links,
    // As supabase-js auth.getClaims(): asymmetric tokens against the JWKS (hosted's
    // SUPABASE_JWKS, then the endpoint for keys rotated in since), HS256 ones by asking Auth.
    verifyUser: createUserVerifier({
      jwks,
      jwksUrl: supabaseUrl ? `${supabaseUrl}/auth/v1/.well-known/jwks.json` : undefined,
      authUrl: supabaseUrl ? `${supabaseUrl}/auth/v1` : undefined,
      apiKey: keys.clientKey ?? keys.serverKey,
    }),
    ...hubspotDeps({
      sql,
      basePath: cfg.HUBSPOT_BASE_URL,
      rateLimit,
      tokenKeys: tokenKeys(cfg),
      oauthApp: oauthApp(cfg),
      requestTimeoutMs: cfg.HUBSPOT_REQUEST_TIMEOUT_MS,
      refreshMarginSeconds: cfg.HUBSPOT_TOKEN_REFRESH_MARGIN_SECONDS,
    }),
    oauthInstall,
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
