// Environment configuration for both functions, validated at start. A missing
// required variable stops the function with a message naming every one missing.
import { z } from 'zod';
import { parseKeyMap, supabaseKeys } from './supabase-keys.ts';
import { parseTokenKeys, TOKEN_KEYS_VARIABLE, type TokenKeyring } from './token-crypto.ts';

export type Env = Record<string, string | undefined>;

const intIn = (min: number, max: number, dflt: number) =>
  z.preprocess((v) => (v === undefined || v === '' ? dflt : Number(v)), z.number().int().min(min).max(max));

const optional = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());
const optionalUrl = z.preprocess((v) => (v === '' ? undefined : v), z.string().url().regex(/^https?:\/\//).optional());

/**
 * What both functions read. Names starting with SUPABASE_ are provided by
 * Supabase (hosted and `supabase functions serve`) and cannot be set as
 * secrets; every other name is the user's.
 */
const commonEnv = {
  SUPABASE_DB_URL: z.string().min(1),
  SUPABASE_URL: optional,
  SUPABASE_SERVICE_ROLE_KEY: optional,
  SUPABASE_SECRET_KEYS: optional,
  SUPABASE_ANON_KEY: optional,
  SUPABASE_PUBLISHABLE_KEYS: optional,
  /** Optional: the transaction pooler's URL (port 6543); SUPABASE_DB_URL is the direct connection. */
  QUEUE_DB_URL: optional,
  WORKER_SECRET: optional,
  HUBSPOT_BASE_URL: optional,
  /** Optional ceiling per 10 s over every portal's limit as learned from HubSpot (docs/hubspot-limits.md); unset: none. */
  HUBSPOT_RATE_LIMIT_PER_10S: z.preprocess((v) => (v === undefined || v === '' ? undefined : Number(v)), z.number().int().min(1).max(10_000).optional()),
  /** Share (percent) of a private app's daily HubSpot quota never spent: left for the account's other work. */
  HUBSPOT_DAILY_RESERVE_PERCENT: intIn(0, 90, 10),
  DB_POOL_MAX: intIn(1, 50, 1),
  /** Keys that seal HubSpot tokens at rest: "keyId:base64key,olderId:base64key", the first current (shared/token-crypto.ts). */
  HUBSPOT_TOKEN_KEYS: optional,
  /** The HubSpot OAuth app (both needed for OAuth portals: the orchestrator installs, the worker refreshes). */
  HUBSPOT_CLIENT_ID: optional,
  HUBSPOT_CLIENT_SECRET: optional,
  /** An OAuth access token is refreshed this long before it expires (at most a quarter of its lifetime). */
  HUBSPOT_TOKEN_REFRESH_MARGIN_SECONDS: intIn(0, 3600, 300),
};

const workerEnv = z.object({
  ...commonEnv,
  /** The worker's lanes share the isolate's pool: connections open only as lanes need them (postgres.js opens lazily, closes idle ones). */
  DB_POOL_MAX: intIn(1, 50, 4),
  HUBSPOT_REQUEST_TIMEOUT_MS: intIn(1000, 120_000, 30_000),
  WORKER_TIME_BUDGET_MS: intIn(5_000, 3_600_000, 120_000),
  WORKER_CPU_BUDGET_MS: intIn(100, 60_000, 1_500),
  WORKER_ISOLATE_WALL_CLOCK_MS: intIn(10_000, 3_600_000, 150_000),
  WORKER_WALL_RESERVE_MS: intIn(1_000, 60_000, 10_000),
  /** Lanes an invocation starts with: jobs processed at once, at the least (formerly WORKER_CONCURRENCY). */
  WORKER_LANES: intIn(1, 16, 2),
  /** Lanes an invocation grows to while all are busy and more work is due (functions/worker/invocation.ts). */
  WORKER_MAX_LANES: intIn(1, 64, 16),
  /** Schedule probes a lane holds at once, asked together and reported in one call (functions/worker/schedule-probe.ts). */
  WORKER_PROBES_PER_LANE: intIn(1, 16, 16),
  WORKER_MIN_START_MS: intIn(0, 600_000, 5_000),
  /** Idle lanes keep looking for work this long after the invocation's last job (functions/worker/linger.ts). */
  WORKER_LINGER_MS: intIn(0, 10_000, 250),
  WORKER_CONTINUE: z.preprocess((v) => (v === undefined || v === '' ? '1' : v), z.enum(['0', '1'])),
  WORKER_URL: optional,
  EXPORT_DIR: optional,
});

const orchestratorEnv = z.object({
  ...commonEnv,
  SUPABASE_JWKS: optional,
  WORKER_URL: optional,
  HUBSPOT_REQUEST_TIMEOUT_MS: intIn(1000, 120_000, 15_000),
  MAX_BODY_BYTES: intIn(1024, 10 * 1024 * 1024, 64 * 1024),
  /** Where HubSpot sends the user back after an install (must match the app's redirect URL). */
  HUBSPOT_REDIRECT_URI: optionalUrl,
  /** HubSpot's authorize page (default https://app.hubspot.com/oauth/authorize; the simulator's in tests). */
  HUBSPOT_AUTHORIZE_URL: optionalUrl,
});

export type WorkerEnv = z.infer<typeof workerEnv>;
export type OrchestratorEnv = z.infer<typeof orchestratorEnv>;

/** Variables renamed, old name → new: the old one is still read while the new one is unset (docs/configuration.md#renamed-variables). */
export const RENAMED_VARIABLES: Readonly<Record<string, string>> = { WORKER_CONCURRENCY: 'WORKER_LANES' };

const isSet = (v: string | undefined) => v !== undefined && v !== '';

/** The renamed variables `env` still sets by their old name: `used` when the new name is unset (so the old one is read). */
export function renamedVariablesIn(env: Env): { variable: string; renamedTo: string; used: boolean }[] {
  return Object.entries(RENAMED_VARIABLES)
    .filter(([old]) => isSet(env[old]))
    .map(([old, renamedTo]) => ({ variable: old, renamedTo, used: !isSet(env[renamedTo]) }));
}

/** `env` with each renamed variable under its new name, when only the old one is set. */
function withRenamedVariables(env: Env): Env {
  const out = { ...env };
  for (const r of renamedVariablesIn(env)) if (r.used) out[r.renamedTo] = env[r.variable];
  return out;
}

function parseEnv<T extends z.ZodType>(schema: T, given: Env, fn: string): z.infer<T> {
  const env = withRenamedVariables(given);
  const r = schema.safeParse(env);
  if (!r.success) {
    // An invalid value read under an old name is reported under the name it was given by.
    const givenAs = (name: string) => renamedVariablesIn(given).find((x) => x.used && x.renamedTo === name)?.variable ?? name;
    const names = [...new Set(r.error.issues.map((i) => givenAs(String(i.path[0]))))].join(', ');
    throw new Error(`${fn}: missing or invalid environment variables: ${names}`);
  }
  try {
    parseTokenKeys(env[TOKEN_KEYS_VARIABLE] || undefined);
  } catch (e) {
    throw new Error(`${fn}: missing or invalid environment variables: ${TOKEN_KEYS_VARIABLE} (${(e as Error).message})`);
  }
  if (!env['HUBSPOT_CLIENT_ID'] !== !env['HUBSPOT_CLIENT_SECRET']) {
    throw new Error(`${fn}: missing or invalid environment variables: ${env['HUBSPOT_CLIENT_ID'] ? 'HUBSPOT_CLIENT_SECRET' : 'HUBSPOT_CLIENT_ID'} (the OAuth app needs both)`);
  }
  for (const name of ['SUPABASE_SECRET_KEYS', 'SUPABASE_PUBLISHABLE_KEYS'] as const) {
    try {
      parseKeyMap(name, env[name]);
    } catch (e) {
      throw new Error(`${fn}: missing or invalid environment variables: ${name} (${(e as Error).message})`);
    }
  }
  return r.data;
}

/** The token keys from the configuration (null when HUBSPOT_TOKEN_KEYS is unset: only legacy plaintext tokens can be used). */
export function tokenKeys(cfg: { HUBSPOT_TOKEN_KEYS?: string }): TokenKeyring | null {
  return parseTokenKeys(cfg.HUBSPOT_TOKEN_KEYS);
}

/** The OAuth app's credentials, or null when none is configured. */
export function oauthApp(cfg: { HUBSPOT_CLIENT_ID?: string; HUBSPOT_CLIENT_SECRET?: string }): { clientId: string; clientSecret: string } | null {
  return cfg.HUBSPOT_CLIENT_ID && cfg.HUBSPOT_CLIENT_SECRET ? { clientId: cfg.HUBSPOT_CLIENT_ID, clientSecret: cfg.HUBSPOT_CLIENT_SECRET } : null;
}

/**
 * Configuration values a function's logger must never print: database URLs,
 * the OAuth app's secret, and the token keys (the whole variable and each key in it).
 */
export function configSecrets(cfg: { SUPABASE_DB_URL?: string; QUEUE_DB_URL?: string; HUBSPOT_CLIENT_SECRET?: string; HUBSPOT_TOKEN_KEYS?: string }): string[] {
  const keys = (cfg.HUBSPOT_TOKEN_KEYS ?? '').split(',').map((k) => k.slice(k.indexOf(':') + 1).trim());
  return [cfg.SUPABASE_DB_URL, cfg.QUEUE_DB_URL, cfg.HUBSPOT_CLIENT_SECRET, cfg.HUBSPOT_TOKEN_KEYS, ...keys].filter((s): s is string => !!s);
}

/** The URL the functions connect with: QUEUE_DB_URL (pooler) when set, else SUPABASE_DB_URL. */
export function databaseUrl(cfg: { QUEUE_DB_URL?: string; SUPABASE_DB_URL: string }): string {
  return cfg.QUEUE_DB_URL ?? cfg.SUPABASE_DB_URL;
}

/** The worker's configuration; needs a database URL and at least one accepted secret. */
export function workerConfig(env: Env): WorkerEnv {
  const cfg = parseEnv(workerEnv, env, 'worker');
  const { serverKey } = supabaseKeys(cfg);
  if (!cfg.WORKER_SECRET && !serverKey) {
    throw new Error('worker: missing or invalid environment variables: WORKER_SECRET, or SUPABASE_SECRET_KEYS / SUPABASE_SERVICE_ROLE_KEY');
  }
  if (!cfg.EXPORT_DIR && !(cfg.SUPABASE_URL && serverKey)) {
    throw new Error('worker: missing or invalid environment variables: EXPORT_DIR, or SUPABASE_URL and SUPABASE_SECRET_KEYS / SUPABASE_SERVICE_ROLE_KEY for Storage');
  }
  return cfg;
}

/** The orchestrator's configuration; needs a database URL and a way to verify JWTs. */
export function orchestratorConfig(env: Env): OrchestratorEnv {
  const cfg = parseEnv(orchestratorEnv, env, 'orchestrator');
  if (!cfg.SUPABASE_URL && !cfg.SUPABASE_JWKS) {
    throw new Error('orchestrator: missing or invalid environment variables: SUPABASE_URL (Auth and its JWKS) or SUPABASE_JWKS');
  }
  return cfg;
}
