// HubSpot tokens at rest and in use: sealed credentials (read back from the
// table itself), wrong and removed keys, key rotation, the shared OAuth refresh
// under real concurrency (many connections, many workers), a 401 for an expired
// token, an uninstalled app mid-run and a removed scope; nothing can store a
// token in clear any more, and a dump of a database the fixtures and a fetch
// went through holds no token. Real Postgres, the simulator's OAuth endpoints
// over loopback, the real worker invocation.
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { runWorkerInvocation, type InvocationSummary, type WorkerRuntime } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { createHubSpotClient } from '../shared/hubspot/client.ts';
import { HubSpotAccessRemoved } from '../shared/hubspot/errors.ts';
import { postOAuthToken } from '../shared/hubspot/oauth-http.ts';
import { connectOAuthPortal, connectPrivateAppPortal, knownHubSpotPortalForToken } from '../shared/hubspot/portal-connect.ts';
import { portalTokenSource, StoredTokenUnreadable, type PortalTokenDeps } from '../shared/hubspot/portal-tokens.ts';
import { createRun } from '../shared/sql/runs.ts';
import { decryptToken, encryptToken, parseTokenKeys, TokenDecryptionError, type TokenKeyring } from '../shared/token-crypto.ts';
import { rotateAllCredentials, rotateCredentialsBatch } from '../shared/hubspot/token-rotation.ts';
import { startHubSpotSimulator, tokenHash, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { TEST_TOKEN_KEYS, testTokenKeys } from '../local/test-token-keys.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';
import {
  connectSimPortal, invokeUntilFinished, jobsOf, notificationOf, runOf, sleep, startFetchRun, stopAllRuns, waitUntil,
} from './support/fetch-fixtures.ts';
import { pgError } from './support/queue-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const sims: HubSpotSimulator[] = [];
afterEach(async () => {
  await stopAllRuns(db.sql);
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

const APP = { clientId: `client-${randomUUID()}`, clientSecret: `secret-${randomUUID()}` };
const REDIRECT = 'http://127.0.0.1:9/oauth/callback';
const newKey = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const K1 = newKey('k1');
const K2 = newKey('k2');
const keys = (value: string) => parseTokenKeys(value)!;

async function newSim(ttlSeconds = 1800, options: Parameters<typeof startHubSpotSimulator>[0] = {}): Promise<HubSpotSimulator> {
  const sim = await startHubSpotSimulator({ ...options, oauth: { accessTokenTtlSeconds: ttlSeconds, ...options.oauth } });
  sim.registerApp({ ...APP, redirectUris: [REDIRECT] });
  sims.push(sim);
  return sim;
}

let nextPortal = 810_000 + Math.floor(Math.random() * 10_000) * 10;

interface OAuthPortal {
  userId: string;
  portalId: string;
  hubspotPortalId: number;
  accessToken: string;
  refreshToken: string;
}

/** Adds a portal to the simulator, installs the app there (authorize → code → v3 token) and stores the grant sealed. */
async function installOAuthPortal(sim: HubSpotSimulator, ring: TokenKeyring, opts: { sizes?: Record<string, number>; margin?: number } = {}): Promise<OAuthPortal> {
  const hubspotPortalId = nextPortal++;
  sim.addPortal({ portalId: hubspotPortalId, token: `pat-unused-${randomUUID()}`, sizes: opts.sizes ?? {} });
  sim.queueInstall({ portalId: hubspotPortalId, grant: 'approve' });
  const url = new URL(`${sim.url}/oauth/authorize`);
  url.search = new URLSearchParams({ client_id: APP.clientId, redirect_uri: REDIRECT, scope: 'content hubdb', state: 's' }).toString();
  const code = (await sim.authorize(url.toString())).searchParams.get('code')!;
  const grant = await postOAuthToken({ basePath: sim.url }, {
    grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code,
  });
  expect(grant.hubId).toBe(hubspotPortalId);
  const userId = await createUser(db.sql);
  const portalId = await connectOAuthPortal(db.sql, ring, {
    ownerId: userId, hubspotPortalId, name: `OAuth ${hubspotPortalId}`, accessToken: grant.accessToken,
    refreshToken: grant.refreshToken!, expiresInSeconds: grant.expiresIn, requestedAt: grant.requestedAt, scopes: grant.scopes,
    refreshMarginSeconds: opts.margin,
  });
  return { userId, portalId, hubspotPortalId, accessToken: grant.accessToken, refreshToken: grant.refreshToken! };
}

function tokenDeps(sim: HubSpotSimulator, ring: TokenKeyring | null, sql: Sql = db.sql, holderId = 'test'): PortalTokenDeps {
  return { sql, keys: ring, oauthApp: APP, holderId, basePath: sim.url, rateLimit: { maxPer10s: 190 } };
}

async function workerRuntime(sim: HubSpotSimulator, ring: TokenKeyring | null, sql: Sql = db.sql, settings: Parameters<typeof testWorkerRuntime>[2] = {}): Promise<WorkerRuntime> {
  return { ...(await testWorkerRuntime(sql, sim.url, settings)), tokenKeys: ring, oauthApp: APP };
}

/**
 * A portal connected before tokens were sealed: its token in clear in the legacy column. Nothing
 * writes such a row any more (a trigger refuses it), so the test writes it as it was left by the
 * old connect_portal, with the refusing trigger off for that insert. The table's owner (the role
 * that ran the migrations) may do that; no superuser needed, as hosted Supabase's `postgres` is none.
 */
async function legacyPortal(hubspotPortalId: number, token: string, ownerId?: string): Promise<string> {
  const owner = ownerId ?? (await createUser(db.sql));
  return db.sql.begin(async (tx) => {
    const [p] = await tx`insert into public.portals (owner_id, hubspot_portal_id, name) values (${owner}, ${hubspotPortalId}, 'legacy') returning id`;
    await tx`alter table private.portal_credentials disable trigger portal_credentials_no_plaintext`;
    await tx`insert into private.portal_credentials (portal_id, access_token) values (${p!.id as string}, ${token})`;
    await tx`alter table private.portal_credentials enable trigger portal_credentials_no_plaintext`;
    return p!.id as string;
  });
}

/** Every credentials row, every column as text. */
async function credentialRows(): Promise<string[]> {
  const rows = await db.sql`select row_to_json(c)::text as row from private.portal_credentials c`;
  return rows.map((r) => r.row as string);
}

// Refresh grants for the portal (a refused or faulted one cannot name its portal: each test has its own simulator).
const oauthRefreshes = (sim: HubSpotSimulator, hubspotPortalId: number) =>
  sim.oauthLog().filter((e) => e.endpoint.includes('/oauth/v3/token') && e.grantType !== 'authorization_code'
    && (e.portalId === hubspotPortalId || e.portalId === null));

describe('tokens sealed at rest', () => {
  it('the credentials table holds no token in clear text, private-app and OAuth alike; lookups go by hash', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const oauth = await installOAuthPortal(sim, ring);
    const userId = await createUser(db.sql);
    const pat = `pat-na1-${randomUUID()}`;
    const privatePortal = await connectPrivateAppPortal(db.sql, ring, { ownerId: userId, hubspotPortalId: 4242, name: 'PAT', accessToken: pat });

    const rows = (await credentialRows()).join('\n');
    for (const secret of [oauth.accessToken, oauth.refreshToken, pat]) {
      expect(rows).not.toContain(secret);
      expect(rows).not.toContain(secret.slice(8, 30)); // not even a piece of it
    }
    const [c] = await db.sql`select * from private.portal_credentials where portal_id = ${privatePortal}`;
    expect(c).toMatchObject({ access_token: null, key_id: 'k1', auth_kind: 'private_app', refresh_token_enc: null });
    expect(c!.access_token_enc).toMatch(/^v2\.k1\./);
    const [o] = await db.sql`select * from private.portal_credentials where portal_id = ${oauth.portalId}`;
    expect(o).toMatchObject({ access_token: null, key_id: 'k1', auth_kind: 'oauth' });
    expect(o!.refresh_token_enc).toMatch(/^v2\.k1\./);
    expect((o!.access_expires_at as Date).getTime()).toBeGreaterThan(Date.now() + 1700_000);
    // The owner sees how the portal is connected, and nothing of the token.
    const [p] = await db.sql`select auth_kind, disconnected_at from public.portals where id = ${oauth.portalId}`;
    expect(p).toEqual({ auth_kind: 'oauth', disconnected_at: null });

    // "Is this the token we already store?" answered by HMAC, under either key.
    expect(await knownHubSpotPortalForToken(db.sql, ring, userId, pat)).toBe('4242');
    expect(await knownHubSpotPortalForToken(db.sql, keys(`${K2},${K1}`), userId, pat)).toBe('4242');
    expect(await knownHubSpotPortalForToken(db.sql, ring, userId, `${pat}x`)).toBeNull();
    expect(await knownHubSpotPortalForToken(db.sql, ring, oauth.userId, pat)).toBeNull(); // another owner's
  });

  it('a wrong key, a removed key and a ciphertext moved to another portal fail clearly, never showing the token', async () => {
    const ring = keys(K1);
    const token = `pat-na1-${randomUUID()}`;
    const sealed = await encryptToken(ring, token, 'access:1');
    expect(await decryptToken(ring, sealed, 'access:1')).toBe(token);
    expect(await decryptToken(keys(`${K2},${K1}`), sealed, 'access:1')).toBe(token); // an older key still opens

    const failures = await Promise.all([
      decryptToken(keys(newKey('k1')), sealed, 'access:1'), // same id, other key
      decryptToken(keys(K2), sealed, 'access:1'), // k1 removed
      decryptToken(ring, sealed, 'access:2'), // bound to portal 1
      decryptToken(ring, sealed.slice(0, -4) + 'AAAA', 'access:1'), // altered
      decryptToken(ring, token, 'access:1'), // not sealed at all
    ].map((p) => p.then(() => null, (e: unknown) => e)));
    for (const e of failures) {
      expect(e).toBeInstanceOf(TokenDecryptionError);
      expect((e as Error).message).not.toContain(token);
      expect((e as Error).message).not.toContain(K1.slice(3));
    }
    expect((failures[0] as Error).message).toMatch(/did not decrypt with key "k1" from HUBSPOT_TOKEN_KEYS/);
    expect((failures[1] as Error).message).toMatch(/encrypted with key "k1", which is not in HUBSPOT_TOKEN_KEYS \(it has "k2"\)/);

    // Malformed secrets are refused naming the variable, never echoing key material.
    for (const bad of ['k1', 'k1:short', `bad id:${randomBytes(32).toString('base64')}`, `${K1},${K1}`]) {
      let message = '';
      try {
        parseTokenKeys(bad);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message).toMatch(/^HUBSPOT_TOKEN_KEYS/);
      expect(message).not.toContain(K1.slice(3));
    }

    // Through the token source: a portal sealed under a key that is gone fails permanently and says why.
    const sim = await newSim();
    const userId = await createUser(db.sql);
    const portalId = await connectPrivateAppPortal(db.sql, ring, { ownerId: userId, hubspotPortalId: 4243, name: 'x', accessToken: token });
    const error = await portalTokenSource(tokenDeps(sim, keys(K2)), portalId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoredTokenUnreadable);
    expect((error as StoredTokenUnreadable).retryable).toBe(false);
    expect((error as Error).message).toMatch(/key "k1", which is not in HUBSPOT_TOKEN_KEYS/);
    expect((error as Error).message).not.toContain(token);
  });

  it('key rotation re-seals every portal (legacy plaintext included) in bounded batches, and every portal keeps working', async () => {
    const sim = await newSim();
    const k1 = keys(K1);
    // Three kinds of rows: legacy plaintext (from before encryption), private app under k1, OAuth under k1.
    const legacyToken = `pat-na1-legacy-${randomUUID()}`;
    const legacyHub = nextPortal++;
    sim.addPortal({ portalId: legacyHub, token: legacyToken, sizes: { blog_tags: 120 } });
    const legacyUser = await createUser(db.sql);
    const legacy = await legacyPortal(legacyHub, legacyToken, legacyUser);
    const patToken = `pat-na1-${randomUUID()}`;
    const patHub = nextPortal++;
    sim.addPortal({ portalId: patHub, token: patToken, sizes: { blog_tags: 120 } });
    const patUser = await createUser(db.sql);
    const pat = await connectPrivateAppPortal(db.sql, k1, { ownerId: patUser, hubspotPortalId: patHub, name: 'pat', accessToken: patToken });
    const oauth = await installOAuthPortal(sim, k1, { sizes: { blog_tags: 120 } });
    expect((await credentialRows()).join()).toContain(legacyToken); // the legacy row is plaintext until rotated

    // Step 2 of the procedure: k2 current, k1 still listed. Old rows still work meanwhile (k1 opens them).
    const both = keys(`${K2},${K1}`);
    const src = await portalTokenSource(tokenDeps(sim, both), pat);
    expect((await src!.current()).token).toBe(patToken);
    // Bounded batches: 2 rows per call.
    const first = await rotateCredentialsBatch(db.sql, both, 2);
    expect(first).toMatchObject({ seen: 2, rotated: 2, unreadable: 0 });
    const rest = await rotateAllCredentials(db.sql, both, 2);
    expect(rest.rotated).toBeGreaterThanOrEqual(1);
    expect(await db.sql`select portal_id from private.portal_credentials where key_id is distinct from 'k2' or access_token is not null`).toHaveLength(0);
    const rows = (await credentialRows()).join('\n');
    for (const t of [legacyToken, patToken, oauth.accessToken, oauth.refreshToken]) expect(rows).not.toContain(t);
    expect(await rotateCredentialsBatch(db.sql, both, 2)).toMatchObject({ seen: 0 });

    // Step 3: k1 removed. Every portal fetches with k2 alone; k1 alone opens nothing any more.
    const k2 = keys(K2);
    for (const portalId of [legacy, pat, oauth.portalId]) {
      const run = await createRun(db.sql, { portalId, requestedBy: portalId === legacy ? legacyUser : portalId === pat ? patUser : oauth.userId, kind: 'fetch', contentTypes: ['blog_tags'] });
      const s = await runWorkerInvocation(await workerRuntime(sim, k2), `rotated-${randomUUID().slice(0, 6)}`);
      expect(s).toMatchObject({ completed: 1, failed: 0 });
      expect(await runOf(db.sql, run.runId!)).toMatchObject({ status: 'completed' });
      await expect(portalTokenSource(tokenDeps(sim, k1), portalId)).rejects.toThrow(/key "k2", which is not in HUBSPOT_TOKEN_KEYS/);
    }
  });

  it('the worker seals legacy plaintext rows itself, one bounded batch per invocation', async () => {
    const sim = await newSim();
    const token = `pat-na1-legacy-${randomUUID()}`;
    const hub = nextPortal++;
    sim.addPortal({ portalId: hub, token, sizes: {} });
    const portalId = await legacyPortal(hub, token);
    await runWorkerInvocation(await workerRuntime(sim, keys(K1)), 'sealer');
    const [row] = await db.sql`select access_token, key_id from private.portal_credentials where portal_id = ${portalId}`;
    expect(row).toEqual({ access_token: null, key_id: 'k1' });
    expect((await credentialRows()).join()).not.toContain(token);
  });

  it('the rotation script seals everything left under an old key or in plaintext, and says how many remain', async () => {
    const token = `pat-na1-legacy-${randomUUID()}`;
    const portalId = await legacyPortal(nextPortal++, token);
    const run = promisify(execFile);
    const { stdout } = await run('node_modules/.bin/tsx', ['scripts/rotate-token-keys.ts', '--batch', '3'], {
      env: { ...process.env, SUPABASE_DB_URL: db.url, QUEUE_DB_URL: '', HUBSPOT_TOKEN_KEYS: `${K2},${K1}` },
    });
    expect(JSON.parse(stdout)).toMatchObject({ currentKeyId: 'k2', left: 0, unreadable: [] });
    expect(stdout).not.toContain(token);
    const [row] = await db.sql`select access_token, key_id from private.portal_credentials where portal_id = ${portalId}`;
    expect(row).toEqual({ access_token: null, key_id: 'k2' });
  });

  it('nothing stores a token in clear any more: the plaintext functions are gone, the table refuses a new plaintext token', async () => {
    const [gone] = await db.sql`select to_regprocedure('public.connect_portal(uuid, bigint, text, text)') as connect,
      to_regprocedure('public.portal_credentials(uuid)') as read`;
    expect(gone).toEqual({ connect: null, read: null });

    const token = `pat-na1-${randomUUID()}`;
    const userId = await createUser(db.sql);
    const [p] = await db.sql`insert into public.portals (owner_id, hubspot_portal_id, name) values (${userId}, ${nextPortal++}, 'direct') returning id`;
    const sealedHub = nextPortal++;
    const sealed = await connectPrivateAppPortal(db.sql, keys(K1), { ownerId: userId, hubspotPortalId: sealedHub, name: 'sealed', accessToken: token });
    const legacy = await legacyPortal(nextPortal++, token);
    const refusals = [
      ['insert', () => db.sql`insert into private.portal_credentials (portal_id, access_token) values (${p!.id as string}, ${token})`],
      ['plaintext next to a sealed token', () => db.sql`update private.portal_credentials set access_token = ${token} where portal_id = ${sealed}`],
      ['a legacy token replaced', () => db.sql`update private.portal_credentials set access_token = ${`${token}-new`} where portal_id = ${legacy}`],
      ['upsert', () => db.sql`insert into private.portal_credentials (portal_id, access_token) values (${legacy}, ${`${token}-new`})
                               on conflict (portal_id) do update set access_token = excluded.access_token`],
    ] as const;
    for (const [label, write] of refusals) {
      const err = await pgError(write);
      expect({ label, code: err.code }).toEqual({ label, code: '23514' });
      expect(err.message).toMatch(/stored sealed only/);
      expect(err.message).not.toContain(token);
    }
    // What was there stays: the sealed row sealed, the legacy row readable until the rotation seals it.
    const rows = await db.sql`select portal_id, access_token, key_id from private.portal_credentials where portal_id in ${db.sql([sealed, legacy, p!.id as string])}`;
    expect(Object.fromEntries(rows.map((r) => [r.portal_id, [r.access_token, r.key_id]]))).toEqual({ [sealed]: [null, 'k1'], [legacy]: [token, null] });
    const sim = await newSim();
    expect((await (await portalTokenSource(tokenDeps(sim, keys(K1)), legacy))!.current()).token).toBe(token);
    // Other columns of a legacy row can still change (a failed rotation is recorded), and the rotation clears it.
    await db.sql`update private.portal_credentials set rotation_attempted_at = now() - interval '2 hours' where portal_id = ${legacy}`;
    await rotateAllCredentials(db.sql, keys(K1));
    const [after] = await db.sql`select access_token, key_id from private.portal_credentials where portal_id = ${legacy}`;
    expect(after).toEqual({ access_token: null, key_id: 'k1' });
  });
});

describe('shared OAuth refresh', () => {
  it('many workers on many connections find the token due at once: exactly one refresh, all get the new token', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring);
    // Due now and about to expire (too soon to keep using while another worker refreshes): back-dated, the database decides.
    await db.sql`update private.portal_credentials set refresh_after = now() - interval '1 second',
      access_expires_at = now() + interval '2 seconds' where portal_id = ${p.portalId}`;
    const pools = Array.from({ length: 6 }, () => db.connect(2));
    const sources = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      portalTokenSource(tokenDeps(sim, ring, pools[i % pools.length]!, `worker-${i}`), p.portalId)));
    const tokens = await Promise.all(sources.map((s) => s!.current()));
    expect(oauthRefreshes(sim, p.hubspotPortalId).map((e) => e.outcome)).toEqual(['ok']);
    expect(new Set(tokens.map((t) => t.token)).size).toBe(1);
    expect(tokens[0]!.token).not.toBe(p.accessToken);
    const [c] = await db.sql`select token_version::int as v, refresh_holder, refresh_after > now() as fresh from private.portal_credentials where portal_id = ${p.portalId}`;
    expect(c).toEqual({ v: 2, refresh_holder: null, fresh: true });
    // The new token works on HubSpot.
    await createHubSpotClient({ tokens: sources[0]!, basePath: sim.url }).countTotal('blog_tags');
  });

  it('a 401 for an expired token triggers exactly one refresh and one retry, however many requests see it', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring, { sizes: { blog_tags: 50 } });
    const clients = await Promise.all(Array.from({ length: 8 }, async (_, i) =>
      createHubSpotClient({ tokens: (await portalTokenSource(tokenDeps(sim, ring, db.connect(1), `w${i}`), p.portalId))!, basePath: sim.url })));
    // HubSpot's clock runs ahead of ours: the token we think fresh has expired there.
    sim.advanceClock(1801);
    sim.resetStats();
    const totals = await Promise.all(clients.map((c) => c.countTotal('blog_tags')));
    expect(totals).toEqual(Array(8).fill(50));
    expect(oauthRefreshes(sim, p.hubspotPortalId).map((e) => e.outcome)).toEqual(['ok']);
    // Each client sent the old token once (the 401) and the new one once: no second 401, no second refresh.
    expect(sim.stats().expiredTokenRequests).toBe(8);
    const log = sim.requestLog().filter((e) => e.portalId === p.hubspotPortalId);
    expect(log.filter((e) => e.status === 401)).toHaveLength(8);
    expect(log.filter((e) => e.status === 200)).toHaveLength(8);
    expect(log.filter((e) => e.status === 401).every((e) => e.tokenHash === tokenHash(p.accessToken))).toBe(true);
    // A 401 for a token someone else already replaced refreshes nothing more.
    const late = createHubSpotClient({ tokens: (await portalTokenSource(tokenDeps(sim, ring), p.portalId))!, basePath: sim.url });
    await late.countTotal('blog_tags');
    expect(oauthRefreshes(sim, p.hubspotPortalId)).toHaveLength(1);
  });

  it('a refresh HubSpot cannot answer (503) gives the lease back: the next caller refreshes', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring);
    await db.sql`update private.portal_credentials set refresh_after = now() - interval '1 second' where portal_id = ${p.portalId}`;
    sim.failNextOAuth(1, 503);
    const error = await portalTokenSource(tokenDeps(sim, ring), p.portalId).catch((e: unknown) => e);
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    const [c] = await db.sql`select refresh_holder from private.portal_credentials where portal_id = ${p.portalId}`;
    expect(c!.refresh_holder).toBeNull();
    const src = await portalTokenSource(tokenDeps(sim, ring), p.portalId);
    expect((await src!.current()).token).not.toBe(p.accessToken);
    expect(oauthRefreshes(sim, p.hubspotPortalId).map((e) => e.outcome)).toEqual(['fault', 'ok']);
  });

  it('a fetch lasting several token lifetimes: 8 jobs in concurrent invocations, one refresh per expiry, no expired request', async () => {
    const TTL = 3;
    const sim = await newSim(TTL);
    const ring = keys(K1);
    // ~95 pages at 350 ms each, at most 4 fetch jobs of a portal at once: several token lifetimes.
    const sizes = { site_pages: 1_500, landing_pages: 1_500, blog_posts: 2_000, blog_authors: 1_000, blog_tags: 1_500, url_redirects: 1_500, hubdb_rows: 3_000 };
    const p = await installOAuthPortal(sim, ring, { sizes, margin: 1 });
    sim.setFaults({ slowMs: 350 });
    const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
    const summaries: InvocationSummary[] = [];
    // Three invocations at a time (own connections), two jobs each; more until the run ends.
    for (let round = 0; round < 20 && !(await runOf(db.sql, run.runId!)).finished_at; round++) {
      summaries.push(...await Promise.all([0, 1, 2].map(async (i) =>
        runWorkerInvocation(await workerRuntime(sim, ring, db.connect(3), { lanes: 2, budgetMs: 60_000 }), `long-${round}-${i}`))));
    }
    expect(await runOf(db.sql, run.runId!)).toMatchObject({ status: 'completed', jobs_completed: 8 });
    expect(summaries.reduce((n, s) => n + s.failed + s.retried, 0)).toBe(0);
    // The premise: the fetch outlived several tokens (at least three different ones made successful requests).
    const used = new Set(sim.requestLog().filter((e) => e.portalId === p.hubspotPortalId && e.status === 200).map((e) => e.tokenHash));
    expect(used.size).toBeGreaterThanOrEqual(3);

    const refreshes = oauthRefreshes(sim, p.hubspotPortalId);
    expect(refreshes.every((e) => e.outcome === 'ok')).toBe(true);
    expect(refreshes.length).toBeGreaterThanOrEqual(2);
    // No races: every refresh stored the token of one new version. Two refreshes in flight at once would
    // leave one unstored (complete_token_refresh refuses a holder that lost the lease): none was.
    const [c] = await db.sql`select token_version::int as v from private.portal_credentials where portal_id = ${p.portalId}`;
    expect(c!.v).toBe(1 + refreshes.length);
    // Each refresh issued a different token, and every one of them was used: one refresh per expiry, none wasted.
    const issued = refreshes.map((e) => e.tokenHash);
    expect(new Set(issued).size).toBe(refreshes.length);
    expect(issued.every((h) => used.has(h))).toBe(true);
    // Refreshed ahead of expiry: not one request was sent with an expired token (so no 401 at all).
    expect(sim.stats().byPortal[p.hubspotPortalId]?.expiredTokenRequests ?? 0).toBe(0);
    expect(sim.requestLog().filter((e) => e.portalId === p.hubspotPortalId && e.status === 401)).toHaveLength(0);
  });
});

describe('revocation and scopes', () => {
  it('the app uninstalled mid-run: portal disconnected, every job failed at once, run failed, one notification, no retries', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const sizes = { site_pages: 600, landing_pages: 600, blog_posts: 600, blog_authors: 600, blog_tags: 600, url_redirects: 600, hubdb_rows: 2_000 };
    const p = await installOAuthPortal(sim, ring, { sizes });
    sim.setFaults({ slowMs: 80 });
    const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
    const invocations = [0, 1].map(async (i) => runWorkerInvocation(await workerRuntime(sim, ring, db.connect(3), { lanes: 2 }), `uninstalled-${i}`));
    await waitUntil(() => sim.requestLog().filter((e) => e.portalId === p.hubspotPortalId && e.status === 200).length >= 10, 20_000, 'ten pages');
    sim.uninstall(p.hubspotPortalId);
    const uninstalledAt = Date.now();
    const summaries = await Promise.all(invocations);
    expect(summaries.reduce((n, s) => n + s.retried, 0)).toBe(0);

    const [portal] = await db.sql`select disconnected_at, disconnected_reason from public.portals where id = ${p.portalId}`;
    expect(portal!.disconnected_at).not.toBeNull();
    expect(portal!.disconnected_reason).toMatch(/uninstalled.*BAD_REFRESH_TOKEN/);
    const finished = await runOf(db.sql, run.runId!);
    expect(finished).toMatchObject({ status: 'failed', jobs_failed: 8, jobs_completed: 0 });
    for (const job of await jobsOf(db.sql, run.runId!)) {
      expect(job.status).toBe('failed');
      expect(job.attempts as number).toBeLessThanOrEqual(1);
      expect(job.last_error).toMatch(/^HubSpot access was removed: reconnect the portal/);
    }
    const notes = await notificationOf(db.sql, run.runId!);
    expect(notes).toHaveLength(1);
    expect(notes[0]!.message).toMatch(/HubSpot access was removed: reconnect the portal/);
    // One refresh attempt (refused); after the uninstall each running job met at most one 401 and sent nothing more.
    expect(oauthRefreshes(sim, p.hubspotPortalId).map((e) => e.outcome)).toEqual(['bad_refresh_token']);
    const after = sim.requestLog().filter((e) => e.portalId === p.hubspotPortalId && e.at >= uninstalledAt);
    expect(after.every((e) => e.status === 401)).toBe(true);
    expect(after.length).toBeLessThanOrEqual(4); // two invocations × two lanes

    // Nothing more happens: a later invocation finds nothing to do, a new token source says why.
    expect(await runWorkerInvocation(await workerRuntime(sim, ring), 'after')).toMatchObject({ claimed: 0 });
    await expect(portalTokenSource(tokenDeps(sim, ring), p.portalId)).rejects.toBeInstanceOf(HubSpotAccessRemoved);
    // Reconnecting (a new install) clears the disconnected state.
    await installOAuthPortalAgain(sim, ring, p);
    const [again] = await db.sql`select disconnected_at from public.portals where id = ${p.portalId}`;
    expect(again!.disconnected_at).toBeNull();
  });

  it('many workers on many connections see the uninstall at once: one refused refresh, every one told access was removed', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring);
    const pools = Array.from({ length: 6 }, () => db.connect(2));
    const sources = await Promise.all(Array.from({ length: 12 }, async (_, i) =>
      (await portalTokenSource(tokenDeps(sim, ring, pools[i % pools.length]!, `worker-${i}`), p.portalId))!));
    const used = await Promise.all(sources.map((s) => s.current()));
    sim.uninstall(p.hubspotPortalId);
    // Each got a 401 for the token it used: each asks to renew it, all at once.
    const results = await Promise.all(sources.map((s, i) => s.renewAfterRejection(used[i]!).then(() => null, (e: unknown) => e)));
    for (const e of results) expect(e).toBeInstanceOf(HubSpotAccessRemoved);
    expect(oauthRefreshes(sim, p.hubspotPortalId).map((e) => e.outcome)).toEqual(['bad_refresh_token']);
    const [portal] = await db.sql`select disconnected_reason from public.portals where id = ${p.portalId}`;
    expect(portal!.disconnected_reason).toMatch(/BAD_REFRESH_TOKEN/);
  });

  it('a claim that waited for the row while the portal was being disconnected sees the disconnection (no refresh)', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring);
    const other = db.connect(1);
    let claim: Promise<unknown> | null = null;
    await db.sql.begin(async (tx) => {
      await tx`select public.disconnect_portal(${p.portalId}, 'test: uninstalled')`;
      // A 401 for the current token, asked while the disconnect holds the credentials row: it waits for the lock.
      claim = other`select decision from public.claim_portal_token(${p.portalId}, 'late-worker', 1)`.then((rows) => [...rows]);
      await waitUntil(async () => {
        const [w] = await db.sql`select count(*)::int as n from pg_stat_activity
                                  where wait_event_type = 'Lock' and query like '%claim_portal_token%' and pid <> pg_backend_pid()`;
        return w!.n > 0;
      }, 10_000, 'the claim to wait for the row lock');
    });
    expect(await claim).toEqual([{ decision: 'disconnected' }]);
    const [c] = await db.sql`select refresh_holder from private.portal_credentials where portal_id = ${p.portalId}`;
    expect(c!.refresh_holder).toBeNull();
  });

  it('a scope removed: only the types needing it fail, at once, with a message naming the scope', async () => {
    const sim = await newSim();
    const ring = keys(K1);
    const p = await installOAuthPortal(sim, ring, { sizes: { hubdb_rows: 200 } });
    sim.removeScope(p.hubspotPortalId, 'hubdb');
    const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
    const s = await runWorkerInvocation(await workerRuntime(sim, ring, db.sql, { lanes: 2 }), 'scopes');
    expect(s).toMatchObject({ claimed: 8, completed: 6, failed: 2, retried: 0 });
    for (const job of await jobsOf(db.sql, run.runId!)) {
      if (job.content_type === 'hubdb_tables' || job.content_type === 'hubdb_rows') {
        expect(job).toMatchObject({ status: 'failed', attempts: 1 });
        expect(job.last_error).toMatch(/missing the scope "hubdb" \(MISSING_SCOPES\)/);
      } else {
        expect(job.status).toBe('completed');
      }
    }
    expect(await runOf(db.sql, run.runId!)).toMatchObject({ status: 'partially_failed' });
    const [portal] = await db.sql`select disconnected_at from public.portals where id = ${p.portalId}`;
    expect(portal!.disconnected_at).toBeNull();
    expect(sim.requestLog().filter((e) => e.status === 403)).toHaveLength(2); // one per failed job: no retry
  });
});

describe('a database dump', () => {
  it('after the fixtures and a fetch by the worker, holds no token: every credentials row sealed, no token text in any table', async () => {
    // The usual fixtures (a simulator portal, a plain user with a portal) and the worker as the tests run it.
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 40, url_redirects: 30 } });
    const other = `tok-${randomUUID()}`;
    const plain = await createUserWithPortal(db.sql, { token: other });
    const runId = await startFetchRun(db.sql, p, ['blog_tags', 'url_redirects']);
    const rt = await testWorkerRuntime(db.sql, sim.url);
    expect(rt.tokenKeys).toBe(testTokenKeys);
    await invokeUntilFinished(rt, db.sql, runId, { maxInvocations: 5 });
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
    expect(sim.requestLog().filter((e) => e.tokenHash === tokenHash(p.token)).length).toBeGreaterThan(0); // HubSpot saw the token, opened from its sealed form

    const [clear] = await db.sql`select count(*)::int as n from private.portal_credentials where access_token is not null`;
    expect(clear!.n).toBe(0);
    const mine = await db.sql`select portal_id, key_id, access_token_enc from private.portal_credentials where portal_id in ${db.sql([p.portalId, plain.portalId])}`;
    expect(mine.map((r) => r.key_id)).toEqual(['test1', 'test1']);

    // The data of every table, as pg_dump writes it (COPY ... TO STDOUT).
    const tables = await db.sql`select format('%I.%I', n.nspname, c.relname) as name
                                  from pg_class c join pg_namespace n on n.oid = c.relnamespace
                                 where c.relkind = 'r' and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname !~ '^pg_'
                                 order by 1`;
    expect(tables.map((t) => t.name)).toContain('private.portal_credentials');
    let dump = '';
    for (const t of tables) {
      for await (const chunk of await db.sql.unsafe(`copy ${t.name as string} to stdout`).readable()) dump += String(chunk);
    }
    for (const r of mine) expect(dump).toContain(r.access_token_enc); // the dump did read the credentials
    const keyMaterial = TEST_TOKEN_KEYS.slice(TEST_TOKEN_KEYS.indexOf(':') + 1);
    for (const secret of [p.token, other, keyMaterial]) {
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(secret.slice(4, 20)); // not even a piece of it
    }
  });
});

/** A second install of the app in the same portal for the same user (a reconnect). */
async function installOAuthPortalAgain(sim: HubSpotSimulator, ring: TokenKeyring, p: OAuthPortal): Promise<void> {
  sim.queueInstall({ portalId: p.hubspotPortalId, grant: 'approve' });
  const url = new URL(`${sim.url}/oauth/authorize`);
  url.search = new URLSearchParams({ client_id: APP.clientId, redirect_uri: REDIRECT, scope: 'content hubdb' }).toString();
  const code = (await sim.authorize(url.toString())).searchParams.get('code')!;
  const grant = await postOAuthToken({ basePath: sim.url }, {
    grant_type: 'authorization_code', client_id: APP.clientId, client_secret: APP.clientSecret, redirect_uri: REDIRECT, code,
  });
  const id = await connectOAuthPortal(db.sql, ring, {
    ownerId: p.userId, hubspotPortalId: p.hubspotPortalId, name: 'again', accessToken: grant.accessToken,
    refreshToken: grant.refreshToken!, expiresInSeconds: grant.expiresIn,
  });
  expect(id).toBe(p.portalId);
  await sleep(0);
}
