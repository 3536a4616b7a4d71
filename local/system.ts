// The whole system on loopback for end-to-end tests: simulator, signing keys,
// both functions under real Deno, in a local edge runtime that enforces hosted
// Supabase's limits per isolate, behind the /functions/v1 gateway. Tokens are
// stored sealed under the test keys (local/test-token-keys.ts, unless the
// caller's env names others), so fixtures sealed in-process open in the
// functions; with `oauth`, the simulator has a HubSpot app registered and the
// orchestrator can install it; with `realtime`, the gateway serves Realtime too.
// The gateway serves the local Auth (./auth/auth.ts) at /auth/v1, signing with
// the same keys: sign up and sign in with supabase-js, or sign tokens directly.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connectDatabase } from '../shared/db.ts';
import { startLocalAuth, type LocalAuth } from './auth/auth.ts';
import { freePort } from './postgres.ts';
import { createSigningKeys, startLocalFunctions, type LimitOptions, type LocalFunctions, type SigningKeys } from './supabase.ts';
import { startHubSpotSimulator, type HubSpotSimulator, type SimulatorOptions } from '../hubspot-sim/server.ts';
import { parseTokenKeys, type TokenKeyring } from '../shared/token-crypto.ts';
import { TEST_TOKEN_KEYS } from './test-token-keys.ts';

/** A HubSpot OAuth app registered in the simulator and given to both functions as their secrets. */
export interface LocalOAuthApp {
  clientId: string;
  clientSecret: string;
  /** Where the simulator redirects the browser. */
  redirectUri: string;
}

export interface LocalSystem {
  sim: HubSpotSimulator;
  keys: SigningKeys;
  /** The local Auth behind the gateway's /auth/v1 (users in auth.users of this database). */
  auth: LocalAuth;
  functions: LocalFunctions;
  workerSecret: string;
  exportDir: string;
  /** The OAuth app, when started with `oauth`. */
  oauthApp: LocalOAuthApp | null;
  /** The keys both functions seal and open tokens with (HUBSPOT_TOKEN_KEYS): seal fixtures with these. Null if the caller's env emptied them. */
  tokenKeys: TokenKeyring | null;
  /** POSTs to the worker function with the worker secret; returns its JSON summary. */
  invokeWorker(): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** A fresh HUBSPOT_TOKEN_KEYS value (one AES-256 key) for a local run. */
export function localTokenKeys(): string {
  return `local1:${randomBytes(32).toString('base64')}`;
}

/** Registers a HubSpot app in the simulator; returns it and the function secrets that configure it. */
export function registerLocalOAuthApp(
  sim: HubSpotSimulator,
  /** redirectUri: default a loopback URL nothing listens on (the caller reads the redirect). */
  opts: { accessTokenTtlSeconds?: number; redirectUri?: string } = {},
): { app: LocalOAuthApp; env: Record<string, string> } {
  const app = {
    clientId: `local-app-${randomBytes(4).toString('hex')}`,
    clientSecret: randomBytes(24).toString('base64url'),
    redirectUri: opts.redirectUri ?? 'http://127.0.0.1/hubspot/install-callback',
  };
  sim.registerApp({ ...app, redirectUris: [app.redirectUri], accessTokenTtlSeconds: opts.accessTokenTtlSeconds });
  return {
    app,
    env: {
      HUBSPOT_CLIENT_ID: app.clientId,
      HUBSPOT_CLIENT_SECRET: app.clientSecret,
      HUBSPOT_REDIRECT_URI: app.redirectUri,
      HUBSPOT_AUTHORIZE_URL: `${sim.url}/oauth/authorize`,
    },
  };
}

/**
 * The install flow as a frontend and a browser run it, against the orchestrator over HTTP:
 * start (the authorize URL), HubSpot's authorize page (the simulator, whose next install
 * decides approve or deny), the redirect back, complete with its code and state.
 * Returns the orchestrator's answer to complete.
 */
export async function installThroughSimulator(o: {
  sim: HubSpotSimulator;
  orchestratorUrl: string;
  userJwt: string;
  hubspotPortalId: number;
  grant?: 'approve' | 'deny';
  name?: string;
}): Promise<{ status: number; body: Record<string, any> }> {
  const post = async (body: unknown) => {
    const res = await fetch(o.orchestratorUrl, {
      method: 'POST',
      headers: { Authorization: `Bearer ${o.userJwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const started = await post({ action: 'start_hubspot_install' });
  if (started.status !== 200) return started;
  o.sim.queueInstall({ portalId: o.hubspotPortalId, grant: o.grant ?? 'approve' });
  const redirect = await o.sim.authorize(started.body.authorizeUrl as string);
  const q = redirect.searchParams;
  const answer = q.get('code') !== null ? { code: q.get('code') } : { error: q.get('error') };
  return post({ action: 'complete_hubspot_install', state: q.get('state'), ...answer, ...(o.name ? { name: o.name } : {}) });
}

/** Starts simulator + functions against the database at `dbUrl`. */
export async function startLocalSystem(
  dbUrl: string,
  /**
   * limits: per-isolate edge limits (hosted free plan by default); read what they did with functions.stats().
   * oauth: register a HubSpot app in the simulator and configure both functions with it.
   * realtime: serve Realtime's postgres_changes from this (direct, not pooled) database URL.
   */
  opts: {
    sim?: SimulatorOptions;
    env?: Record<string, string>;
    limits?: LimitOptions;
    oauth?: boolean | { accessTokenTtlSeconds?: number; redirectUri?: string };
    realtime?: { dbUrl: string };
  } = {},
): Promise<LocalSystem> {
  const sim = await startHubSpotSimulator(opts.sim);
  const keys = await createSigningKeys();
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-e2e-exports-'));
  const workerSecret = `wsk_${crypto.randomUUID().replaceAll('-', '')}`;
  const oauth = opts.oauth ? registerLocalOAuthApp(sim, typeof opts.oauth === 'object' ? opts.oauth : {}) : null;
  const tokenKeys = opts.env?.HUBSPOT_TOKEN_KEYS ?? TEST_TOKEN_KEYS;
  const authSql = connectDatabase(dbUrl, { max: 2 });
  // Auth must know the gateway's URL before the gateway listens, so its port is picked first; another
  // process may take it before the gateway binds it (seen with parallel suites): then pick another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const auth = await startLocalAuth({ sql: authSql, keys, publicUrl: `http://127.0.0.1:${port}` });
    try {
      return await startOnPort(port, auth);
    } catch (e) {
      await auth.close();
      if (attempt >= 5 || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') {
        await authSql.end({ timeout: 2 });
        await sim.close();
        throw e;
      }
    }
  }

  async function startOnPort(port: number, auth: LocalAuth): Promise<LocalSystem> {
    const functions = await startLocalFunctions({
      names: ['orchestrator', 'worker'],
      port,
      upstreams: { '/auth/v1': auth.url },
      jwks: keys.jwks,
      limits: opts.limits,
      realtime: opts.realtime,
      env: {
        SUPABASE_DB_URL: dbUrl,
        WORKER_SECRET: workerSecret,
        EXPORT_DIR: exportDir,
        HUBSPOT_BASE_URL: sim.url,
        WORKER_TIME_BUDGET_MS: '30000',
        WORKER_MIN_START_MS: '1000',
        // Signs local export links (result.url), as Storage signs them when deployed.
        EXPORT_URL_KEY: randomBytes(24).toString('base64url'),
        ...oauth?.env,
        ...opts.env,
        HUBSPOT_TOKEN_KEYS: tokenKeys,
      },
    });
    return {
      sim,
      keys,
      auth,
      functions,
      workerSecret,
      exportDir,
      oauthApp: oauth?.app ?? null,
      tokenKeys: parseTokenKeys(tokenKeys),
      async invokeWorker() {
        const res = await fetch(functions.functionUrl('worker'), { method: 'POST', headers: { Authorization: `Bearer ${workerSecret}` }, body: '{}' });
        return (await res.json()) as Record<string, unknown>;
      },
      async stop() {
        await functions.stop();
        await auth.close();
        await authSql.end({ timeout: 2 });
        await sim.close();
      },
    };
  }
}
