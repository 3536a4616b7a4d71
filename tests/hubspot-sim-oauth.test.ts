// Simulator OAuth tests: install redirect, v3 token endpoint (PKCE, refresh), introspect, revoke, v1 metadata,
// and OAuth access tokens on the CMS endpoints, all over loopback HTTP (fetch, @hubspot/api-client).

import { randomBytes } from 'node:crypto';
import { Client } from '@hubspot/api-client';
import { Request } from '@hubspot/api-client/lib/src/services/http/Request.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pkceChallenge, startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const PORTAL = 4242;
const OTHER_PORTAL = 77;
const PRIVATE_TOKEN = 'oauth-test-private-app-token';
const APP = { clientId: 'client-id-1', clientSecret: 'client-secret-1', redirectUris: ['http://127.0.0.1:9/oauth/callback'] };
const REDIRECT = APP.redirectUris[0]!;
const SCOPES = 'oauth content hubdb';

let sim: HubSpotSimulator;

beforeAll(async () => {
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 100_000 } });
  sim.addPortal({ portalId: PORTAL, token: PRIVATE_TOKEN, sizes: { blog_posts: 5, hubdb_tables: 1, hubdb_rows: 3 } });
  sim.addPortal({ portalId: OTHER_PORTAL, token: 'other-private-token', sizes: { blog_posts: 2 } });
  sim.registerApp({ ...APP, appId: 777 });
  sim.registerApp({ clientId: 'client-id-2', clientSecret: 'client-secret-2', redirectUris: [REDIRECT] });
});
afterAll(() => sim.close());
afterEach(() => sim.clearFaults());

interface Wire { status: number; body: Record<string, unknown> }

// POSTs a form to an /oauth/v3 path the way the product does: the official client's request builder + fetch.
async function postForm(path: string, form: Record<string, string>, simulator = sim): Promise<Wire> {
  const request = new Request({ basePath: simulator.url }, {
    method: 'POST', path, defaultJson: false,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  const response = await fetch(request.getUrl(), request.getSendData() as RequestInit);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

async function cms(path: string, token: string, simulator = sim): Promise<Wire & { headers: Headers }> {
  const response = await fetch(`${simulator.url}${path}`, { headers: { Authorization: `Bearer ${token}` } });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

function authorizeUrl(extra: Record<string, string> = {}, clientId = APP.clientId): string {
  const base = new Client().oauth.getAuthorizationUrl(clientId, REDIRECT, SCOPES, undefined, 'state-123');
  const url = new URL(base);
  for (const [k, v] of Object.entries(extra)) url.searchParams.set(k, v);
  return url.toString();
}

// Queues an approval, follows the authorize URL and returns the code from the redirect.
async function installCode(extra: Record<string, string> = {}, portalId = PORTAL, clientId = APP.clientId): Promise<string> {
  sim.queueInstall({ portalId, grant: 'approve' });
  const location = await sim.authorize(authorizeUrl(extra, clientId));
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
  expect(location.searchParams.get('state')).toBe('state-123');
  return location.searchParams.get('code')!;
}

function exchange(code: string, extra: Record<string, string> = {}): Promise<Wire> {
  return postForm('/oauth/v3/token', {
    grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret,
    redirect_uri: REDIRECT, code, ...extra,
  });
}

function refresh(refreshToken: string, app: { clientId: string; clientSecret: string } = APP, simulator = sim): Promise<Wire> {
  return postForm('/oauth/v3/token', {
    grant_type: 'refresh_token', client_id: app.clientId, client_secret: app.clientSecret, refresh_token: refreshToken,
  }, simulator);
}

async function install(portalId = PORTAL): Promise<{ access: string; refresh: string; body: Record<string, unknown> }> {
  const tokens = await exchange(await installCode({}, portalId));
  expect(tokens.status).toBe(200);
  return { access: String(tokens.body['access_token']), refresh: String(tokens.body['refresh_token']), body: tokens.body };
}

const verifier = (): string => randomBytes(48).toString('base64url');

describe('install and code exchange', () => {
  it('exchanges a code (no PKCE) for tokens carrying hub_id and scopes; the access token reads CMS content', async () => {
    const code = await installCode();
    const tokens = await exchange(code);
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({
      token_type: 'bearer', expires_in: 1800, hub_id: PORTAL, scopes: ['oauth', 'content', 'hubdb'], token_use: 'access_token',
    });
    expect(String(tokens.body['refresh_token'])).toMatch(/^na1-/);
    const client = new Client({ accessToken: String(tokens.body['access_token']), basePath: sim.url, numberOfApiCallRetries: 0 });
    const page = await client.cms.blogs.blogPosts.basicApi.getPage();
    expect(page.total).toBe(5);
  });

  it('refuses a replayed code with 400 BAD_AUTH_CODE', async () => {
    const code = await installCode();
    expect((await exchange(code)).status).toBe(200);
    const replay = await exchange(code);
    expect(replay.status).toBe(400);
    expect(replay.body).toMatchObject({ status: 'BAD_AUTH_CODE', category: 'VALIDATION_ERROR' });
    expect(replay.body['correlationId']).toEqual(expect.any(String));
  });

  it('checks the PKCE S256 verifier: missing or wrong verifier refused (and the code burnt), right one accepted', async () => {
    const good = verifier();
    const pkce = { code_challenge: pkceChallenge(good), code_challenge_method: 'S256' };
    const missing = await exchange(await installCode(pkce));
    expect(missing).toMatchObject({ status: 400, body: { status: 'BAD_AUTH_CODE' } });

    const code = await installCode(pkce);
    const wrong = await exchange(code, { code_verifier: verifier() });
    expect(wrong).toMatchObject({ status: 400, body: { status: 'BAD_AUTH_CODE' } });
    expect((await exchange(code, { code_verifier: good })).body['status']).toBe('BAD_AUTH_CODE');

    const ok = await exchange(await installCode(pkce), { code_verifier: good });
    expect(ok.status).toBe(200);
    expect(ok.body['hub_id']).toBe(PORTAL);
  });

  it('refuses an expired code, a different redirect_uri, a bad secret and a code issued to another app', async () => {
    const expired = await installCode();
    sim.advanceClock(301);
    expect((await exchange(expired)).body['status']).toBe('BAD_AUTH_CODE');

    expect((await exchange(await installCode(), { redirect_uri: 'http://127.0.0.1:9/elsewhere' })).body['status']).toBe('BAD_REDIRECT_URI');
    expect((await exchange(await installCode(), { client_secret: 'wrong' })).body['status']).toBe('BAD_CLIENT_SECRET');
    const otherAppsCode = await installCode({}, PORTAL, 'client-id-2');
    expect((await exchange(otherAppsCode)).body['status']).toBe('BAD_AUTH_CODE');
    expect((await exchange('x', { grant_type: 'password' })).body['status']).toBe('BAD_GRANT_TYPE');
  });

  it('redirects a denied install with error=access_denied and the state', async () => {
    sim.queueInstall({ portalId: PORTAL, grant: 'deny' });
    const location = await sim.authorize(authorizeUrl());
    expect(location.searchParams.get('error')).toBe('access_denied');
    expect(location.searchParams.get('state')).toBe('state-123');
    expect(location.searchParams.has('code')).toBe(false);
  });

  it('answers 400 for an unknown client, an unregistered redirect_uri or a plain PKCE method, 409 with no install queued', async () => {
    const get = (url: string) => fetch(`${sim.url}${new URL(url).pathname}${new URL(url).search}`, { redirect: 'manual' });
    expect((await get(authorizeUrl({}, 'nope'))).status).toBe(400);
    expect((await get(authorizeUrl({ redirect_uri: 'https://evil.example/cb' }))).status).toBe(400);
    expect((await get(authorizeUrl({ code_challenge: 'abc', code_challenge_method: 'plain' }))).status).toBe(400);
    const none = await get(authorizeUrl());
    expect(none.status).toBe(409);
    expect(await none.json()).toMatchObject({ category: 'CONFLICT' });
  });

  it('grants the scopes the install says, and takes token-endpoint forms only as urlencoded', async () => {
    sim.queueInstall({ portalId: PORTAL, grant: 'approve', scopes: ['content'] });
    const location = await sim.authorize(authorizeUrl());
    const tokens = await exchange(location.searchParams.get('code')!);
    expect(tokens.body['scopes']).toEqual(['content']);
    const asJson = await fetch(`${sim.url}/oauth/v3/token`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ grant_type: 'refresh_token' }),
    });
    expect(asJson.status).toBe(400);
  });
});

describe('refresh, expiry and revocation', () => {
  it('refresh answers a new access token and the same refresh token; the old access token keeps working', async () => {
    const before = sim.stats();
    const first = await install();
    const renewed = await refresh(first.refresh);
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ refresh_token: first.refresh, hub_id: PORTAL, expires_in: 1800 });
    expect(renewed.body['access_token']).not.toBe(first.access);
    expect((await cms(LIST_PATHS.blog_posts, first.access)).status).toBe(200);
    expect((await cms(LIST_PATHS.blog_posts, String(renewed.body['access_token']))).status).toBe(200);
    const after = sim.stats();
    expect(after.tokenRefreshes - before.tokenRefreshes).toBe(1);
    expect(after.byPortal[PORTAL]!.tokenRefreshes - (before.byPortal[PORTAL]?.tokenRefreshes ?? 0)).toBe(1);
    expect(after.byPortal[PORTAL]!.requests - (before.byPortal[PORTAL]?.requests ?? 0)).toBe(2);
  });

  it('an expired access token gets 401 EXPIRED_AUTHENTICATION on CMS calls and is counted; a refresh fixes it', async () => {
    const { access, refresh: refreshToken } = await install();
    const before = sim.stats().expiredTokenRequests;
    sim.advanceClock(1800 + 125);
    const expired = await cms(LIST_PATHS.site_pages, access);
    expect(expired.status).toBe(401);
    expect(expired.body).toMatchObject({
      status: 'error', category: 'EXPIRED_AUTHENTICATION', message: 'The OAuth token used to make this call expired 2 minute(s) ago.',
    });
    const client = new Client({ accessToken: access, basePath: sim.url, numberOfApiCallRetries: 0 });
    await expect(client.cms.pages.sitePagesApi.getPage()).rejects.toMatchObject({ code: 401 });
    expect(sim.stats().expiredTokenRequests - before).toBe(2);
    expect(sim.requestLog().at(-1)).toMatchObject({ status: 401, portalId: PORTAL });

    const renewed = await refresh(refreshToken);
    expect((await cms(LIST_PATHS.site_pages, String(renewed.body['access_token']))).status).toBe(200);
  });

  it('setAccessTokenTtl changes expires_in and the expiry of tokens issued afterwards', async () => {
    sim.setAccessTokenTtl(60);
    try {
      const { access, body } = await install();
      expect(body['expires_in']).toBe(60);
      sim.advanceClock(59);
      expect((await cms(LIST_PATHS.blog_tags, access)).status).toBe(200);
      sim.advanceClock(1);
      expect((await cms(LIST_PATHS.blog_tags, access)).body['category']).toBe('EXPIRED_AUTHENTICATION');
    } finally {
      sim.setAccessTokenTtl(1800);
    }
  });

  it('uninstall: refresh answers 400 BAD_REFRESH_TOKEN, CMS calls 401, introspect inactive; the private-app token still works', async () => {
    sim.resetStats();
    const mine = await install();
    const other = await install(OTHER_PORTAL);
    sim.uninstall(PORTAL);

    const refused = await refresh(mine.refresh);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ status: 'BAD_REFRESH_TOKEN', message: 'missing or invalid refresh token', category: 'VALIDATION_ERROR' });
    const denied = await cms(LIST_PATHS.blog_posts, mine.access);
    expect(denied.status).toBe(401);
    expect(denied.body['category']).toBe('INVALID_AUTHENTICATION');
    const info = await postForm('/oauth/v3/token/introspect', { client_id: APP.clientId, client_secret: APP.clientSecret, token: mine.access });
    expect(info).toEqual({ status: 200, body: { active: false } });
    expect((await cms(LIST_PATHS.blog_posts, PRIVATE_TOKEN)).status).toBe(200);
    expect((await refresh(other.refresh)).status).toBe(200);
    expect(sim.oauthLog().filter((e) => e.outcome === 'bad_refresh_token')).toEqual([
      expect.objectContaining({ endpoint: 'POST /oauth/v3/token', grantType: 'refresh_token', clientId: APP.clientId, status: 400 }),
    ]);
  });

  it('revoke deletes the refresh token only; access tokens already issued keep working until expiry', async () => {
    const { access, refresh: refreshToken } = await install();
    const revoked = await postForm('/oauth/v3/token/revoke', { client_id: APP.clientId, client_secret: APP.clientSecret, token: refreshToken });
    expect(revoked.status).toBe(204);
    expect((await refresh(refreshToken)).body['status']).toBe('BAD_REFRESH_TOKEN');
    expect((await cms(LIST_PATHS.blog_posts, access)).status).toBe(200);
  });

  it('a refresh token works only for the app it was issued to', async () => {
    const { refresh: refreshToken } = await install();
    expect((await refresh(refreshToken, { clientId: 'client-id-2', clientSecret: 'client-secret-2' })).body['status']).toBe('BAD_REFRESH_TOKEN');
    expect((await refresh(refreshToken, { clientId: APP.clientId, clientSecret: 'nope' })).body['status']).toBe('BAD_CLIENT_SECRET');
    expect((await refresh(refreshToken, { clientId: 'unknown', clientSecret: 'nope' })).body['status']).toBe('BAD_CLIENT_ID');
    expect((await refresh(refreshToken)).status).toBe(200);
  });

  it('rotates refresh tokens when started with rotateRefreshTokens (the old one is then refused)', async () => {
    const rotating = await startHubSpotSimulator({ oauth: { rotateRefreshTokens: true } });
    try {
      rotating.addPortal({ portalId: 1, token: 'p1', sizes: { blog_posts: 1 } });
      rotating.registerApp(APP);
      rotating.queueInstall({ portalId: 1, grant: 'approve' });
      const code = (await rotating.authorize(authorizeUrl())).searchParams.get('code')!;
      const first = await postForm('/oauth/v3/token', {
        grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code,
      }, rotating);
      const second = await refresh(String(first.body['refresh_token']), APP, rotating);
      expect(second.status).toBe(200);
      expect(second.body['refresh_token']).not.toBe(first.body['refresh_token']);
      expect((await refresh(String(first.body['refresh_token']), APP, rotating)).body['status']).toBe('BAD_REFRESH_TOKEN');
      expect((await refresh(String(second.body['refresh_token']), APP, rotating)).status).toBe(200);
    } finally {
      await rotating.close();
    }
  });
});

describe('scopes', () => {
  it('removeScope: CMS calls needing it answer 403 MISSING_SCOPES naming the scope, for OAuth and private-app tokens', async () => {
    const { access, refresh: refreshToken } = await install();
    expect((await cms(LIST_PATHS.hubdb_tables, access)).status).toBe(200);
    sim.removeScope(PORTAL, 'hubdb');
    const missing = await cms(LIST_PATHS.hubdb_tables, access);
    expect(missing.status).toBe(403);
    expect(missing.body).toMatchObject({
      category: 'MISSING_SCOPES', errors: [{ context: { requiredGranularScopes: ['hubdb'] } }],
    });
    expect((await cms(LIST_PATHS.blog_posts, access)).status).toBe(200);
    expect((await cms(LIST_PATHS.hubdb_tables, PRIVATE_TOKEN)).status).toBe(403);
    const renewed = await refresh(refreshToken);
    expect(renewed.body['scopes']).toEqual(['oauth', 'content']);
    expect((await cms(LIST_PATHS.hubdb_tables, String(renewed.body['access_token']))).status).toBe(403);
  });
});

describe('token metadata', () => {
  it('introspect gives hub_id, scopes, client and expiry for access tokens, token_use for refresh tokens', async () => {
    const { access, refresh: refreshToken } = await install(OTHER_PORTAL);
    const creds = { client_id: APP.clientId, client_secret: APP.clientSecret };
    const info = await postForm('/oauth/v3/token/introspect', { ...creds, token: access, token_type_hint: 'access_token' });
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({
      active: true, token_use: 'access_token', hub_id: OTHER_PORTAL, client_id: APP.clientId, app_id: 777,
      scopes: ['oauth', 'content', 'hubdb'], token: access,
    });
    expect(info.body['expires_in']).toBeLessThanOrEqual(1800);
    const refreshInfo = await postForm('/oauth/v3/token/introspect', { ...creds, token: refreshToken });
    expect(refreshInfo.body).toMatchObject({ active: true, token_use: 'refresh_token', hub_id: OTHER_PORTAL });
    expect(refreshInfo.body).not.toHaveProperty('expires_in');
    const otherApp = await postForm('/oauth/v3/token/introspect', { client_id: 'client-id-2', client_secret: 'client-secret-2', token: access });
    expect(otherApp.body).toEqual({ active: false });
    const badSecret = await postForm('/oauth/v3/token/introspect', { client_id: APP.clientId, client_secret: 'x', token: access });
    expect(badSecret).toMatchObject({ status: 400, body: { status: 'BAD_CLIENT_SECRET' } });
  });

  it('serves the official client: oauth.tokensApi.create (v1 path) and oauth.accessTokensApi.get give the hub id', async () => {
    const client = new Client({ basePath: sim.url, numberOfApiCallRetries: 0 });
    const code = await installCode({}, OTHER_PORTAL);
    const created = await client.oauth.tokensApi.create('authorization_code', code, REDIRECT, APP.clientId, APP.clientSecret);
    expect(created.expiresIn).toBe(1800);
    const meta = await client.oauth.accessTokensApi.get(created.accessToken);
    expect(meta).toMatchObject({ hubId: OTHER_PORTAL, appId: 777, scopes: ['oauth', 'content', 'hubdb'], tokenType: 'access' });
    const refreshMeta = await client.oauth.refreshTokensApi.get(created.refreshToken);
    expect(refreshMeta).toMatchObject({ hubId: OTHER_PORTAL, clientId: APP.clientId });
    await expect(client.oauth.accessTokensApi.get('not-a-token')).rejects.toMatchObject({ code: 404 });
    const logged = JSON.stringify(sim.requestLog()) + JSON.stringify(sim.oauthLog());
    for (const secret of [created.accessToken, created.refreshToken, code, APP.clientSecret]) expect(logged).not.toContain(secret);
    expect(sim.requestLog().at(-1)).toMatchObject({ path: '/oauth/v1/access-tokens/{token}', status: 404 });
  });
});

describe('rate limits, faults and logs', () => {
  it('all access tokens of one install share one rate-limit window (a refresh does not reset it); private-app tokens have their own', async () => {
    const limited = await startHubSpotSimulator({ rateLimit: { maxPer10s: 3, windowMs: 600_000 } });
    try {
      limited.addPortal({ portalId: 1, token: 'p1', sizes: { blog_posts: 1 } });
      limited.registerApp(APP);
      limited.queueInstall({ portalId: 1, grant: 'approve' });
      const code = (await limited.authorize(authorizeUrl())).searchParams.get('code')!;
      const first = await postForm('/oauth/v3/token', {
        grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code,
      }, limited);
      const access = String(first.body['access_token']);
      for (let i = 0; i < 2; i++) expect((await cms(LIST_PATHS.blog_posts, access, limited)).status).toBe(200);
      const renewed = String((await refresh(String(first.body['refresh_token']), APP, limited)).body['access_token']);
      const third = await cms(LIST_PATHS.blog_posts, renewed, limited);
      expect(third.status).toBe(200);
      expect(third.headers.get('X-HubSpot-RateLimit-Remaining')).toBe('0');
      expect((await cms(LIST_PATHS.blog_posts, renewed, limited)).status).toBe(429);
      expect((await cms(LIST_PATHS.blog_posts, 'p1', limited)).status).toBe(200);
      expect(limited.stats().byPortal['1']).toEqual({ requests: 5, tokenRefreshes: 1, expiredTokenRequests: 0 });
    } finally {
      await limited.close();
    }
  });

  it('failNextOAuth fails token-endpoint calls (logged as faults) without touching CMS calls', async () => {
    const { refresh: refreshToken, access } = await install();
    sim.failNextOAuth(1, 503);
    expect((await refresh(refreshToken)).status).toBe(503);
    expect((await cms(LIST_PATHS.blog_posts, access)).status).toBe(200);
    expect((await refresh(refreshToken)).status).toBe(200);
    expect(sim.oauthLog().filter((e) => e.outcome === 'fault').at(-1)).toMatchObject({ endpoint: 'POST /oauth/v3/token', status: 503 });
  });

  it('logs every OAuth call with outcome and grant type, never a secret, token or code', async () => {
    sim.resetStats();
    const code = await installCode();
    const tokens = await exchange(code);
    await exchange(code);
    const refreshToken = String(tokens.body['refresh_token']);
    await refresh(refreshToken);
    const log = sim.oauthLog();
    expect(log.map((e) => [e.endpoint, e.grantType, e.outcome, e.status, e.portalId])).toEqual([
      ['GET /oauth/authorize', null, 'ok', 302, PORTAL],
      ['POST /oauth/v3/token', 'authorization_code', 'ok', 200, PORTAL],
      ['POST /oauth/v3/token', 'authorization_code', 'bad_auth_code', 400, null], // a used code is gone
      ['POST /oauth/v3/token', 'refresh_token', 'ok', 200, PORTAL],
    ]);
    const text = JSON.stringify(log) + JSON.stringify(sim.requestLog());
    for (const secret of [APP.clientSecret, code, refreshToken, String(tokens.body['access_token'])]) expect(text).not.toContain(secret);
    const stats = sim.stats();
    expect(stats).toMatchObject({ oauthRequests: 4, codeExchanges: 1, tokenRefreshes: 1 });
    expect(stats.byEndpoint).toEqual({ 'GET /oauth/authorize': 1, 'POST /oauth/v3/token': 3 });
  });
});
