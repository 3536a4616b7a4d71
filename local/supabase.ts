// A local stand-in for a Supabase project's HTTP surface, on 127.0.0.1 only:
// the edge functions run under a local edge runtime that holds every isolate to
// hosted Supabase's limits (CPU, wall clock, memory; local/edge-runtime/),
// behind a gateway that serves them at /functions/v1/<name>, the project's
// JWKS at /auth/v1/.well-known/jwks.json and, with `realtime`, Realtime's
// postgres_changes at /realtime/v1/websocket (local/realtime/). Other
// project paths answer 501.
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import { createGateway } from './edge-runtime/gateway.ts';
import { resolveLimits, type EdgeLimits, type LimitOptions } from './edge-runtime/limits.ts';
import { Supervisor, type FunctionStats, type IsolateInfo, type ShutdownRecord } from './edge-runtime/supervisor.ts';
import { freePort, PROJECT_ROOT } from './postgres.ts';
import { startLocalRealtime, type LocalRealtime } from './realtime/server.ts';

const DENO_BIN = path.join(PROJECT_ROOT, 'node_modules/.bin/deno');

export type { EdgeLimits, FunctionStats, IsolateInfo, LimitOptions, LocalRealtime, ShutdownRecord };
export { HOSTED_LIMITS, WALL_CLOCK_BY_PLAN } from './edge-runtime/limits.ts';
export { summarizeEdgeStats } from './edge-runtime/summary.ts';

export interface SigningKeys {
  jwks: { keys: JWK[] };
  /** Signs a user access token the way Supabase Auth does (ES256, aud authenticated). */
  signUserToken(userId: string, opts?: { expiresInSeconds?: number; extraClaims?: Record<string, unknown> }): Promise<string>;
  /** The project's anon key (a JWT with role anon, as the CLI's local one, valid ten years): what createClient takes. */
  anonKey: string;
  /** Signs exactly these claims with the project's key (ES256, its kid): what the local Auth issues with. */
  sign(claims: JWTPayload): Promise<string>;
}

/** Generates an ES256 key pair and a signer for user tokens. */
export async function createSigningKeys(): Promise<SigningKeys> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: `local-${Date.now()}`, alg: 'ES256', use: 'sig' };
  const anonKey = await new SignJWT({ role: 'anon' })
    .setProtectedHeader({ alg: 'ES256', kid: jwk.kid, typ: 'JWT' })
    .setIssuer('supabase-local')
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + 10 * 365 * 86_400)
    .sign(privateKey);
  return {
    jwks: { keys: [jwk] },
    anonKey,
    sign: (claims) => new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: jwk.kid, typ: 'JWT' }).sign(privateKey),
    signUserToken: (userId, opts = {}) =>
      new SignJWT({ role: 'authenticated', aal: 'aal1', ...opts.extraClaims })
        .setProtectedHeader({ alg: 'ES256', kid: jwk.kid, typ: 'JWT' })
        .setSubject(userId)
        .setAudience('authenticated')
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + (opts.expiresInSeconds ?? 3600))
        .sign(privateKey),
  };
}

export interface LocalFunctions {
  /** The stand-in SUPABASE_URL (gateway base URL). */
  url: string;
  functionUrl(name: string): string;
  /** The limits every isolate is held to. */
  limits: EdgeLimits;
  /** The Realtime stand-in behind /realtime/v1/websocket; null when not served (see `realtimeUnavailable`). */
  realtime: LocalRealtime | null;
  /** Why Realtime is not served, when it is not. */
  realtimeUnavailable: string | null;
  /** The process of each function's current (request-taking) isolate, by name; absent between isolates. */
  processes: Map<string, ChildProcess>;
  /** Lines each function printed (stdout and stderr of all its isolates), and the runtime's JSON event lines about it (boot, beforeunload, shutdown). */
  output: Map<string, string[]>;
  /** Per function: isolates started, requests, shutdowns by reason, hard kills, beforeunload events, CPU per request and per isolate. */
  stats(): Record<string, FunctionStats>;
  /** The live isolates (of one function, or all). */
  isolates(name?: string): IsolateInfo[];
  /** Kills every isolate of a function with `signal` (shutdown reason Killed); the next request starts a fresh one. */
  killIsolates(name: string, signal?: NodeJS.Signals): Promise<void>;
  /** killIsolates, then starts a fresh isolate and waits until it serves. */
  restart(name: string, signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

export interface StartFunctionsOptions {
  names: readonly string[];
  /**
   * The function's secrets, plus the platform values the caller has (SUPABASE_DB_URL and, if
   * wanted, SUPABASE_ANON_KEY, SUPABASE_SERVICE_ROLE_KEY, SUPABASE_PUBLISHABLE_KEYS,
   * SUPABASE_SECRET_KEYS). Other SUPABASE_* names are refused, as hosted refuses such secrets.
   * SUPABASE_URL (the gateway), SUPABASE_JWKS, SB_REGION, SB_EXECUTION_ID and
   * DENO_DEPLOYMENT_ID are filled in. Nothing else reaches the function.
   */
  env: Record<string, string>;
  jwks: { keys: JWK[] };
  onLine?: (fn: string, line: string) => void;
  onShutdown?: (rec: ShutdownRecord) => void;
  port?: number;
  /** Limits per isolate; hosted's (free plan) by default. `{ plan: 'paid' }` gives the 400 s wall clock. */
  limits?: LimitOptions;
  /**
   * Other local stand-ins the gateway forwards to, by path prefix (full path kept), e.g.
   * { '/auth/v1': localAuth.url }. Unmapped project paths answer 501 NOT_SERVED_LOCALLY.
   */
  upstreams?: Record<string, string>;
  /**
   * Serve Realtime's postgres_changes (local/realtime/) from this database: a direct URL, not a
   * transaction pooler (a session holds the replication slot); needs wal_level=logical. With
   * `required: false` a database that cannot feed it leaves Realtime unserved (501, saying why).
   */
  realtime?: { dbUrl: string; required?: boolean };
  /** Where `<name>/index.ts` live, relative to the project root (default supabase/functions). */
  functionsDir?: string;
  /**
   * Requests one isolate takes at once; beyond that another isolate starts. Default: no cap, as
   * supabase/edge-runtime's per-worker policy (concurrent requests share the isolate, its CPU and memory).
   */
  isolateConcurrency?: number;
  /**
   * How long stop() lets in-flight requests and waitUntil work finish (isolates get "drain", then
   * beforeunload("early_drop") once idle, as hosted on a termination request) before killing them. Default 1000.
   */
  stopGraceMs?: number;
}

/** SUPABASE_* names hosted Supabase itself injects (platform docs, "Environment Variables"). */
const PLATFORM_SUPABASE_NAMES = new Set([
  'SUPABASE_URL',
  'SUPABASE_DB_URL',
  'SUPABASE_ANON_KEY',
  'SUPABASE_SERVICE_ROLE_KEY',
  'SUPABASE_PUBLISHABLE_KEYS',
  'SUPABASE_SECRET_KEYS',
  'SUPABASE_JWKS',
]);

/** What the Deno process itself may need (cache dirs, proxies, CA); deleted before the function runs. */
const RUNTIME_ENV_NAMES = [
  'PATH', 'HOME', 'DENO_DIR', 'XDG_CACHE_HOME', 'TMPDIR', 'LANG', 'TZ', 'NO_COLOR',
  'NPM_CONFIG_REGISTRY', 'npm_config_registry', 'DENO_CERT', 'DENO_TLS_CA_STORE', 'SSL_CERT_FILE',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
];

function runtimeEnv(): Record<string, string> {
  return Object.fromEntries(RUNTIME_ENV_NAMES.filter((k) => process.env[k]).map((k) => [k, process.env[k]!]));
}

/** Starts the local edge runtime for each function and the gateway in front of them. */
export async function startLocalFunctions(opts: StartFunctionsOptions): Promise<LocalFunctions> {
  for (const k of Object.keys(opts.env)) {
    if (k.startsWith('SUPABASE_') && !PLATFORM_SUPABASE_NAMES.has(k)) {
      throw new Error(`function env: ${k} is not allowed (hosted refuses secrets named SUPABASE_*; the platform injects ${[...PLATFORM_SUPABASE_NAMES].join(', ')})`);
    }
  }
  const limits = resolveLimits(opts.limits);
  const gatewayPort = opts.port ?? (await freePort());
  const url = `http://127.0.0.1:${gatewayPort}`;
  const output = new Map<string, string[]>();
  const processes = new Map<string, ChildProcess>();
  const supervisor = new Supervisor(
    {
      projectRoot: PROJECT_ROOT,
      denoBin: DENO_BIN,
      limits,
      isolateConcurrency: opts.isolateConcurrency,
      runtimeEnv: runtimeEnv(),
      onLine: (fn, line) => {
        const lines = output.get(fn)!;
        lines.push(line);
        if (lines.length > 5000) lines.shift();
        opts.onLine?.(fn, line);
      },
      onShutdown: opts.onShutdown,
    },
    (fn, child) => (child ? processes.set(fn, child) : processes.delete(fn)),
  );
  const functionsDir = opts.functionsDir ?? 'supabase/functions';
  for (const name of opts.names) {
    output.set(name, []);
    supervisor.add(name, path.join(functionsDir, name, 'index.ts'), {
      ...opts.env,
      SUPABASE_URL: url,
      SUPABASE_JWKS: JSON.stringify(opts.jwks),
      SB_REGION: 'local',
      DENO_DEPLOYMENT_ID: `local_${name}_1`,
    });
  }
  let realtime: LocalRealtime | null = null;
  let realtimeUnavailable: string | null = 'this run did not start the Realtime stand-in (startLocalFunctions without `realtime`)';
  if (opts.realtime) {
    try {
      realtime = await startLocalRealtime({ dbUrl: opts.realtime.dbUrl, jwks: opts.jwks, log: (line) => opts.onLine?.('realtime', line) });
      realtimeUnavailable = null;
    } catch (e) {
      if (opts.realtime.required !== false) throw e;
      realtimeUnavailable = e instanceof Error ? e.message : String(e);
    }
  }
  const gateway = createGateway({
    supervisor,
    jwks: opts.jwks,
    requestIdleTimeoutMs: limits.requestIdleTimeoutMs,
    upstreams: opts.upstreams,
    realtime: realtime ?? undefined,
    realtimeUnavailable: realtimeUnavailable ?? undefined,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      gateway.once('error', reject);
      gateway.listen(gatewayPort, '127.0.0.1', () => resolve());
    });
  } catch (e) {
    // Nothing is left running: the caller may pick another port (the port was free when picked, not when bound).
    await realtime?.close();
    gateway.closeUpstreams();
    await supervisor.stop(0);
    throw e;
  }
  const stop = async () => {
    await realtime?.close();
    gateway.closeAllConnections();
    await new Promise<void>((r) => gateway.close(() => r()));
    gateway.closeUpstreams();
    await supervisor.stop(opts.stopGraceMs ?? 1000);
  };
  try {
    // Fail fast on a function that cannot start.
    await Promise.all([...supervisor.pools.values()].map((p) => p.warm()));
  } catch (e) {
    await stop();
    throw e;
  }
  const pool = (name: string) => {
    const p = supervisor.pools.get(name);
    if (!p) throw new Error(`no function ${name}`);
    return p;
  };
  return {
    url,
    functionUrl: (name) => `${url}/functions/v1/${name}`,
    limits,
    realtime,
    realtimeUnavailable,
    processes,
    output,
    stats: () =>
      Object.fromEntries(
        [...supervisor.pools].map(([name, p]) => [
          name,
          {
            ...p.stats,
            shutdowns: { ...p.stats.shutdowns },
            beforeunload: { ...p.stats.beforeunload },
            cpuMsPerRequest: [...p.stats.cpuMsPerRequest],
            cpuMsPerIsolate: [...p.stats.cpuMsPerIsolate],
          },
        ]),
      ),
    isolates: (name) => [...supervisor.pools.values()].filter((p) => !name || p.name === name).flatMap((p) => [...p.isolates].map((i) => i.info())),
    killIsolates: (name, signal = 'SIGKILL') => pool(name).killAll(signal),
    async restart(name, signal = 'SIGKILL') {
      const p = pool(name);
      await p.killAll(signal);
      if (!p.stopping) await p.warm();
    },
    stop,
  };
}
