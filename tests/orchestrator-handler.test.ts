// The orchestrator handler, called directly: every error code, each with
// "nothing was written" checked, and the success paths.
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { orchestratorHarness, writeCounts, type OrchestratorHarness } from './support/orchestrator-harness.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let h: OrchestratorHarness;
let owner: string;
let ownerToken: string;
let portalId: string;
let stranger: string;
let strangerToken: string;

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  sim.addPortal({ portalId: 5100, token: 'pat-handler-ok' });
  sim.addPortal({ portalId: 5200, token: 'pat-handler-revoked' });
  h = await orchestratorHarness(db.sql, sim.url, { maxBodyBytes: 4096 });
  owner = await createUser(db.sql);
  stranger = await createUser(db.sql);
  ownerToken = await h.keys.signUserToken(owner);
  strangerToken = await h.keys.signUserToken(stranger);
  portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: owner, hubspotPortalId: 5100, name: 'Mine', accessToken: 'pat-handler-ok' });
});
afterAll(async () => {
  await sim?.close();
});

/** Calls the handler and asserts the status, code and that nothing was written. */
async function expectRejected(req: Request, status: number, code: string) {
  const before = await writeCounts(db.sql);
  const res = await h.handler(req);
  const body = (await res.json()) as { code: string; message: string };
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(body.code).toBe(code);
  expect(typeof body.message).toBe('string');
  expect(await writeCounts(db.sql)).toEqual(before);
  return body;
}

describe('orchestrator handler: errors change nothing', () => {
  it('405 for other methods, 204 with CORS for preflight', async () => {
    await expectRejected(h.request('PUT', { token: ownerToken, body: { portalId } }), 405, 'METHOD_NOT_ALLOWED');
    await expectRejected(h.request('DELETE', { token: ownerToken }), 405, 'METHOD_NOT_ALLOWED');
    const pre = await h.handler(h.request('OPTIONS', { headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST' } }));
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-headers')).toContain('authorization');
  });

  it('401 UNAUTHENTICATED for missing, malformed, foreign, wrong-audience and alg:none tokens; 401 TOKEN_EXPIRED for an expired one', async () => {
    const foreign = await (await import('../local/supabase.ts')).createSigningKeys();
    const expired = await expectRejected(h.request('POST', { token: await h.keys.signUserToken(owner, { expiresInSeconds: -60 }), body: { portalId } }), 401, 'TOKEN_EXPIRED');
    expect(expired.message).toMatch(/expired/);
    // Expired and forged-but-expired alike: the claims are checked before the signature, and neither says more.
    const forgedExpired = await foreign.signUserToken(owner, { expiresInSeconds: -60 });
    await expectRejected(h.request('GET', { token: forgedExpired, query: `?runId=${crypto.randomUUID()}` }), 401, 'TOKEN_EXPIRED');
    const tokens: (string | null)[] = [
      null,
      'not-a-jwt',
      await foreign.signUserToken(owner),
      await new SignJWT({ role: 'authenticated' }).setProtectedHeader({ alg: 'HS256' }).setSubject(owner).setAudience('other').setExpirationTime('1h')
        .sign(new TextEncoder().encode('legacy-test-secret-0123456789abcdef')),
      `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: owner, role: 'authenticated', aud: 'authenticated' })).toString('base64url')}.`,
      await h.keys.signUserToken(owner, { extraClaims: { role: 'anon' } }),
    ];
    for (const token of tokens) await expectRejected(h.request('POST', { token, body: { portalId } }), 401, 'UNAUTHENTICATED');
  });

  it('accepts a legacy HS256 token signed with the project secret', async () => {
    const legacy = await new SignJWT({ role: 'authenticated' }).setProtectedHeader({ alg: 'HS256' }).setSubject(owner).setAudience('authenticated').setExpirationTime('1h')
      .sign(new TextEncoder().encode('legacy-test-secret-0123456789abcdef'));
    const res = await h.handler(h.request('GET', { token: legacy, query: `?runId=${crypto.randomUUID()}` }));
    expect(res.status).toBe(404);
  });

  it('400 INVALID_BODY with field errors for bad bodies', async () => {
    const bad: unknown[] = [
      {},
      { portalId: 'nope' },
      { portalId, contentTypes: [] },
      { portalId, contentTypes: ['site_pages', 'site_pages'] },
      { portalId, contentTypes: ['videos'] },
      { portalId, kind: 'delete' },
      { portalId, extra: true },
      [portalId],
      'string',
      { action: 'stop' },
      { action: 'connect_portal', name: '', accessToken: 'x' },
    ];
    for (const body of bad) {
      const err = (await expectRejected(h.request('POST', { token: ownerToken, body }), 400, 'INVALID_BODY')) as { details?: { fieldErrors?: unknown[] } };
      if (body && typeof body === 'object' && !Array.isArray(body)) expect(err.details?.fieldErrors?.length).toBeGreaterThan(0);
    }
    await expectRejected(h.request('POST', { token: ownerToken, rawBody: '{"portalId":' }), 400, 'INVALID_BODY');
    await expectRejected(h.request('POST', { token: ownerToken, rawBody: '' }), 400, 'INVALID_BODY');
    await expectRejected(h.request('GET', { token: ownerToken, query: '?runId=123' }), 400, 'INVALID_QUERY');
  });

  it('413 for oversized bodies', async () => {
    await expectRejected(h.request('POST', { token: ownerToken, rawBody: JSON.stringify({ portalId, pad: 'x'.repeat(10_000) }) }), 413, 'PAYLOAD_TOO_LARGE');
  });

  it("404 PORTAL_NOT_FOUND for someone else's or an unknown portal (decided by RLS)", async () => {
    await expectRejected(h.request('POST', { token: strangerToken, body: { portalId } }), 404, 'PORTAL_NOT_FOUND');
    await expectRejected(h.request('POST', { token: ownerToken, body: { portalId: crypto.randomUUID() } }), 404, 'PORTAL_NOT_FOUND');
  });

  it('424 HUBSPOT_AUTH_FAILED when HubSpot rejects the stored token, nothing created', async () => {
    const revokedPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: owner, hubspotPortalId: 5200, name: 'Revoked', accessToken: 'pat-handler-revoked' });
    sim.revokeToken('pat-handler-revoked');
    const body = await expectRejected(h.request('POST', { token: ownerToken, body: { portalId: revokedPortal } }), 424, 'HUBSPOT_AUTH_FAILED');
    expect(body.message).toMatch(/reconnect/i);
    expect(JSON.stringify(body)).not.toContain('pat-handler-revoked');
  });

  it('400 HUBSPOT_TOKEN_REJECTED when connecting with a token HubSpot rejects, nothing stored', async () => {
    const body = await expectRejected(h.request('POST', { token: ownerToken, body: { action: 'connect_portal', name: 'X', accessToken: 'pat-unknown-token' } }), 400, 'HUBSPOT_TOKEN_REJECTED');
    expect(JSON.stringify(body)).not.toContain('pat-unknown-token');
  });
});

describe('orchestrator handler: success paths', () => {
  it('creates a run with totals from HubSpot, wakes the worker, then 409s the duplicate', async () => {
    const wakes = h.wakes.count;
    const res = await h.handler(h.request('POST', { token: ownerToken, body: { portalId, contentTypes: ['blog_posts', 'blog_tags'] } }));
    expect(res.status).toBe(201);
    const body = (await res.json()) as { runId: string; createdTypes: string[]; jobs: { contentType: string; total: number }[] };
    expect(body.createdTypes.sort()).toEqual(['blog_posts', 'blog_tags']);
    expect(body.jobs.find((j) => j.contentType === 'blog_posts')!.total).toBe(sim.items(5100, 'blog_posts').length);
    expect(h.wakes.count).toBe(wakes + 1);
    await expectRejected(h.request('POST', { token: ownerToken, body: { portalId, contentTypes: ['blog_tags', 'blog_posts'] } }), 409, 'ALL_DUPLICATE_JOBS');

    const partial = await h.handler(h.request('POST', { token: ownerToken, body: { portalId, contentTypes: ['blog_posts', 'site_pages'] } }));
    expect(partial.status).toBe(201);
    const pb = (await partial.json()) as { createdTypes: string[]; duplicateTypes: string[] };
    expect(pb.createdTypes).toEqual(['site_pages']);
    expect(pb.duplicateTypes).toEqual(['blog_posts']);

    const got = await h.handler(h.request('GET', { token: ownerToken, query: `?runId=${body.runId}` }));
    expect(got.status).toBe(200);
    const run = (await got.json()) as { run: { status: string }; jobs: { done: number; total: number }[] };
    expect(run.run.status).toBe('pending');
    expect(run.jobs).toHaveLength(2);
    await expectRejected(h.request('GET', { token: strangerToken, query: `?runId=${body.runId}` }), 404, 'RUN_NOT_FOUND');
    await expectRejected(h.request('POST', { token: strangerToken, body: { action: 'stop', runId: body.runId } }), 404, 'RUN_NOT_FOUND');

    const stop = await h.handler(h.request('POST', { token: ownerToken, body: { action: 'stop', runId: body.runId } }));
    expect(stop.status).toBe(200);
    expect(((await stop.json()) as { status: string }).status).toBe('stopped');
    const [n] = await db.sql`select kind from public.notifications where run_id = ${body.runId}`;
    expect(n!.kind).toBe('run_stopped');
  });

  it('connects a portal and never returns the token', async () => {
    sim.addPortal({ portalId: 5300, token: 'pat-handler-new' });
    const res = await h.handler(h.request('POST', { token: strangerToken, body: { action: 'connect_portal', name: 'New', accessToken: 'pat-handler-new' } }));
    expect(res.status).toBe(201);
    const text = await res.text();
    expect(text).not.toContain('pat-handler-new');
    expect(JSON.parse(text).hubspotPortalId).toBe(5300);
  });

  it('creates an export run over stored content without calling HubSpot', async () => {
    const before = sim.stats().requests;
    const res = await h.handler(h.request('POST', { token: ownerToken, body: { portalId, kind: 'export', contentTypes: ['url_redirects'] } }));
    expect(res.status).toBe(201);
    expect(sim.stats().requests).toBe(before);
  });
});
