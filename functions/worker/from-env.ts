// Builds the worker handler from environment variables (what Supabase gives an edge function).
import { configSecrets, databaseUrl, oauthApp, renamedVariablesIn, tokenKeys, workerConfig, type Env } from '../../shared/config.ts';
import { connectDatabase } from '../../shared/db.ts';
import type { Platform } from '../../shared/edge-platform.ts';
import { createLogger } from '../../shared/log.ts';
import { supabaseKeys } from '../../shared/supabase-keys.ts';
import { localDirectorySink } from './local-sink.ts';
import { supabaseStorageSink } from './tus-sink.ts';
import { createWorkerHandler } from './handler.ts';

/** The worker handler for this environment, living in `platform`'s lifecycle; its log lines go to `write` (default: stdout). */
export function workerHandlerFromEnv(env: Env, platform?: Platform, write?: (line: string) => void): (req: Request) => Promise<Response> {
  const cfg = workerConfig(env);
  const keys = supabaseKeys(cfg);
  // The worker's own secret first (what cron and continuations send), then every server key of the project (new sb_secret_… keys and the legacy service_role key).
  const secrets = [...new Set([cfg.WORKER_SECRET, ...keys.serverKeys].filter((s): s is string => !!s))];
  const selfUrl = cfg.WORKER_URL ?? (cfg.SUPABASE_URL ? `${cfg.SUPABASE_URL.replace(/\/$/, '')}/functions/v1/worker` : undefined);
  const log = createLogger({
    base: { fn: 'worker' },
    secrets: [...secrets, ...configSecrets(cfg)],
    write,
  });
  // Once per isolate: a variable still set by its old name (names only, never a value).
  for (const r of renamedVariablesIn(env)) {
    log.warn('config_variable_renamed', { variable: r.variable, renamed_to: r.renamedTo, read: r.used ? r.variable : r.renamedTo });
  }
  return createWorkerHandler({
    sql: connectDatabase(databaseUrl(cfg), { max: cfg.DB_POOL_MAX, applicationName: 'queue-worker' }),
    log,
    acceptedSecrets: secrets,
    platform,
    tokenKeys: tokenKeys(cfg),
    oauthApp: oauthApp(cfg),
    continuation: cfg.WORKER_CONTINUE === '1' && selfUrl ? { url: selfUrl, secret: secrets[0]! } : undefined,
    exportSink: cfg.EXPORT_DIR
      ? localDirectorySink(cfg.EXPORT_DIR)
      : supabaseStorageSink({ supabaseUrl: cfg.SUPABASE_URL!, serviceKey: keys.serverKey! }),
    settings: {
      budgetMs: cfg.WORKER_TIME_BUDGET_MS,
      cpuBudgetMs: cfg.WORKER_CPU_BUDGET_MS,
      isolateWallClockMs: cfg.WORKER_ISOLATE_WALL_CLOCK_MS,
      wallReserveMs: cfg.WORKER_WALL_RESERVE_MS,
      lanes: cfg.WORKER_LANES,
      maxLanes: cfg.WORKER_MAX_LANES,
      probesPerLane: cfg.WORKER_PROBES_PER_LANE,
      minStartMs: cfg.WORKER_MIN_START_MS,
      lingerMs: cfg.WORKER_LINGER_MS,
      hubspotBasePath: cfg.HUBSPOT_BASE_URL,
      rateLimit: { maxPer10s: cfg.HUBSPOT_RATE_LIMIT_PER_10S ?? null, dailyReservePercent: cfg.HUBSPOT_DAILY_RESERVE_PERCENT },
      hubspotRequestTimeoutMs: cfg.HUBSPOT_REQUEST_TIMEOUT_MS,
      tokenRefreshMarginSeconds: cfg.HUBSPOT_TOKEN_REFRESH_MARGIN_SECONDS,
    },
  });
}
