// HubSpot OAuth install: the state kept in Postgres (bound to the user,
// single-use, expiring, bounded per user, pruned) and the PKCE and authorize
// URL the orchestrator builds from it.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOrchestratorHandler, type OrchestratorDeps } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import {
  authorizeUrl, HUBSPOT_INSTALL_SCOPES, INSTALL_STATE, installConfigFromEnv, installStateHash, newInstallState, pkceChallenge, pkceVerifier,
  type OAuthInstallConfig,
} from '../functions/orchestrator/oauth-install.ts';
import { consumeInstallState, createInstallState } from '../shared/sql/oauth-install.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { createSigningKeys, type SigningKeys } from '../local/supabase.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { silentLogger } from '../shared/log.ts';
import { parseTokenKeys } from '../shared/token-crypto.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { writeCounts } from './support/orchestrator-harness.ts';
import { cronJobOfFile } from './support/cron-files.ts';

const db = useTestDatabase();
const MIGRATION = path.join(PROJECT_ROOT, 'supabase/schemas/0920_cron_prune_oauth_install_states.sql');

async function stateRows(userId?: string): Promise<number> {
  const [row] = userId
    ? await db.sql`select count(*)::int as n from private.oauth_install_states where user_id = ${userId}`
    : await db.sql`select count(*)::int as n from private.oauth_install_states`;
  return row!.n as number;
}

/** A new state recorded for the user; returns the state and its hash. */
async function started(userId: string) {
  const state = newInstallState();
  const hash = await installStateHash(state);
  await createInstallState(db.sql, userId, hash);
  return { state, hash };
}

beforeEach(async () => {
  await db.sql`update private.oauth_install_settings set state_ttl = interval '10 minutes', max_open_states = 5, prune_batch_size = 5000`;
});

describe('install states in Postgres', () => {
  it('stores only the SHA-256 of the state, bound to the user, expiring after the setting (10 minutes)', async () => {
    const user = await createUser(db.sql);
    const { state, hash } = await started(user);
    const rows = await db.sql`select state_hash, user_id, expires_at - created_at as ttl from private.oauth_install_states where user_id = ${user}`;
    expect(rows).toHaveLength(1);
    expect(Buffer.from(rows[0]!.state_hash as Uint8Array).equals(Buffer.from(hash))).toBe(true);
    expect(rows[0]!.ttl).toBe('00:10:00');
    const dump = JSON.stringify(await db.sql`select * from private.oauth_install_states`);
    expect(dump).not.toContain(state);
    expect(dump).not.toContain(Buffer.from(state).toString('hex'));
  });

  it('is consumed once by its user; a replay, a forged state and another user get false and change nothing', async () => {
    const owner = await createUser(db.sql);
    const other = await createUser(db.sql);
    const { hash } = await started(owner);
    expect(await consumeInstallState(db.sql, other, hash)).toBe(false);
    expect(await consumeInstallState(db.sql, owner, await installStateHash(newInstallState()))).toBe(false);
    expect(await stateRows(owner)).toBe(1);
    expect(await consumeInstallState(db.sql, owner, hash)).toBe(true);
    expect(await stateRows(owner)).toBe(0);
    expect(await consumeInstallState(db.sql, owner, hash)).toBe(false);
  });

  it('refuses an expired state and leaves it to the prune', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    await db.sql`update private.oauth_install_states set created_at = now() - interval '11 minutes', expires_at = now() - interval '1 minute' where user_id = ${user}`;
    expect(await consumeInstallState(db.sql, user, hash)).toBe(false);
    expect(await stateRows(user)).toBe(1);
  });

  it('keeps at most max_open_states per user: a new one drops the oldest', async () => {
    const user = await createUser(db.sql);
    const states = [];
    for (let i = 0; i < 7; i++) {
      states.push(await started(user));
      // distinct created_at even within one clock tick: back-date the earlier ones
      await db.sql`update private.oauth_install_states set created_at = created_at - interval '1 second' where user_id = ${user}`;
    }
    expect(await stateRows(user)).toBe(5);
    expect(await consumeInstallState(db.sql, user, states[0]!.hash)).toBe(false);
    expect(await consumeInstallState(db.sql, user, states[1]!.hash)).toBe(false);
    for (const s of states.slice(2)) expect(await consumeInstallState(db.sql, user, s.hash)).toBe(true);
  });

  it('holds the bound under 20 concurrent starts of one user on separate connections', async () => {
    const user = await createUser(db.sql);
    const pools = Array.from({ length: 4 }, () => db.connect(5));
    await Promise.all(Array.from({ length: 20 }, (_, i) => (async () => {
      const hash = await installStateHash(newInstallState());
      await createInstallState(pools[i % pools.length]!, user, hash);
    })()));
    expect(await stateRows(user)).toBe(5);
  });

  it('is consumed exactly once by 16 concurrent callbacks with the same state', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    const pools = Array.from({ length: 4 }, () => db.connect(4));
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => consumeInstallState(pools[i % pools.length]!, user, hash)));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await stateRows(user)).toBe(0);
  });

  it('refuses bad arguments, and a hash that is not 32 bytes', async () => {
    const user = await createUser(db.sql);
    await expect(db.sql`select public.create_oauth_install_state(${user}, ${randomBytes(16)})`).rejects.toMatchObject({ code: '22023' });
    await expect(db.sql`select public.create_oauth_install_state(null, ${randomBytes(32)})`).rejects.toMatchObject({ code: '22023' });
    // a user that does not exist: the foreign key refuses
    await expect(createInstallState(db.sql, crypto.randomUUID(), randomBytes(32))).rejects.toMatchObject({ code: '23503' });
    const [row] = await db.sql`select public.consume_oauth_install_state(null, null) as ok`;
    expect(row!.ok).toBe(false);
  });

  it('is deleted with its user', async () => {
    const user = await createUser(db.sql);
    await started(user);
    await db.sql`delete from auth.users where id = ${user}`;
    expect(await stateRows(user)).toBe(0);
  });

  it('is not reachable by signed-in users: no grant on the table or the functions', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    const claims = JSON.stringify({ sub: user, role: 'authenticated' });
    for (const query of [
      'select count(*) from private.oauth_install_states',
      `select public.consume_oauth_install_state('${user}', '\\x${Buffer.from(hash).toString('hex')}')`,
      `select public.create_oauth_install_state('${user}', '\\x${randomBytes(32).toString('hex')}')`,
      'select public.prune_oauth_install_states()',
    ]) {
      await expect(db.sql.begin(async (tx) => {
        await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${claims}, true)`;
        await tx.unsafe(query);
      })).rejects.toMatchObject({ code: '42501' });
    }
    expect(await stateRows(user)).toBe(1);
  });
});

describe('pruning expired states (what pg_cron runs)', () => {
  const cronJob = () => cronJobOfFile(MIGRATION);

  it('runs every 5 minutes and deletes expired states only, in bounded batches', async () => {
    expect(await cronJob()).toEqual({ name: 'prune-oauth-install-states', schedule: '*/5 * * * *', command: 'select public.prune_oauth_install_states()' });
    await db.sql`delete from private.oauth_install_states`;
    const users = await Promise.all(Array.from({ length: 3 }, () => createUser(db.sql)));
    for (const u of users) for (let i = 0; i < 3; i++) await started(u);
    await db.sql`update private.oauth_install_states set created_at = now() - interval '20 minutes', expires_at = now() - interval '10 minutes'
      where user_id = any(${users.slice(0, 2)})`;
    await db.sql`update private.oauth_install_settings set prune_batch_size = 4`;
    const { command } = await cronJob();
    const deleted: number[] = [];
    for (;;) {
      const [row] = await db.sql.unsafe(command);
      const n = Number(Object.values(row!)[0]);
      deleted.push(n);
      if (n === 0) break;
    }
    expect(deleted).toEqual([4, 2, 0]);
    expect(await stateRows()).toBe(3);
    expect(await stateRows(users[2])).toBe(3);
  });
});

describe('PKCE and the authorize URL', () => {
  const cfg = { clientId: 'client-123', clientSecret: 'secret-abc', redirectUri: 'https://app.example/hubspot/callback?x=1' };

  it('derives a 43-character verifier per state and app secret, and its S256 challenge', async () => {
    const state = newInstallState();
    expect(state).toMatch(INSTALL_STATE);
    const verifier = await pkceVerifier(cfg.clientSecret, state);
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await pkceVerifier(cfg.clientSecret, state)).toBe(verifier);
    expect(await pkceVerifier('another-secret', state)).not.toBe(verifier);
    expect(await pkceVerifier(cfg.clientSecret, newInstallState())).not.toBe(verifier);
    const { createHash } = await import('node:crypto');
    expect(await pkceChallenge(verifier)).toBe(createHash('sha256').update(verifier).digest('base64url'));
  });

  it("builds @hubspot/api-client getAuthorizationUrl's query, plus the PKCE parameters, on the configured authorize page", async () => {
    const { default: OauthDiscovery } = (await import('@hubspot/api-client/lib/src/discovery/oauth/OauthDiscovery.js')) as unknown as {
      default: { prototype: { getAuthorizationUrl(c: string, r: string, s: string, o?: string, st?: string): string } };
    };
    const state = newInstallState();
    const official = OauthDiscovery.prototype.getAuthorizationUrl(cfg.clientId, cfg.redirectUri, HUBSPOT_INSTALL_SCOPES.join(' '), undefined, state);
    const ours = authorizeUrl(cfg, state, 'challenge-xyz');
    expect(ours).toBe(`${official}&code_challenge=challenge-xyz&code_challenge_method=S256`);
    const local = new URL(authorizeUrl({ ...cfg, authorizeUrl: 'http://127.0.0.1:9/oauth/authorize' }, state, 'c'));
    expect(local.origin + local.pathname).toBe('http://127.0.0.1:9/oauth/authorize');
    expect(Object.fromEntries(local.searchParams)).toEqual({
      client_id: 'client-123', redirect_uri: cfg.redirectUri, scope: 'content hubdb oauth', state, code_challenge: 'c', code_challenge_method: 'S256',
    });
  });
});

describe('install routes of the orchestrator', () => {
  const CLIENT_ID = 'client-install-test';
  const CLIENT_SECRET = 'secret-install-test-0123456789';
  const REDIRECT = 'https://app.example/hubspot/callback';
  const PORTAL_A = 7001;
  const PORTAL_B = 7002;
  const tokenKeys = parseTokenKeys(`k1:${randomBytes(32).toString('base64')}`);
  let sim: HubSpotSimulator;
  let keys: SigningKeys;
  let install: OAuthInstallConfig;
  let handler: (req: Request) => Promise<Response>;

  function deps(over: Partial<OrchestratorDeps> = {}): OrchestratorDeps {
    return {
      sql: db.sql,
      log: silentLogger,
      maxBodyBytes: 16 * 1024,
      verifyUser: createUserVerifier({ jwks: keys.jwks }),
      ...hubspotDeps({ sql: db.sql, basePath: sim.url, rateLimit: { maxPer10s: 190 }, tokenKeys, oauthApp: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } }),
      oauthInstall: install,
      wakeWorker: () => {},
      ...over,
    };
  }

  async function post(token: string, body: unknown, h = handler) {
    const res = await h(new Request('http://127.0.0.1/functions/v1/orchestrator', {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    }));
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  }

  async function counts() {
    const [row] = await db.sql`select count(*)::int as n from private.oauth_install_states`;
    return { ...(await writeCounts(db.sql)), states: row!.n as number };
  }

  /** A signed-in user. */
  async function signedIn() {
    const userId = await createUser(db.sql);
    return { userId, jwt: await keys.signUserToken(userId) };
  }

  /** Starts an install as the user and lets HubSpot (the simulator) answer it: the redirect's query. */
  async function throughHubSpot(jwt: string, decision: { portalId: number; grant: 'approve' | 'deny' }, tamper?: (u: URL) => void) {
    const started = await post(jwt, { action: 'start_hubspot_install' });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const url = new URL(started.body.authorizeUrl as string);
    tamper?.(url);
    sim.queueInstall(decision);
    const back = await sim.authorize(url.toString());
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    return Object.fromEntries(back.searchParams) as { code?: string; state: string; error?: string };
  }

  /** Posts a request expected to fail with `status`/`code`, and checks nothing was written. */
  async function refused(jwt: string, body: unknown, status: number, code: string, h = handler) {
    const before = await counts();
    const res = await post(jwt, body, h);
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body.code).toBe(code);
    expect(typeof res.body.message).toBe('string');
    expect(await counts()).toEqual(before);
    return res.body;
  }

  beforeAll(async () => {
    sim = await startHubSpotSimulator();
    sim.registerApp({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [REDIRECT] });
    sim.addPortal({ portalId: PORTAL_A, token: 'pat-install-a', sizes: { site_pages: 3, blog_posts: 2 } });
    sim.addPortal({ portalId: PORTAL_B, token: 'pat-install-b' });
    keys = await createSigningKeys();
    install = installConfigFromEnv(
      { HUBSPOT_CLIENT_ID: CLIENT_ID, HUBSPOT_CLIENT_SECRET: CLIENT_SECRET, HUBSPOT_REDIRECT_URI: REDIRECT, HUBSPOT_AUTHORIZE_URL: `${sim.url}/oauth/authorize` },
      { tokenBasePath: sim.url },
    )!;
    handler = createOrchestratorHandler(deps());
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('start answers the authorize URL: client id, redirect, scopes for the 8 types, a state stored hashed for this user, an S256 challenge', async () => {
    const { userId, jwt } = await signedIn();
    const res = await post(jwt, { action: 'start_hubspot_install' });
    expect(res.status).toBe(200);
    const url = new URL(res.body.authorizeUrl);
    expect(`${url.origin}${url.pathname}`).toBe(`${sim.url}/oauth/authorize`);
    const q = Object.fromEntries(url.searchParams);
    expect(q).toMatchObject({ client_id: CLIENT_ID, redirect_uri: REDIRECT, scope: 'content hubdb oauth', code_challenge_method: 'S256' });
    expect(q.state).toMatch(INSTALL_STATE);
    expect(q.code_challenge).toBe(await pkceChallenge(await pkceVerifier(CLIENT_SECRET, q.state!)));
    expect(new Date(res.body.expiresAt).getTime() - Date.now()).toBeGreaterThan(9 * 60_000);
    const [row] = await db.sql`select user_id from private.oauth_install_states where state_hash = ${await installStateHash(q.state!)}`;
    expect(row?.user_id).toBe(userId);
  });

  it('complete connects the installed portal to the user who started it, with its hub id and encrypted tokens; the code was exchanged with the PKCE verifier', async () => {
    const { userId, jwt } = await signedIn();
    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'approve' });
    expect(redirect.code).toBeTruthy();
    const logBefore = sim.oauthLog().length;
    const res = await post(jwt, { action: 'complete_hubspot_install', code: redirect.code, state: redirect.state });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({ portalId: expect.any(String), hubspotPortalId: PORTAL_A, name: `HubSpot portal ${PORTAL_A}` });
    const exchange = sim.oauthLog().slice(logBefore);
    expect(exchange.map((e) => [e.endpoint, e.grantType, e.outcome, e.portalId])).toEqual([['POST /oauth/v3/token', 'authorization_code', 'ok', PORTAL_A]]);
    const [portal] = await db.sql`select owner_id, hubspot_portal_id, auth_kind, disconnected_at from public.portals where id = ${res.body.portalId}`;
    expect({ ...portal }).toEqual({ owner_id: userId, hubspot_portal_id: String(PORTAL_A), auth_kind: 'oauth', disconnected_at: null });
    const [creds] = await db.sql`select * from private.portal_credentials where portal_id = ${res.body.portalId}`;
    expect(creds!.access_token).toBeNull();
    expect(String(creds!.refresh_token_enc)).toMatch(/^v2\.k1\./);
    // The connection works: a run is created with totals counted through the stored tokens.
    const run = await post(jwt, { portalId: res.body.portalId, contentTypes: ['site_pages', 'blog_posts'] });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    expect(Object.fromEntries(run.body.jobs.map((j: { contentType: string; total: number }) => [j.contentType, j.total]))).toEqual({ site_pages: 3, blog_posts: 2 });
  });

  it('a replayed callback is refused and writes nothing', async () => {
    const { jwt } = await signedIn();
    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_B, grant: 'approve' });
    expect((await post(jwt, { action: 'complete_hubspot_install', ...redirect })).status).toBe(201);
    await refused(jwt, { action: 'complete_hubspot_install', ...redirect }, 400, 'OAUTH_STATE_INVALID');
  });

  it("another user's state is refused, writes nothing, and stays usable by its owner", async () => {
    const alice = await signedIn();
    const mallory = await signedIn();
    const redirect = await throughHubSpot(alice.jwt, { portalId: PORTAL_B, grant: 'approve' });
    const body = await refused(mallory.jwt, { action: 'complete_hubspot_install', ...redirect }, 400, 'OAUTH_STATE_INVALID');
    expect(body.message).toMatch(/another user/);
    const mine = await post(alice.jwt, { action: 'complete_hubspot_install', ...redirect });
    expect(mine.status).toBe(201);
    const [owner] = await db.sql`select owner_id from public.portals where id = ${mine.body.portalId}`;
    expect(owner!.owner_id).toBe(alice.userId);
  });

  it('a forged or expired state is refused and writes nothing (the code is not sent to HubSpot)', async () => {
    const { userId, jwt } = await signedIn();
    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_B, grant: 'approve' });
    const exchanges = sim.stats().codeExchanges;
    await refused(jwt, { action: 'complete_hubspot_install', code: redirect.code, state: newInstallState() }, 400, 'OAUTH_STATE_INVALID');
    await db.sql`update private.oauth_install_states set created_at = now() - interval '11 minutes', expires_at = now() - interval '1 minute' where user_id = ${userId}`;
    const body = await refused(jwt, { action: 'complete_hubspot_install', ...redirect }, 400, 'OAUTH_STATE_INVALID');
    expect(body.message).toMatch(/expired/);
    expect(sim.stats().codeExchanges).toBe(exchanges);
  });

  it('access_denied from HubSpot answers a clear 403 and connects nothing', async () => {
    const { jwt } = await signedIn();
    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'deny' });
    expect(redirect.error).toBe('access_denied');
    const before = await counts();
    const res = await post(jwt, { action: 'complete_hubspot_install', error: redirect.error, state: redirect.state });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ code: 'HUBSPOT_ACCESS_DENIED', message: expect.stringMatching(/not granted.*cancelled on HubSpot.*no portal was connected/) });
    // The state is used up (the install is over); nothing else changed.
    expect(await counts()).toEqual({ ...before, states: before.states - 1 });
    await refused(jwt, { action: 'complete_hubspot_install', error: 'access_denied', state: redirect.state }, 400, 'OAUTH_STATE_INVALID');
  });

  it('a code whose PKCE challenge was not ours is refused by HubSpot: 400, nothing connected', async () => {
    const { jwt } = await signedIn();
    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'approve' }, (u) => u.searchParams.set('code_challenge', 'A'.repeat(43)));
    const before = await counts();
    const res = await post(jwt, { action: 'complete_hubspot_install', ...redirect });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('HUBSPOT_CODE_REJECTED');
    expect(sim.oauthLog().at(-1)).toMatchObject({ grantType: 'authorization_code', outcome: 'bad_auth_code' });
    expect(await counts()).toEqual({ ...before, states: before.states - 1 });
  });

  it('a reconnect of the same hub by the same user updates its portal (name kept, disconnected state cleared); another user gets their own', async () => {
    const { userId, jwt } = await signedIn();
    const first = await post(jwt, { action: 'complete_hubspot_install', name: 'Marketing', ...(await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'approve' })) });
    expect(first.status).toBe(201);
    await db.sql`update public.portals set disconnected_at = now(), disconnected_reason = 'test' where id = ${first.body.portalId}`;
    const again = await post(jwt, { action: 'complete_hubspot_install', ...(await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'approve' })) });
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ portalId: first.body.portalId, hubspotPortalId: PORTAL_A, name: 'Marketing' });
    const rows = await db.sql`select id, name, disconnected_at from public.portals where owner_id = ${userId}`;
    expect(rows.map((r) => ({ ...r }))).toEqual([{ id: first.body.portalId, name: 'Marketing', disconnected_at: null }]);
    const other = await signedIn();
    const theirs = await post(other.jwt, { action: 'complete_hubspot_install', ...(await throughHubSpot(other.jwt, { portalId: PORTAL_A, grant: 'approve' })) });
    expect(theirs.status).toBe(201);
    expect(theirs.body.portalId).not.toBe(first.body.portalId);
  });

  it('a private-app portal connected before is turned into an OAuth one by an install of the same hub', async () => {
    const { jwt } = await signedIn();
    const pasted = await post(jwt, { action: 'connect_portal', name: 'Pasted', accessToken: 'pat-install-b' });
    expect(pasted.status, JSON.stringify(pasted.body)).toBe(201);
    const installed = await post(jwt, { action: 'complete_hubspot_install', ...(await throughHubSpot(jwt, { portalId: PORTAL_B, grant: 'approve' })) });
    expect(installed.body).toEqual({ portalId: pasted.body.portalId, hubspotPortalId: PORTAL_B, name: 'Pasted' });
    const [row] = await db.sql`select auth_kind from public.portals where id = ${pasted.body.portalId}`;
    expect(row!.auth_kind).toBe('oauth');
  });

  it('HubSpot refusing the app settings or failing: 502, nothing connected', async () => {
    const { jwt } = await signedIn();
    const wrongSecret = createOrchestratorHandler(deps({ oauthInstall: { ...install, clientSecret: 'not-the-secret' } }));
    const started = await post(jwt, { action: 'start_hubspot_install' }, wrongSecret);
    sim.queueInstall({ portalId: PORTAL_A, grant: 'approve' });
    const back = Object.fromEntries((await sim.authorize(started.body.authorizeUrl)).searchParams);
    const before = await counts();
    const res = await post(jwt, { action: 'complete_hubspot_install', ...back }, wrongSecret);
    expect([res.status, res.body.code]).toEqual([502, 'HUBSPOT_OAUTH_REJECTED']);
    expect(JSON.stringify(res.body)).not.toContain('not-the-secret');
    expect(await counts()).toEqual({ ...before, states: before.states - 1 });

    const redirect = await throughHubSpot(jwt, { portalId: PORTAL_A, grant: 'approve' });
    sim.failNextOAuth(1, 503);
    const failed = await post(jwt, { action: 'complete_hubspot_install', ...redirect });
    expect([failed.status, failed.body.code]).toEqual([502, 'HUBSPOT_UNAVAILABLE']);
  });

  it('without the app configured, the install actions answer 501 and private-app tokens still connect', async () => {
    const { jwt } = await signedIn();
    const bare = createOrchestratorHandler(deps({ oauthInstall: undefined }));
    await refused(jwt, { action: 'start_hubspot_install' }, 501, 'OAUTH_NOT_CONFIGURED', bare);
    await refused(jwt, { action: 'complete_hubspot_install', code: 'x', state: newInstallState() }, 501, 'OAUTH_NOT_CONFIGURED', bare);
    const pasted = await post(jwt, { action: 'connect_portal', name: 'Private app', accessToken: 'pat-install-a' }, bare);
    expect(pasted.status).toBe(201);
    expect(installConfigFromEnv({ HUBSPOT_CLIENT_ID: CLIENT_ID, HUBSPOT_CLIENT_SECRET: CLIENT_SECRET })).toBeUndefined();
    expect(() => installConfigFromEnv({ HUBSPOT_REDIRECT_URI: 'not a url' })).toThrow(/HUBSPOT_REDIRECT_URI/);
    expect(() => installConfigFromEnv({ HUBSPOT_AUTHORIZE_URL: 'https://x.example/a?b=1' })).toThrow(/HUBSPOT_AUTHORIZE_URL/);
  });

  it('without HUBSPOT_TOKEN_KEYS nothing can be connected: 503 before HubSpot is asked', async () => {
    const { jwt } = await signedIn();
    const keyless = createOrchestratorHandler(deps({ tokenKeys: null }));
    const requests = sim.stats().requests;
    await refused(jwt, { action: 'start_hubspot_install' }, 503, 'TOKEN_KEYS_MISSING', keyless);
    await refused(jwt, { action: 'connect_portal', name: 'P', accessToken: 'pat-install-a' }, 503, 'TOKEN_KEYS_MISSING', keyless);
    expect(sim.stats().requests).toBe(requests);
  });

  it('invalid bodies are 400 INVALID_BODY with field errors naming the field', async () => {
    const { jwt } = await signedIn();
    const state = newInstallState();
    const cases: [unknown, string][] = [
      [{ action: 'start_hubspot_install', extra: 1 }, '(body)'],
      [{ action: 'complete_hubspot_install', state }, 'code'],
      [{ action: 'complete_hubspot_install', state, code: 'c', error: 'access_denied' }, 'code'],
      [{ action: 'complete_hubspot_install', state: 'short', code: 'c' }, 'state'],
      [{ action: 'complete_hubspot_install', state, code: 'has space' }, 'code'],
      [{ action: 'complete_hubspot_install', state, error: '<script>' }, 'error'],
      [{ action: 'complete_hubspot_install', state, code: 'c', name: '' }, 'name'],
    ];
    for (const [body, field] of cases) {
      const res = await refused(jwt, body, 400, 'INVALID_BODY');
      expect((res.details.fieldErrors as { path: string }[]).map((f) => f.path), JSON.stringify(body)).toContain(field);
    }
  });
});
