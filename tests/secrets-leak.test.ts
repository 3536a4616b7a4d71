// No secret leaves the system: an end-to-end run under real Deno (connect,
// fetch, export, a token revoked mid-way, HubSpot faults, bad credentials of
// every kind, an OAuth install whose short-lived tokens are refreshed, then the
// app uninstalled) plus in-process worker and orchestrator runs with capturing
// loggers. Every log line, every HTTP response (status, headers, body), job
// errors and results, run rows, notifications, export files and the stored
// credentials themselves are searched for HubSpot tokens (private-app, OAuth
// access and refresh), the OAuth client secret, the token keys, the worker
// secret, user JWTs and signing material.
import { randomBytes, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { openStoredToken } from '../shared/hubspot/token-sealing.ts';
import { createLogger } from '../shared/log.ts';
import { createRun } from '../shared/sql/runs.ts';
import { parseTokenKeys } from '../shared/token-crypto.ts';
import { waitFor } from '../scripts/chaos/checks.ts';
import { createSigningKeys } from '../local/supabase.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { installThroughSimulator, startLocalSystem, type LocalSystem } from '../local/system.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sys: LocalSystem;

/** The key that seals tokens in both functions (and in the in-process runs), so the test can open what they stored. */
const TOKEN_KEY = randomBytes(32).toString('base64');
const TOKEN_KEYS = `leak1:${TOKEN_KEY}`;
const tokenKeys = parseTokenKeys(TOKEN_KEYS)!;
const OAUTH_PORTAL = 515_004;
const SMALL = { site_pages: 40, landing_pages: 10, blog_posts: 120, blog_authors: 5, blog_tags: 10, hubdb_tables: 2, hubdb_rows: 40, url_redirects: 20 };
const T = {
  main: `pat-na1-${randomUUID()}`,
  revoked: `pat-na1-${randomUUID()}`,
  bogus: `pat-na1-${randomUUID()}`,
  inProcess: `pat-eu1-${randomUUID()}`,
};
/** Every secret this test hands out; checked as a whole and by a distinctive middle slice. */
const secrets = new Set<string>([...Object.values(T), TOKEN_KEY, TOKEN_KEYS]);
/** Secrets checked only as a whole (their middle slices are not distinctive). */
const wholeOnly = new Set<string>();
/** Everything observed: [where, text]. */
const seen: [string, string][] = [];

beforeAll(async () => {
  // OAuth access tokens live 3 s: the OAuth fetch below outlives a few and the functions refresh them.
  sys = await startLocalSystem(db.url, { env: { HUBSPOT_TOKEN_KEYS: TOKEN_KEYS }, oauth: { accessTokenTtlSeconds: 3 } });
  secrets.add(sys.workerSecret);
  secrets.add(sys.oauthApp!.clientSecret);
  wholeOnly.add(db.url);
  sys.sim.addPortal({ portalId: 515_001, token: T.main, sizes: SMALL });
  sys.sim.addPortal({ portalId: 515_002, token: T.revoked, sizes: SMALL });
  sys.sim.addPortal({ portalId: 515_003, token: T.inProcess, sizes: SMALL });
  sys.sim.addPortal({ portalId: OAUTH_PORTAL, token: `pat-na1-${randomUUID()}`, sizes: { ...SMALL, blog_posts: 1_500 } });
}, 120_000);
afterAll(async () => {
  await sys?.stop();
});

async function record(where: string, res: Response): Promise<{ status: number; body: any }> {
  const text = await res.text();
  seen.push([where, `${res.status} ${JSON.stringify([...res.headers])} ${text}`]);
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body };
}

async function userToken(userId: string, opts?: { expiresInSeconds?: number }): Promise<string> {
  const token = await sys.keys.signUserToken(userId, opts);
  secrets.add(token);
  secrets.add(token.split('.')[2]!); // the signature alone
  return token;
}

async function orchestrator(token: string | null, body?: unknown, query = '', authHeader?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (authHeader !== undefined) headers.authorization = authHeader;
  else if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${sys.functions.functionUrl('orchestrator')}${query}`, {
    method: body == null ? 'GET' : 'POST',
    headers,
    body: body == null ? undefined : JSON.stringify(body),
  });
  return record(`orchestrator ${JSON.stringify(body ?? query).slice(0, 80)}`, res);
}

async function worker(authorization?: string) {
  const res = await fetch(sys.functions.functionUrl('worker'), {
    method: 'POST',
    headers: authorization === undefined ? { Authorization: `Bearer ${sys.workerSecret}` } : { Authorization: authorization },
    body: '{}',
  });
  return record('worker', res);
}

async function untilFinished(runId: string) {
  return waitFor(async () => {
    await worker();
    const [run] = await db.sql`select status, finished_at from public.runs where id = ${runId}`;
    return run?.finished_at ? (run.status as string) : null;
  }, { timeoutMs: 90_000, intervalMs: 200, what: `run ${runId} to finish` });
}

/**
 * Adds every OAuth token the simulator issued (the install's, and every access token a refresh
 * produced in between) to the secrets, and checks the portal's stored tokens are among them
 * (opened with the functions' key, which the test holds).
 */
async function addOAuthTokens(portalId: string): Promise<number> {
  const issued = sys.sim.issuedOAuthTokens();
  for (const t of issued) secrets.add(t);
  const [c] = await db.sql`select c.access_token_enc, c.refresh_token_enc, p.owner_id from private.portal_credentials c
    join public.portals p on p.id = c.portal_id where c.portal_id = ${portalId}`;
  const place = { ownerId: c!.owner_id as string, hubspotPortalId: OAUTH_PORTAL };
  for (const [field, sealed] of [['access', c!.access_token_enc], ['refresh', c!.refresh_token_enc]] as const) {
    if (sealed) expect(issued).toContain(await openStoredToken(tokenKeys, sealed as string, field, place));
  }
  return issued.length;
}

/** The credentials table as a dump would show it. */
async function credentialRows(): Promise<[string, string][]> {
  const rows = await db.sql`select portal_id::text, row_to_json(c)::text as row from private.portal_credentials c`;
  return rows.map((r) => [`credentials row ${r.portal_id}`, r.row as string]);
}

/** Returns `[where, secret]` for every observed text that contains a secret (or 16 characters from its middle). */
function leaks(texts: readonly [string, string][]): string[] {
  const needles: [string, string][] = [...wholeOnly].map((s): [string, string] => [s, s]);
  for (const s of secrets) {
    needles.push([s, s]);
    if (s.length >= 32) needles.push([s, s.slice(Math.floor(s.length / 2) - 8, Math.floor(s.length / 2) + 8)]);
  }
  const found: string[] = [];
  for (const [where, text] of texts) {
    for (const [secret, needle] of needles) if (text.includes(needle)) found.push(`${where}: contains ${secret === needle ? 'secret' : 'a slice of secret'} ${secret.slice(0, 12)}…`);
    if (/PRIVATE KEY|"d"\s*:\s*"[A-Za-z0-9_-]{20,}"/.test(text)) found.push(`${where}: private key material`);
  }
  return found;
}

describe('secrets never leak', () => {
  it('through logs, responses, job errors, notifications or exports of an end-to-end run', async () => {
    const userId = await createUser(db.sql);
    const otherId = await createUser(db.sql);
    const token = await userToken(userId);

    // Connect two portals; a bogus token is refused without being echoed.
    const main = await orchestrator(token, { action: 'connect_portal', name: 'Main', accessToken: T.main });
    expect(main.status).toBe(201);
    const second = await orchestrator(token, { action: 'connect_portal', name: 'Soon revoked', accessToken: T.revoked });
    expect(second.status).toBe(201);
    expect((await orchestrator(token, { action: 'connect_portal', name: 'Bogus', accessToken: T.bogus })).status).toBe(400);
    expect((await orchestrator(token, { action: 'connect_portal', name: 'Spaces', accessToken: `${T.bogus} x` })).status).toBe(400);
    expect((await orchestrator(token, { action: 'connect_portal', name: 'Huge', accessToken: T.bogus.repeat(200) })).status).toBe(400);

    // Fetch everything under HubSpot faults (5xx, 429, dropped sockets): errors get logged and retried.
    sys.sim.setFaults({ errorRate: 0.15, forced429Rate: 0.05, dropRate: 0.05, seed: 7 });
    const fetchRun = await orchestrator(token, { portalId: main.body.portalId });
    expect(fetchRun.status).toBe(201);
    expect(await untilFinished(fetchRun.body.runId)).toMatch(/completed|partially_failed|failed/);
    const injected = sys.sim.stats().errorsInjected;
    expect(injected).toBeGreaterThan(0);
    sys.sim.clearFaults();
    expect((await orchestrator(token, null, `?runId=${fetchRun.body.runId}`)).status).toBe(200);

    // Export two types.
    const exportRun = await orchestrator(token, { portalId: main.body.portalId, kind: 'export', contentTypes: ['site_pages', 'blog_posts'] });
    expect(exportRun.status).toBe(201);
    expect(await untilFinished(exportRun.body.runId)).toBe('completed');

    // A token revoked after it was connected: every job of a run fails for good, the owner is told why.
    // (The run is created directly: through the orchestrator the woken worker could finish before the revocation.)
    sys.sim.revokeToken(T.revoked);
    const doomed = await createRun(db.sql, { portalId: second.body.portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages', 'blog_tags'] });
    expect(doomed.runId).not.toBeNull();
    expect(await untilFinished(doomed.runId!)).toBe('failed');
    const [note] = await db.sql`select message from public.notifications where run_id = ${doomed.runId}`;
    expect(note!.message).toMatch(/reconnect/i);
    // ...and creating another run with it is refused up front.
    const refused = await orchestrator(token, { portalId: second.body.portalId, contentTypes: ['blog_posts'] });
    expect(refused.status).toBe(424);

    // An OAuth install through the orchestrator; its fetch outlives several access tokens (refreshed by the
    // functions); then the app is uninstalled: the portal is disconnected and the next run fails with one notification.
    const installed = await installThroughSimulator({ sim: sys.sim, orchestratorUrl: sys.functions.functionUrl('orchestrator'), userJwt: token, hubspotPortalId: OAUTH_PORTAL });
    await record('install complete', new Response(JSON.stringify(installed.body), { status: installed.status }));
    expect(installed.status).toBe(201);
    const oauthPortalId = installed.body.portalId as string;
    expect(await addOAuthTokens(oauthPortalId)).toBe(2); // the install's access and refresh token
    sys.sim.setFaults({ slowMs: 120 });
    const oauthRun = await orchestrator(token, { portalId: oauthPortalId, contentTypes: ['blog_posts', 'site_pages'] });
    expect(oauthRun.status).toBe(201);
    expect(await untilFinished(oauthRun.body.runId)).toBe('completed');
    sys.sim.clearFaults();
    expect(sys.sim.stats().tokenRefreshes).toBeGreaterThan(0);
    // Every access token a refresh issued, not only the one stored last, is searched for.
    expect(await addOAuthTokens(oauthPortalId)).toBe(2 + sys.sim.stats().tokenRefreshes);
    sys.sim.uninstall(OAUTH_PORTAL);
    const afterUninstall = await createRun(db.sql, { portalId: oauthPortalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_tags'] });
    expect(await untilFinished(afterUninstall.runId!)).toBe('failed');
    const [removed] = await db.sql`select message from public.notifications where run_id = ${afterUninstall.runId}`;
    expect(removed!.message).toMatch(/HubSpot access was removed: reconnect the portal/);

    // Bad credentials of every kind.
    const expired = await userToken(userId, { expiresInSeconds: -120 });
    const stranger = await createSigningKeys();
    const forged = await stranger.signUserToken(userId);
    secrets.add(forged);
    const otherToken = await userToken(otherId);
    expect((await orchestrator(expired, { portalId: main.body.portalId })).status).toBe(401);
    expect((await orchestrator(forged, { portalId: main.body.portalId })).status).toBe(401);
    expect((await orchestrator(null, { portalId: main.body.portalId })).status).toBe(401);
    expect((await orchestrator(null, { portalId: main.body.portalId }, '', `Basic ${Buffer.from(`user:${T.main}`).toString('base64')}`)).status).toBe(401);
    expect((await orchestrator(null, { portalId: main.body.portalId }, '', `Bearer ${T.main}`)).status).toBe(401);
    expect((await orchestrator(null, { portalId: main.body.portalId }, '', `Bearer ${sys.workerSecret}`)).status).toBe(401);
    expect((await orchestrator(otherToken, null, `?runId=${fetchRun.body.runId}`)).status).toBe(404);
    expect((await orchestrator(otherToken, { action: 'stop', runId: fetchRun.body.runId })).status).toBe(404);
    expect((await worker(`Bearer ${token}`)).status).toBe(401);
    expect((await worker(`Bearer ${sys.workerSecret}x`)).status).toBe(401);
    expect((await worker(`Bearer ${T.main}`)).status).toBe(401);
    expect((await worker('')).status).toBe(401);

    // Wait for background work (the orchestrator's worker wake-ups) to settle before reading logs.
    await waitFor(async () => {
      const [r] = await db.sql`select count(*)::int as n from public.jobs where status in ('pending', 'running')`;
      return r!.n === 0;
    }, { timeoutMs: 60_000, what: 'the queue to drain' });

    // Collect: function output, database rows that reach users, export files.
    for (const [fn, lines] of sys.functions.output) seen.push(...lines.map((l, i): [string, string] => [`${fn} log line ${i}`, l]));
    expect(sys.functions.output.get('worker')!.length).toBeGreaterThan(0);
    expect(sys.functions.output.get('orchestrator')!.length).toBeGreaterThan(0);
    const rows = await db.sql`select 'job ' || id as where, coalesce(last_error, '') || ' ' || coalesce(result::text, '') || ' ' || coalesce(checkpoint::text, '') as text from public.jobs
      union all select 'run ' || id, r::text from public.runs r
      union all select 'notification ' || id, message from public.notifications
      union all select 'portal ' || id, p::text from public.portals p`;
    for (const r of rows) seen.push([r.where as string, r.text as string]);
    expect(rows.some((r) => /HubSpot rejected the access token/.test(r.text as string))).toBe(true);
    for (const file of await listFiles(sys.exportDir)) seen.push([`export ${file}`, await readFile(file, 'utf8')]);
    // A dump of the credentials table holds no token either: every row is sealed, none has the legacy plaintext column set.
    seen.push(...(await credentialRows()));
    expect(await db.sql`select portal_id from private.portal_credentials where access_token is not null or access_token_enc is null`).toHaveLength(0);

    console.log(`secrets-leak: scanned ${seen.length} texts (${sys.functions.output.get('worker')!.length} worker and ` +
      `${sys.functions.output.get('orchestrator')!.length} orchestrator log lines) for ${secrets.size + wholeOnly.size} secrets; ${injected} HubSpot faults injected`);
    expect(leaks(seen)).toEqual([]);
    // The detector itself works.
    expect(leaks([['probe', `x ${T.main.slice(3, 30)} y`]])).toHaveLength(1);
  }, 180_000);

  it('through the in-process worker and orchestrator loggers, even on failures', async () => {
    const lines: string[] = [];
    const log = createLogger({ write: (l) => lines.push(l) }); // no secrets registered: nothing to scrub with
    const userId = await createUser(db.sql);
    const portalId = await connectPrivateAppPortal(db.sql, tokenKeys, { ownerId: userId, hubspotPortalId: 515_003, name: 'In-process', accessToken: T.inProcess });

    // Worker: HubSpot faults, then the token is revoked mid-run.
    await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_posts', 'site_pages', 'hubdb_rows'] });
    sys.sim.setFaults({ errorRate: 0.3, dropRate: 0.1, forced429Rate: 0.1, seed: 11 });
    const rt = { ...(await testWorkerRuntime(db.sql, sys.sim.url, { lanes: 2 }, log)), tokenKeys }; // the keys of this file's functions
    await runWorkerInvocation(rt, 'leak-worker-1');
    sys.sim.clearFaults();
    await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_tags', 'url_redirects'] });
    sys.sim.revokeToken(T.inProcess);
    await runWorkerInvocation(rt, 'leak-worker-2');
    expect(lines.some((l) => l.includes('job_failed'))).toBe(true);

    // Orchestrator: revoked token on create, bad tokens on connect, bad JWTs.
    const keys = await createSigningKeys();
    const handler = createOrchestratorHandler({
      sql: db.sql,
      log,
      maxBodyBytes: 64 * 1024,
      verifyUser: createUserVerifier({ jwks: keys.jwks }),
      ...hubspotDeps({ sql: db.sql, basePath: sys.sim.url, rateLimit: { maxPer10s: 190 }, tokenKeys, oauthApp: null, client: { maxTransientRetries: 0 } }),
      wakeWorker: () => {},
    });
    const jwt = await keys.signUserToken(userId);
    secrets.add(jwt);
    const call = async (body: unknown, auth = `Bearer ${jwt}`) => {
      const res = await handler(new Request('http://127.0.0.1/functions/v1/orchestrator', { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) }));
      return record('in-process orchestrator', res);
    };
    expect((await call({ portalId, contentTypes: ['landing_pages'] })).status).toBe(424);
    expect((await call({ action: 'connect_portal', name: 'x', accessToken: T.bogus })).status).toBe(400);
    expect((await call({ action: 'connect_portal', name: 'x', accessToken: T.inProcess })).status).toBe(400);
    sys.sim.failNext(1, 'drop');
    expect((await call({ action: 'connect_portal', name: 'x', accessToken: T.main })).status).toBe(502);
    expect((await call({ portalId }, `Bearer ${jwt.slice(0, -4)}`)).status).toBe(401);

    seen.push(...lines.map((l, i): [string, string] => [`in-process log line ${i}`, l]));
    const [errs] = await db.sql`select string_agg(coalesce(last_error, ''), ' | ') as text from public.jobs where portal_id = ${portalId}`;
    seen.push(['in-process job errors', (errs!.text as string) ?? '']);
    seen.push(...(await credentialRows()));
    expect(leaks(seen)).toEqual([]);
  }, 120_000);
});

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listFiles(p)));
    else out.push(p);
  }
  return out;
}
