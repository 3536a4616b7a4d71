// The shared OAuth refresh when things go wrong around it: a refresh token refused
// after the portal was reconnected (or the lease taken over) must not disconnect
// it; HubSpot's v3 error bodies carry no code, so a refused refresh is settled by
// introspection; the app's own credentials refused is an operator's problem, not
// the portal's; a crashed holder's lease runs out and its late write is refused;
// rotated refresh tokens are stored; a refresh never outlives its lease; sealed
// tokens are bound to owner and hub, and the first format still opens.
// Real Postgres, the simulator's OAuth endpoints over loopback; time moves by the
// simulator's clock and SQL back-dating, never by sleeping.
import { randomBytes, randomUUID, webcrypto } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Sql } from '../shared/db.ts';
import { HubSpotAccessRemoved, HubSpotOAuthAppRejected, HubSpotTransientError } from '../shared/hubspot/errors.ts';
import { postOAuthToken } from '../shared/hubspot/oauth-http.ts';
import { connectOAuthPortal } from '../shared/hubspot/portal-connect.ts';
import { portalTokenSource, StoredTokenUnreadable, type PortalTokenDeps } from '../shared/hubspot/portal-tokens.ts';
import { openStoredToken } from '../shared/hubspot/token-sealing.ts';
import { parseTokenKeys, sealedFormat, type TokenKeyring } from '../shared/token-crypto.ts';
import { rotateAllCredentials } from '../shared/hubspot/token-rotation.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUser, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const sims: HubSpotSimulator[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

const APP = { clientId: `client-${randomUUID()}`, clientSecret: `secret-${randomUUID()}` };
const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const RAW_KEY = randomBytes(32);
const ring: TokenKeyring = parseTokenKeys(`k1:${RAW_KEY.toString('base64')}`)!;

async function newSim(options: Parameters<typeof startHubSpotSimulator>[0] = {}): Promise<HubSpotSimulator> {
  const sim = await startHubSpotSimulator({ ...options, oauth: { accessTokenTtlSeconds: 1800, ...options.oauth } });
  sim.registerApp({ ...APP, redirectUris: [REDIRECT] });
  sims.push(sim);
  return sim;
}

let nextHub = 880_000 + Math.floor(Math.random() * 10_000) * 10;

async function grant(sim: HubSpotSimulator, hub: number) {
  sim.queueInstall({ portalId: hub, grant: 'approve' });
  const url = new URL(`${sim.url}/oauth/authorize`);
  url.search = new URLSearchParams({ client_id: APP.clientId, redirect_uri: REDIRECT, scope: 'content hubdb' }).toString();
  const code = (await sim.authorize(url.toString())).searchParams.get('code')!;
  return postOAuthToken({ basePath: sim.url }, { grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code });
}

/** Installs the app in a new simulated portal and stores the grant for a new (or the given) user. */
async function install(sim: HubSpotSimulator, opts: { hub?: number; ownerId?: string } = {}) {
  const hub = opts.hub ?? nextHub++;
  if (opts.hub === undefined) sim.addPortal({ portalId: hub, token: `pat-unused-${randomUUID()}`, sizes: {} });
  const g = await grant(sim, hub);
  const ownerId = opts.ownerId ?? (await createUser(db.sql));
  const portalId = await connectOAuthPortal(db.sql, ring, {
    ownerId, hubspotPortalId: hub, name: `p${hub}`, accessToken: g.accessToken, refreshToken: g.refreshToken!, expiresInSeconds: g.expiresIn,
  });
  return { hub, hubspotPortalId: hub, ownerId, portalId, accessToken: g.accessToken, refreshToken: g.refreshToken! };
}

function deps(sim: HubSpotSimulator, extra: Partial<PortalTokenDeps> = {}): PortalTokenDeps {
  return { sql: db.sql, keys: ring, oauthApp: APP, holderId: 'test', basePath: sim.url, rateLimit: { maxPer10s: 190 }, ...extra };
}

const makeDue = (portalId: string) => db.sql`update private.portal_credentials set refresh_after = now() - interval '1 second' where portal_id = ${portalId}`;
const credentials = async (portalId: string) => (await db.sql`select * from private.portal_credentials where portal_id = ${portalId}`)[0]!;
const portalRow = async (portalId: string) => (await db.sql`select * from public.portals where id = ${portalId}`)[0]!;
const refreshRequests = (sim: HubSpotSimulator) => sim.oauthLog().filter((e) => e.endpoint === 'POST /oauth/v3/token' && e.grantType === 'refresh_token');
const introspections = (sim: HubSpotSimulator) => sim.oauthLog().filter((e) => e.endpoint === 'POST /oauth/v3/token/introspect');

/** The sql pool, recording the text of every statement (the calls still go to Postgres). */
function recordingSql(statements: string[]): Sql {
  return new Proxy(db.sql, {
    apply(target, thisArg, args: unknown[]) {
      const strings = args[0] as readonly string[] | undefined;
      if (Array.isArray(strings)) statements.push(strings.join('?'));
      return Reflect.apply(target as never, thisArg, args);
    },
  });
}

describe('a refused refresh token disconnects only a portal whose lease is still the refuser\'s', () => {
  it('a refresh in flight with a revoked refresh token while the user reinstalls leaves the reconnected portal connected', async () => {
    const sim = await newSim();
    const first = await install(sim);
    await makeDue(first.portalId);
    sim.uninstall(first.hub);
    // The refresh request goes out with the old (now revoked) refresh token; just before it
    // reaches HubSpot the user installs the app again (new grant stored, lease cleared).
    let reconnected = false;
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      if (!reconnected && String(input).endsWith('/oauth/v3/token') && String(init?.body).includes('grant_type=refresh_token')) {
        reconnected = true;
        await install(sim, { hub: first.hub, ownerId: first.ownerId });
      }
      return realFetch(input, init);
    }) as typeof fetch;
    let source;
    try {
      source = await portalTokenSource(deps(sim), first.portalId);
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(reconnected).toBe(true);
    expect(refreshRequests(sim).map((e) => e.outcome)).toEqual(['bad_refresh_token']); // it was refused...
    expect((await portalRow(first.portalId)).disconnected_at).toBeNull(); // ...and the reconnected portal stays connected
    const token = await source!.current();
    expect(await openStoredToken(ring, (await credentials(first.portalId)).access_token_enc as string, 'access', first)).toBe(token.token);
  });

  it('a holder whose lease was taken over cannot disconnect; the current holder can', async () => {
    const sim = await newSim();
    const p = await install(sim);
    await makeDue(p.portalId);
    const [a] = await db.sql`select decision from public.claim_portal_token(${p.portalId}, 'holder-a')`;
    expect(a!.decision).toBe('refresh');
    await db.sql`update private.portal_credentials set refresh_lease_expires_at = now() - interval '1 second' where portal_id = ${p.portalId}`;
    const [b] = await db.sql`select decision from public.claim_portal_token(${p.portalId}, 'holder-b')`;
    expect(b!.decision).toBe('refresh');
    const [stale] = await db.sql`select public.disconnect_portal(${p.portalId}, 'test: refused', 'holder-a') as failed`;
    expect(stale!.failed).toBeNull();
    expect((await portalRow(p.portalId)).disconnected_at).toBeNull();
    expect((await credentials(p.portalId)).refresh_holder).toBe('holder-b');
    const [current] = await db.sql`select public.disconnect_portal(${p.portalId}, 'test: refused', 'holder-b') as failed`;
    expect(current!.failed).toBe(0);
    const row = await portalRow(p.portalId);
    expect(row.disconnected_reason).toBe('test: refused');
    const [claim] = await db.sql`select decision, disconnected_message from public.claim_portal_token(${p.portalId}, 'holder-c')`;
    expect(claim).toEqual({ decision: 'disconnected', disconnected_message: 'HubSpot access was removed: reconnect the portal (test: refused).' });
  });
});

describe('HubSpot\'s v3 error bodies (no code): a refused refresh is settled by introspection', () => {
  it('an uninstalled app, refused without a code, disconnects the portal after introspection calls the refresh token inactive', async () => {
    const sim = await newSim({ oauth: { errorStyle: 'v3' } });
    const p = await install(sim);
    await makeDue(p.portalId);
    sim.uninstall(p.hub);
    // The simulator's v3 body is the spec's Error: no `status`, no `error`.
    const refused = await fetch(`${sim.url}/oauth/v3/token`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', client_id: APP.clientId, client_secret: APP.clientSecret, refresh_token: p.refreshToken }),
    });
    expect(refused.status).toBe(400);
    expect(Object.keys(await refused.json() as object).sort()).toEqual(['category', 'correlationId', 'message']);
    sim.resetStats();
    const error = await portalTokenSource(deps(sim), p.portalId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotAccessRemoved);
    expect((error as Error).message).toMatch(/^HubSpot access was removed: reconnect the portal \(the app was uninstalled/);
    expect(refreshRequests(sim)).toHaveLength(1);
    expect(introspections(sim).map((e) => e.outcome)).toEqual(['inactive']);
    expect((await portalRow(p.portalId)).disconnected_at).not.toBeNull();
  });

  it('a refusal without a code while the refresh token is still active is transient: nothing is disconnected', async () => {
    const sim = await newSim({ oauth: { errorStyle: 'v3' } });
    const p = await install(sim);
    await makeDue(p.portalId);
    sim.failNextOAuth(1, 400); // a 400 that says nothing about the token
    const error = await portalTokenSource(deps(sim), p.portalId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotTransientError);
    expect(introspections(sim).map((e) => e.outcome)).toEqual(['ok']);
    expect((await portalRow(p.portalId)).disconnected_at).toBeNull();
    const c = await credentials(p.portalId);
    expect(c.refresh_holder).toBeNull(); // the lease was given back
    expect(await (await portalTokenSource(deps(sim), p.portalId))!.current()).toMatchObject({ version: String(Number(c.token_version) + 1) });
  });

  it('the app\'s client secret refused (v3 body: introspection refused too) fails retryably for the operator, once per isolate, and disconnects nothing', async () => {
    const sim = await newSim({ oauth: { errorStyle: 'v3' } });
    const p = await install(sim);
    const q = await install(sim);
    await makeDue(p.portalId);
    await makeDue(q.portalId);
    const rejected: HubSpotOAuthAppRejected[] = [];
    const wrongApp = { clientId: APP.clientId, clientSecret: 'not-the-secret' };
    const first = await portalTokenSource(deps(sim, { oauthApp: wrongApp, onAppRejected: (e) => rejected.push(e) }), p.portalId).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(HubSpotOAuthAppRejected);
    expect((first as HubSpotOAuthAppRejected).retryable).toBe(true);
    expect((first as Error).message).toContain('HUBSPOT_CLIENT_SECRET');
    expect((first as Error).message).not.toContain('not-the-secret');
    // Another portal's refresh in the same isolate fails at once, without asking HubSpot again.
    const second = await portalTokenSource(deps(sim, { oauthApp: wrongApp, onAppRejected: (e) => rejected.push(e) }), q.portalId).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(HubSpotOAuthAppRejected);
    expect(rejected).toHaveLength(1);
    expect(refreshRequests(sim)).toHaveLength(1);
    expect(introspections(sim).map((e) => e.outcome)).toEqual(['bad_client_secret']);
    for (const id of [p.portalId, q.portalId]) {
      expect((await portalRow(id)).disconnected_at).toBeNull();
      expect((await credentials(id)).refresh_holder).toBeNull();
    }
  });

  it('with HubSpot\'s code (BAD_CLIENT_SECRET) no introspection is needed', async () => {
    const sim = await newSim();
    const p = await install(sim);
    await makeDue(p.portalId);
    const error = await portalTokenSource(deps(sim, { oauthApp: { clientId: APP.clientId, clientSecret: 'wrong' } }), p.portalId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotOAuthAppRejected);
    expect((error as Error).message).toContain('(BAD_CLIENT_SECRET)');
    expect(introspections(sim)).toHaveLength(0);
    expect((await portalRow(p.portalId)).disconnected_at).toBeNull();
  });
});

describe('leases', () => {
  it('a crashed holder\'s lease runs out: another caller refreshes, and the late holder\'s write and disconnect change nothing', async () => {
    const sim = await newSim();
    const p = await install(sim);
    await makeDue(p.portalId);
    const [crashed] = await db.sql`select decision from public.claim_portal_token(${p.portalId}, 'crashed-holder')`;
    expect(crashed!.decision).toBe('refresh');
    // Its lease runs out (back-dated, no sleeping); the next caller takes it over and refreshes.
    await db.sql`update private.portal_credentials set refresh_lease_expires_at = now() - interval '1 millisecond' where portal_id = ${p.portalId}`;
    const before = await credentials(p.portalId);
    const source = (await portalTokenSource(deps(sim), p.portalId))!;
    const after = await credentials(p.portalId);
    expect(Number(after.token_version)).toBe(Number(before.token_version) + 1);
    expect(refreshRequests(sim).map((e) => e.outcome)).toEqual(['ok']);
    // The crashed holder comes back late with "its" refresh: refused, nothing written.
    const [late] = await db.sql`select public.complete_token_refresh(${p.portalId}, 'crashed-holder', 'k1',
      ${after.access_token_enc as string}, ${after.refresh_token_enc as string}, 1800, 300, null) as version`;
    expect(late!.version).toBeNull();
    const [lateDisconnect] = await db.sql`select public.disconnect_portal(${p.portalId}, 'test: late refusal', 'crashed-holder') as failed`;
    expect(lateDisconnect!.failed).toBeNull();
    const final = await credentials(p.portalId);
    expect(final.token_version).toBe(after.token_version);
    expect(final.access_token_enc).toBe(after.access_token_enc);
    expect((await portalRow(p.portalId)).disconnected_at).toBeNull();
    expect((await source.current()).version).toBe(String(after.token_version));
  });

  it('a refresh whose lease is nearly used up before its request gives the lease back and claims again instead of sending it', async () => {
    const sim = await newSim();
    const p = await install(sim);
    await makeDue(p.portalId);
    const statements: string[] = [];
    // The clock jumps 29.8 s of the 30 s lease once, between the claim and the request (e.g. a long budget wait).
    let offset = 0;
    let reads = 0;
    const now = () => {
      reads++;
      if (reads === 2) offset = 29_800;
      return Date.now() + offset;
    };
    await portalTokenSource(deps(sim, { sql: recordingSql(statements), now }), p.portalId);
    const calls = statements.map((s) => /public\.(claim_portal_token|abandon_token_refresh|complete_token_refresh)/.exec(s)?.[1]).filter(Boolean);
    expect(calls).toEqual(['claim_portal_token', 'abandon_token_refresh', 'claim_portal_token', 'complete_token_refresh']);
    expect(refreshRequests(sim)).toHaveLength(1);
  });
});

describe('rotated refresh tokens', () => {
  it('a refresh that answers a new refresh token stores it: the next refresh uses it (the old one is refused by then)', async () => {
    const sim = await newSim({ oauth: { rotateRefreshTokens: true } });
    const p = await install(sim);
    const stored = async () => openStoredToken(ring, (await credentials(p.portalId)).refresh_token_enc as string, 'refresh', p);
    expect(await stored()).toBe(p.refreshToken);
    await makeDue(p.portalId);
    await portalTokenSource(deps(sim), p.portalId);
    const second = await stored();
    expect(second).not.toBe(p.refreshToken);
    await makeDue(p.portalId);
    await portalTokenSource(deps(sim), p.portalId);
    const third = await stored();
    expect(third).not.toBe(second);
    expect(refreshRequests(sim).map((e) => e.outcome)).toEqual(['ok', 'ok']);
    const old = await postOAuthToken({ basePath: sim.url }, { grant_type: 'refresh_token', client_id: APP.clientId, client_secret: APP.clientSecret, refresh_token: p.refreshToken })
      .catch((e: unknown) => e);
    expect(old).toMatchObject({ code: 'BAD_REFRESH_TOKEN', revoked: true });
    expect((await portalRow(p.portalId)).disconnected_at).toBeNull();
  });
});

describe('sealed tokens are bound to owner and hub', () => {
  it('two users connecting the same hub: a ciphertext copied from one row into the other does not open', async () => {
    const sim = await newSim();
    const a = await install(sim);
    const b = await install(sim, { hub: a.hub });
    expect(a.portalId).not.toBe(b.portalId);
    const ca = await credentials(a.portalId);
    expect(sealedFormat(ca.access_token_enc as string)).toBe('v2');
    expect(ca.access_token_hash).toBeNull(); // OAuth access tokens are not looked up by hash
    await db.sql`update private.portal_credentials set access_token_enc = ${ca.access_token_enc as string} where portal_id = ${b.portalId}`;
    const error = await portalTokenSource(deps(sim), b.portalId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoredTokenUnreadable);
    expect((error as Error).message).not.toContain(a.accessToken);
  });

  it('a ciphertext of the first format (raw key, hub-only additional data) still opens, and rotation seals it again in the second', async () => {
    const sim = await newSim();
    const p = await install(sim);
    // What the previous code wrote: AES-GCM under the raw key, additional data "access:<hub>".
    const seal = async (token: string, context: string) => {
      const key = await webcrypto.subtle.importKey('raw', RAW_KEY, 'AES-GCM', false, ['encrypt']);
      const iv = webcrypto.getRandomValues(new Uint8Array(12));
      const ct = await webcrypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(context) }, key, new TextEncoder().encode(token));
      return `v1.k1.${Buffer.from(iv).toString('base64url')}.${Buffer.from(ct).toString('base64url')}`;
    };
    await db.sql`update private.portal_credentials
      set access_token_enc = ${await seal(p.accessToken, `access:${p.hub}`)}, refresh_token_enc = ${await seal(p.refreshToken, `refresh:${p.hub}`)}
      where portal_id = ${p.portalId}`;
    expect((await (await portalTokenSource(deps(sim), p.portalId))!.current()).token).toBe(p.accessToken);
    const rotated = await rotateAllCredentials(db.sql, ring);
    expect(rotated.rotated).toBeGreaterThanOrEqual(1);
    const c = await credentials(p.portalId);
    expect(sealedFormat(c.access_token_enc as string)).toBe('v2');
    expect(sealedFormat(c.refresh_token_enc as string)).toBe('v2');
    expect(await openStoredToken(ring, c.refresh_token_enc as string, 'refresh', p)).toBe(p.refreshToken);
    // The second format is not AES-GCM under the raw key (the key is derived with HKDF).
    const [, , iv, data] = (c.access_token_enc as string).split('.');
    const raw = await webcrypto.subtle.importKey('raw', RAW_KEY, 'AES-GCM', false, ['decrypt']);
    await expect(webcrypto.subtle.decrypt({ name: 'AES-GCM', iv: Buffer.from(iv!, 'base64url'), additionalData: new TextEncoder().encode(`access:${p.ownerId}:${p.hub}`) },
      raw, Buffer.from(data!, 'base64url'))).rejects.toThrow();
  });
});
