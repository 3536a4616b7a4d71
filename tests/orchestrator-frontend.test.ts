// What a frontend needs from the orchestrator, called directly against a real
// database and the HubSpot simulator: list endpoints with keyset pagination,
// duplicate run ids, export downloads (owner only), CORS for supabase-js,
// JSON-only bodies, name validation, operator stats, the per-user write limit
// under concurrent requests, and connect_portal's share of the HubSpot budget.
import { corsHeaders as supabaseJsCors } from '@supabase/supabase-js/cors';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localExportFiles, storageExportFiles, type ExportFiles } from '../functions/orchestrator/export-files.ts';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { createSigningKeys, type SigningKeys } from '../local/supabase.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUserVerifier } from '../shared/auth.ts';
import type { Sql } from '../shared/db.ts';
import { silentLogger } from '../shared/log.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { createUser, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const BASE = 'http://127.0.0.1/functions/v1/orchestrator';
let sim: HubSpotSimulator;
let keys: SigningKeys;
let exportDir: string;
let sql: Sql;

function makeHandler(exportFiles?: ExportFiles) {
  return createOrchestratorHandler({
    sql,
    log: silentLogger,
    maxBodyBytes: 64 * 1024,
    verifyUser: createUserVerifier({ jwks: keys.jwks }),
    ...hubspotDeps({ sql, basePath: sim.url, rateLimit: { maxPer10s: 190 }, tokenKeys: testTokenKeys, oauthApp: null }),
    wakeWorker: () => {},
    exportFiles,
  });
}
let handler: (req: Request) => Promise<Response>;

interface Actor {
  userId: string;
  token: string;
  portalId: string;
}
let alice: Actor;
let bob: Actor;

async function actor(hubspotPortalId: number, token: string): Promise<Actor> {
  const userId = await createUser(db.sql);
  sim.addPortal({ portalId: hubspotPortalId, token, sizes: { site_pages: 3, blog_posts: 2, blog_tags: 1, url_redirects: 2 } });
  const portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: userId, hubspotPortalId, name: `Portal ${hubspotPortalId}`, accessToken: token });
  return { userId, token: await keys.signUserToken(userId), portalId };
}

function get(who: Actor | null, pathAndQuery: string): Request {
  return new Request(`${BASE}${pathAndQuery}`, { headers: who ? { Authorization: `Bearer ${who.token}` } : {} });
}
function post(who: Actor, body: unknown, contentType = 'application/json'): Request {
  return new Request(BASE, { method: 'POST', headers: { Authorization: `Bearer ${who.token}`, 'Content-Type': contentType }, body: JSON.stringify(body) });
}
async function call(req: Request): Promise<{ status: number; body: any; res: Response }> {
  const res = await handler(req);
  const text = await res.text();
  return { status: res.status, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text, res };
}

beforeAll(async () => {
  sql = db.connect(24);
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000 } });
  keys = await createSigningKeys();
  exportDir = await mkdtemp(path.join(tmpdir(), 'orchestrator-frontend-exports-'));
  handler = makeHandler(localExportFiles(exportDir));
  alice = await actor(7100, 'pat-frontend-alice');
  bob = await actor(7200, 'pat-frontend-bob');
}, 60_000);
afterAll(async () => {
  await sim?.close();
});

/** A completed export job of `who`'s with a real file in the export directory, as the worker leaves it. */
async function completedExport(who: Actor, csv: string, contentType: 'url_redirects' | 'blog_tags' = 'url_redirects'): Promise<{ runId: string; jobId: string; file: string }> {
  // An export waits while a fetch of its portal and type is in flight: end the earlier tests' runs first.
  await db.sql`select public.stop_run(id) from public.runs where portal_id = ${who.portalId} and finished_at is null`;
  const { runId } = await createRun(db.sql, { portalId: who.portalId, requestedBy: who.userId, kind: 'export', contentTypes: [contentType] });
  const job = await claimNextJob(db.sql, 'test-worker', ['export']);
  expect(job?.runId).toBe(runId);
  const file = path.join(exportDir, who.userId, runId!, `${contentType}-${job!.fencingToken}.csv`);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, csv);
  expect(await completeJob(db.sql, job!, { rows: csv.split('\r\n').length - 2, bytes: Buffer.byteLength(csv), location: file, url: null })).toBe(true);
  return { runId: runId!, jobId: job!.id, file };
}

describe('list endpoints', () => {
  it('GET /portals lists only the caller\'s portals', async () => {
    const a = await call(get(alice, '/portals'));
    expect(a.status).toBe(200);
    expect(a.body.portals).toEqual([{ id: alice.portalId, hubspotPortalId: 7100, name: 'Portal 7100', createdAt: expect.any(String),
      authKind: 'private_app', disconnectedAt: null, disconnectedReason: null, hubspotLimits: expect.any(Object) }]);
    const b = await call(get(bob, '/portals'));
    expect(b.body.portals.map((p: { id: string }) => p.id)).toEqual([bob.portalId]);
    expect((await call(get(null, '/portals'))).status).toBe(401);
  });

  it('GET /runs pages newest first with a keyset cursor; items done/total; other users\' runs never appear', async () => {
    const created: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { runId } = await createRun(db.sql, { portalId: alice.portalId, requestedBy: alice.userId, kind: 'fetch', contentTypes: ['site_pages', 'blog_posts'], totals: [10, 5] });
      created.push(runId!);
      await db.sql`update public.jobs set status = 'stopped', finished_at = now() where run_id = ${runId}`; // free the types for the next run
      await db.sql`update public.runs set status = 'stopped', finished_at = now() where id = ${runId}`;
    }
    // Same created_at for two runs: the id breaks the tie, nothing is skipped or repeated.
    await db.sql`update public.runs set created_at = (select created_at from public.runs where id = ${created[3]!}) where id = ${created[4]!}`;
    await db.sql`update public.jobs set progress_done = 4 where run_id = ${created[6]!} and content_type = 'site_pages'`;
    await createRun(db.sql, { portalId: bob.portalId, requestedBy: bob.userId, kind: 'fetch', contentTypes: ['site_pages'] });

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await call(get(alice, `/runs?limit=3${cursor ? `&cursor=${cursor}` : ''}`));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.runs.length).toBeLessThanOrEqual(3);
      seen.push(...r.body.runs.map((x: { id: string }) => x.id));
      cursor = r.body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    const expected = await db.sql`select id from public.runs where owner_id = ${alice.userId} order by created_at desc, id desc`;
    expect(seen).toEqual(expected.map((r) => r.id));
    expect(seen).toHaveLength(7);
    expect(pages).toBe(3);

    const first = await call(get(alice, '/runs?limit=1'));
    expect(first.body.runs[0]).toMatchObject({ id: created[6], itemsDone: 4, itemsTotal: 15, kind: 'fetch', status: 'stopped' });
    const bobs = await call(get(bob, '/runs'));
    expect(bobs.body.runs).toHaveLength(1);
    expect(bobs.body.runs[0].itemsTotal).toBeNull(); // a total that was never counted is unknown, not 0
    expect((await call(get(bob, `/runs?portalId=${alice.portalId}`))).body.runs).toEqual([]);
    expect((await call(get(alice, `/runs?portalId=${alice.portalId}&kind=export`))).body.runs).toEqual([]);
  });

  it('400 INVALID_QUERY for a bad cursor, limit or portal id; 404 for unknown paths', async () => {
    const feb30 = Buffer.from('2026-02-30T00:00:00.000000Z|11111111-1111-4111-8111-111111111111').toString('base64url');
    for (const q of ['?cursor=nope', `?cursor=${feb30}`, '?limit=0', '?limit=101', '?limit=x', '?portalId=1', '?kind=delete']) {
      const r = await call(get(alice, `/runs${q}`));
      expect(r.status, q).toBe(400);
      expect(r.body.code).toBe('INVALID_QUERY');
    }
    expect((await call(get(alice, '/nope'))).body.code).toBe('ROUTE_NOT_FOUND');
    const r = await call(new Request(`${BASE}/runs`, { method: 'POST', headers: { Authorization: `Bearer ${alice.token}`, 'Content-Type': 'application/json' }, body: '{}' }));
    expect(r.body.code).toBe('ROUTE_NOT_FOUND');
  });
});

describe('duplicates say where they live', () => {
  it('409 ALL_DUPLICATE_JOBS and a partial 201 carry {contentType → runId}', async () => {
    const first = await call(post(alice, { portalId: alice.portalId, contentTypes: ['blog_tags', 'url_redirects'] }));
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body.duplicateRunIds).toEqual({});
    const dup = await call(post(alice, { portalId: alice.portalId, contentTypes: ['url_redirects', 'blog_tags'] }));
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('ALL_DUPLICATE_JOBS');
    expect(dup.body.details.duplicateRunIds).toEqual({ url_redirects: first.body.runId, blog_tags: first.body.runId });
    const partial = await call(post(alice, { portalId: alice.portalId, contentTypes: ['blog_tags', 'blog_authors'] }));
    expect(partial.status).toBe(201);
    expect(partial.body.createdTypes).toEqual(['blog_authors']);
    expect(partial.body.duplicateTypes).toEqual(['blog_tags']);
    expect(partial.body.duplicateRunIds).toEqual({ blog_tags: first.body.runId });
  });
});

describe('export downloads', () => {
  it('streams the file to its owner only: owner 200, another user 404, no token 401', async () => {
    const csv = 'hubspot_id,hubspot_updated_at,url\r\n1,2026-01-01T00:00:00Z,/a\r\n2,2026-01-02T00:00:00Z,/b\r\n';
    const { jobId, runId } = await completedExport(bob, csv);
    const own = await handler(get(bob, `/exports/${jobId}`));
    expect(own.status).toBe(200);
    expect(own.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(own.headers.get('content-disposition')).toBe(`attachment; filename="url_redirects-${runId.slice(0, 8)}.csv"`);
    expect(own.headers.get('access-control-expose-headers')).toContain('content-disposition');
    expect(await own.text()).toBe(csv);
    const other = await call(get(alice, `/exports/${jobId}`));
    expect([other.status, other.body.code]).toEqual([404, 'EXPORT_NOT_FOUND']);
    const anonymous = await call(get(null, `/exports/${jobId}`));
    expect([anonymous.status, anonymous.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    expect((await call(get(bob, '/exports/abc'))).body.code).toBe('INVALID_PATH');
    expect((await call(get(bob, '/exports/99999999999999999999'))).status).toBe(400);
    expect((await call(get(bob, '/exports/9223372036854775807'))).body.code).toBe('EXPORT_NOT_FOUND');
  });

  it('409 before the job completes, 410 when the file is gone or outside the export directory, 501 without a store', async () => {
    const { runId } = await createRun(db.sql, { portalId: bob.portalId, requestedBy: bob.userId, kind: 'export', contentTypes: ['blog_tags'] });
    const [pending] = await db.sql`select id::text from public.jobs where run_id = ${runId}`;
    expect((await call(get(bob, `/exports/${pending!.id}`))).body.code).toBe('EXPORT_NOT_READY');
    await db.sql`update public.jobs set status = 'stopped', finished_at = now() where run_id = ${runId}`;

    const { jobId } = await completedExport(bob, 'a\r\n', 'blog_tags');
    await db.sql`update public.jobs set result = result || '{"location": "/etc/passwd"}' where id = ${jobId}`;
    expect((await call(get(bob, `/exports/${jobId}`))).body.code).toBe('EXPORT_FILE_GONE');
    await db.sql`update public.jobs set result = result || ${db.sql.json({ location: path.join(exportDir, '..', 'x.csv') })} where id = ${jobId}`;
    expect((await call(get(bob, `/exports/${jobId}`))).status).toBe(410);
    await db.sql`update public.jobs set result = result || ${db.sql.json({ location: path.join(exportDir, 'missing.csv') })} where id = ${jobId}`;
    expect((await call(get(bob, `/exports/${jobId}`))).status).toBe(410);
    const bare = makeHandler(undefined);
    const r = await bare(get(bob, `/exports/${jobId}`));
    expect([r.status, ((await r.json()) as { code: string }).code]).toEqual([501, 'DOWNLOADS_UNAVAILABLE']);
  });

  describe('deployed: Storage', () => {
    // A loopback stand-in for the two Storage endpoints this uses (same paths,
    // headers and JSON as Supabase Storage): sign with the service key, then
    // GET the signed URL.
    let storage: Server;
    let storageUrl: string;
    const SERVICE_KEY = 'service-key-for-storage-test';
    const objects = new Map<string, string>();
    const signs: { auth: string | undefined; body: string }[] = [];
    beforeAll(async () => {
      storage = createServer((req, res) => {
        const u = new URL(req.url!, 'http://storage');
        const sign = /^\/storage\/v1\/object\/sign\/([^/]+)\/(.+)$/.exec(u.pathname);
        if (req.method === 'POST' && sign) {
          let body = '';
          req.on('data', (c) => (body += c)).on('end', () => {
            signs.push({ auth: req.headers.authorization, body });
            const key = `${sign[1]}/${decodeURIComponent(sign[2]!)}`;
            if (req.headers.authorization !== `Bearer ${SERVICE_KEY}` || !objects.has(key)) {
              res.writeHead(400, { 'content-type': 'application/json' }).end('{"statusCode":"404","error":"not_found","message":"Object not found"}');
              return;
            }
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ signedURL: `/object/sign/${key}?token=t-${signs.length}` }));
          });
          return;
        }
        if (req.method === 'GET' && sign && u.searchParams.get('token')?.startsWith('t-')) {
          res.writeHead(200, { 'content-type': 'text/csv' }).end(objects.get(`${sign[1]}/${decodeURIComponent(sign[2]!)}`));
          return;
        }
        res.writeHead(404).end();
      });
      await new Promise<void>((r) => storage.listen(0, '127.0.0.1', r));
      storageUrl = `http://127.0.0.1:${(storage.address() as { port: number }).port}`;
    });
    afterAll(() => new Promise<void>((r) => storage.close(() => r())));

    it('GET ?runId= signs a fresh URL for every call, and the download route streams from Storage', async () => {
      const h = makeHandler(storageExportFiles({ supabaseUrl: storageUrl, serviceKey: SERVICE_KEY, expiresInSeconds: 600 }));
      const { runId, jobId } = await completedExport(alice, 'x\r\n1\r\n');
      const location = `exports/${alice.userId}/${runId}/url_redirects-1.csv`;
      objects.set(location, 'x\r\n1\r\n');
      await db.sql`update public.jobs set result = result || ${db.sql.json({ location, url: 'https://old.example/expired' })} where id = ${jobId}`;
      const urls: string[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await h(get(alice, `?runId=${runId}`));
        const body = (await res.json()) as { jobs: { result: { url: string; urlExpiresAt: string } }[] };
        urls.push(body.jobs[0]!.result.url);
        expect(Date.parse(body.jobs[0]!.result.urlExpiresAt) - Date.now()).toBeGreaterThan(500_000);
      }
      expect(urls[0]).toMatch(new RegExp(`^${storageUrl}/storage/v1/object/sign/exports/.+\\?token=t-\\d+$`));
      expect(urls[1]).not.toBe(urls[0]);
      expect(signs.at(-1)).toEqual({ auth: `Bearer ${SERVICE_KEY}`, body: '{"expiresIn":600}' });
      expect(await (await fetch(urls[1]!)).text()).toBe('x\r\n1\r\n');
      const dl = await h(get(alice, `/exports/${jobId}`));
      expect([dl.status, await dl.text()]).toEqual([200, 'x\r\n1\r\n']);
      expect((await h(get(bob, `/exports/${jobId}`))).status).toBe(404);
      objects.delete(location);
      expect((await h(get(alice, `/exports/${jobId}`))).status).toBe(410);
    });
  });
});

describe('CORS and media types', () => {
  it('a preflight asking for x-region and traceparent (and everything supabase-js sends) is satisfied', async () => {
    const sdkHeaders = supabaseJsCors['Access-Control-Allow-Headers']!.split(',').map((h) => h.trim());
    const asked = [...sdkHeaders, 'x-region', 'traceparent', 'x-custom-future-header'];
    const res = await handler(new Request(BASE, { method: 'OPTIONS', headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked.join(', ') } }));
    expect(res.status).toBe(204);
    const allowed = res.headers.get('access-control-allow-headers')!.split(',').map((h) => h.trim());
    for (const h of asked) expect(allowed, h).toContain(h);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('GET');
    // Without a request list, the fixed list already covers supabase-js and x-region.
    const plain = await handler(new Request(BASE, { method: 'OPTIONS' }));
    for (const h of [...sdkHeaders, 'x-region']) expect(plain.headers.get('access-control-allow-headers'), h).toContain(h);
    // Garbage in the request list is not reflected.
    const bad = await handler(new Request(BASE, { method: 'OPTIONS', headers: { 'Access-Control-Request-Headers': 'x-ok, bad header, a\tb' } }));
    expect(bad.headers.get('access-control-allow-headers')).toContain('x-ok');
    expect(bad.headers.get('access-control-allow-headers')).not.toContain('bad header');
  });

  it('415 UNSUPPORTED_MEDIA_TYPE for POST bodies that are not application/json, nothing written', async () => {
    const [before] = await db.sql`select count(*)::int as n from public.runs`;
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']) {
      const r = await call(post(alice, { portalId: alice.portalId, contentTypes: ['hubdb_tables'] }, ct));
      expect(r.status, ct).toBe(415);
      expect(r.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    expect((await call(post(alice, { action: 'stop', runId: crypto.randomUUID() }, 'Application/JSON; charset=utf-8'))).status).toBe(404);
    const [after] = await db.sql`select count(*)::int as n from public.runs`;
    expect(after!.n).toBe(before!.n);
  });
});

describe('portal names', () => {
  it('are stored NFC-normalised and trimmed; control, bidi-override and lone-surrogate names are refused naming the field', async () => {
    sim.addPortal({ portalId: 7300, token: 'pat-frontend-names' });
    const refused = ['a\u0000b', 'tab\there', 'new\nline', 'evil\u202Egnp.exe', 'iso\u2066late', 'mark\u200F', 'c1\u0085', 'lone \ud800 surrogate', '\udc00', '   ', '', 'x'.repeat(201)];
    for (const name of refused) {
      const r = await call(post(alice, { action: 'connect_portal', name, accessToken: 'pat-frontend-names' }));
      expect(r.status, JSON.stringify(name)).toBe(400);
      expect(r.body.code).toBe('INVALID_BODY');
      expect(r.body.details.fieldErrors.map((f: { path: string }) => f.path)).toEqual(['name']);
    }
    expect(await db.sql`select 1 from public.portals where hubspot_portal_id = 7300`).toHaveLength(0);
    const ok = await call(post(alice, { action: 'connect_portal', name: '  Cafe\u0301 👩‍💻 עברית  ', accessToken: 'pat-frontend-names' }));
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.name).toBe('Caf\u00e9 👩‍💻 עברית');
    const [row] = await db.sql`select name from public.portals where id = ${ok.body.portalId}`;
    expect(row!.name).toBe(ok.body.name);
  });
});

describe("connect_portal draws on the portal's shared HubSpot budget", () => {
  it('a first connection records its request once HubSpot names the portal; a reconnect waits for a grant first', async () => {
    sim.addPortal({ portalId: 7400, token: 'pat-frontend-budget' });
    const grants = async () => {
      const [b] = await db.sql`select coalesce(cardinality(granted_at), 0) as n from private.hubspot_request_budgets where hubspot_portal_id = 7400`;
      return Number(b?.n ?? 0);
    };
    const before = sim.stats().requests;
    expect((await call(post(bob, { action: 'connect_portal', name: 'Budget', accessToken: 'pat-frontend-budget' }))).status).toBe(201);
    expect(sim.stats().requests - before).toBe(1);
    expect(await grants()).toBe(1);
    expect((await call(post(bob, { action: 'connect_portal', name: 'Budget again', accessToken: 'pat-frontend-budget' }))).status).toBe(201);
    expect(await grants()).toBe(2);
    // The reconnect's grant came from acquire_hubspot_requests: a full budget makes it wait (here: longer than we let it).
    await db.sql`update private.hubspot_request_budgets set granted_at = array(select clock_timestamp() from generate_series(1, 400)) where hubspot_portal_id = 7400`;
    const slow = handler(post(bob, { action: 'connect_portal', name: 'Budget thrice', accessToken: 'pat-frontend-budget' }));
    const raced = await Promise.race([slow.then(() => 'answered'), new Promise((r) => setTimeout(() => r('waiting'), 1500))]);
    expect(raced).toBe('waiting');
    await db.sql`update private.hubspot_request_budgets set granted_at = '{}' where hubspot_portal_id = 7400`;
    expect((await slow).status).toBe(201);
  });
});

describe('operator stats', () => {
  it('GET /stats answers queue_stats to operators only (app_metadata.queue_operator, checked in the database)', async () => {
    const r = await call(get(alice, '/stats'));
    expect([r.status, r.body.code]).toEqual([403, 'NOT_AN_OPERATOR']);
    await db.sql`update auth.users set raw_app_meta_data = coalesce(raw_app_meta_data, '{}') || '{"queue_operator": true}' where id = ${alice.userId}`;
    const ok = await call(get(alice, '/stats'));
    expect(ok.status).toBe(200);
    expect(ok.body.stats).toHaveProperty('oldest_pending_age_seconds');
    await db.sql`update auth.users set raw_app_meta_data = raw_app_meta_data || '{"queue_operator": "yes"}' where id = ${alice.userId}`;
    expect((await call(get(alice, '/stats'))).status).toBe(403);
  });
});

describe('per-user write limit', () => {
  it('40 concurrent writes with a limit of 6: exactly 6 pass, 34 get 429 RATE_LIMITED with Retry-After; other users unaffected; stop is never limited', async () => {
    await db.sql`update private.write_limit_settings set max_writes = 6, window_seconds = 60`;
    const carol = await actor(7500, 'pat-frontend-carol');
    const { runId } = await createRun(db.sql, { portalId: carol.portalId, requestedBy: carol.userId, kind: 'export', contentTypes: ['site_pages'] });
    // Creates for a portal that is not hers: each counted before it is looked at (404 when let through).
    const results = await Promise.all(Array.from({ length: 40 }, () => call(post(carol, { portalId: crypto.randomUUID() }))));
    const limited = results.filter((r) => r.status === 429);
    expect(results.filter((r) => r.status === 404)).toHaveLength(6);
    expect(limited).toHaveLength(34);
    for (const r of limited) {
      expect(r.body.code).toBe('RATE_LIMITED');
      const retry = Number(r.res.headers.get('retry-after'));
      expect(retry).toBeGreaterThanOrEqual(1);
      expect(retry).toBeLessThanOrEqual(60);
      expect(r.body.details.retryAfterSeconds).toBe(retry);
      expect(r.res.headers.get('access-control-expose-headers')).toContain('retry-after');
    }
    // Reads are never limited; another user's writes are not; a user at the limit can still stop a run (not counted).
    expect((await call(get(carol, `?runId=${runId}`))).status).toBe(200);
    expect((await call(post(bob, { portalId: crypto.randomUUID() }))).status).toBe(404);
    const stops = await Promise.all(Array.from({ length: 10 }, () => call(post(carol, { action: 'stop', runId }))));
    expect(stops.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(stops.filter((r) => r.body.stopped)).toHaveLength(1);
    expect((await call(post(carol, { portalId: carol.portalId }))).status).toBe(429);
    // Back-dating the log frees the window.
    await db.sql`update private.user_write_log set written_at = array(select t - interval '61 seconds' from unnest(written_at) t) where user_id = ${carol.userId}`;
    expect((await call(post(carol, { portalId: crypto.randomUUID() }))).status).toBe(404);
    await db.sql`update private.write_limit_settings set max_writes = 60, window_seconds = 60`;
  });
});
