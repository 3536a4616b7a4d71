// openapi.json and the handler cannot drift apart: the committed document is
// exactly what the zod schemas generate, and the handler's real answers (a
// real database, the HubSpot simulator, the real worker fetching and
// exporting) are each documented for their operation and status and match
// the documented schema.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { OPERATIONS, openApiDocument, type ApiOperation } from '../functions/orchestrator/api.ts';
import { localExportFiles } from '../functions/orchestrator/export-files.ts';
import { exportLinks } from '../functions/orchestrator/export-links.ts';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { createWorkerHandler } from '../functions/worker/handler.ts';
import { createSigningKeys, type SigningKeys } from '../local/supabase.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { OPENAPI_PATH, openApiText } from '../scripts/openapi.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { parseTokenKeys } from '../shared/token-crypto.ts';
import { silentLogger } from '../shared/log.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { addEdit, HubSpotItems, runApply, runPlan, type Item } from './support/publish-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const BASE = 'http://127.0.0.1/functions/v1';
const WORKER_SECRET = 'worker-secret-for-openapi-test-0123456789';
const TOKEN_KEYS = parseTokenKeys(`t1:${randomBytes(32).toString('base64')}`);
const OAUTH = { clientId: 'openapi-app', clientSecret: 'openapi-app-secret', redirectUri: 'https://app.example/hubspot/callback' };
let sim: HubSpotSimulator;
let keys: SigningKeys;
let orchestrator: (req: Request) => Promise<Response>;
let worker: (req: Request) => Promise<Response>;

interface Seen {
  op: ApiOperation;
  status: number;
  body: unknown;
  contentType: string | null;
}
const seen: Seen[] = [];

function operationOf(method: string, url: string): ApiOperation | undefined {
  const path = new URL(url).pathname.replace(/^\/functions\/v1/, '');
  return OPERATIONS.find((op) => op.method === method.toLowerCase() && new RegExp(`^${op.path.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
}

/** Calls the orchestrator and records the answer against the operation it belongs to. */
async function call(method: string, pathAndQuery: string, opts: { token?: string; body?: unknown; contentType?: string; headers?: Record<string, string> } = {}) {
  const url = `${BASE}${pathAndQuery}`;
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['Content-Type'] = opts.contentType ?? 'application/json';
  const res = await orchestrator(new Request(url, { method, headers, body: opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }));
  const text = await res.text();
  const contentType = res.headers.get('content-type');
  const body = contentType?.startsWith('application/json') ? JSON.parse(text) : text;
  const op = operationOf(method, url);
  if (!op) throw new Error(`no documented operation for ${method} ${url}`);
  seen.push({ op, status: res.status, body, contentType });
  return { status: res.status, body: body as any };
}

async function drain() {
  for (let i = 0; i < 50; i++) {
    const [row] = await db.sql`select count(*)::int as n from public.jobs where status in ('pending', 'running')`;
    if (row!.n === 0) return;
    await worker(new Request(`${BASE}/worker`, { method: 'POST', headers: { Authorization: `Bearer ${WORKER_SECRET}` }, body: '{}' }));
  }
  throw new Error('the queue did not drain');
}

beforeAll(async () => {
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000 } });
  sim.addPortal({ portalId: 8100, token: 'pat-openapi', sizes: { site_pages: 7, landing_pages: 3, blog_posts: 5, blog_authors: 2, blog_tags: 4, hubdb_tables: 2, hubdb_rows: 6, url_redirects: 3 } });
  sim.addPortal({ portalId: 8200, token: 'pat-openapi-revoked' });
  sim.addPortal({ portalId: 8300, token: 'pat-openapi-oauth' });
  sim.registerApp({ clientId: OAUTH.clientId, clientSecret: OAUTH.clientSecret, redirectUris: [OAUTH.redirectUri] });
  keys = await createSigningKeys();
  const runtime = await testWorkerRuntime(db.sql, sim.url);
  worker = createWorkerHandler({ ...runtime, tokenKeys: TOKEN_KEYS, oauthApp: { clientId: OAUTH.clientId, clientSecret: OAUTH.clientSecret }, acceptedSecrets: [WORKER_SECRET] });
  orchestrator = createOrchestratorHandler({
    sql: db.sql,
    log: silentLogger,
    maxBodyBytes: 4096,
    verifyUser: createUserVerifier({ jwks: keys.jwks }),
    ...hubspotDeps({ sql: db.sql, basePath: sim.url, rateLimit: { maxPer10s: 190 }, tokenKeys: TOKEN_KEYS, oauthApp: { clientId: OAUTH.clientId, clientSecret: OAUTH.clientSecret } }),
    oauthInstall: { ...OAUTH, authorizeUrl: `${sim.url}/oauth/authorize`, tokenBasePath: sim.url },
    wakeWorker: () => {},
    exportFiles: localExportFiles(runtime.exportDir),
    exportLinks: exportLinks(`${BASE}/orchestrator`, 'openapi-test-export-url-key'),
  });
}, 60_000);
afterAll(async () => {
  await sim?.close();
});

describe('openapi.json', () => {
  it('is exactly what the zod schemas generate (run `npx tsx scripts/openapi.ts` after changing them)', async () => {
    const committed = await readFile(OPENAPI_PATH, 'utf8');
    expect(committed).toBe(openApiText());
    const doc = JSON.parse(committed) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`)).sort()).toEqual(OPERATIONS.map((o) => `${o.method} ${o.path}`).sort());
  });

  it("documents every answer the handler gives, and every answer matches its documented schema", async () => {
    const alice = await createUser(db.sql);
    const bob = await createUser(db.sql);
    const a = await keys.signUserToken(alice);
    const b = await keys.signUserToken(bob);

    await call('OPTIONS', '/orchestrator', { headers: { 'Access-Control-Request-Headers': 'x-region, traceparent' } });
    const portal = await call('POST', '/orchestrator', { token: a, body: { action: 'connect_portal', name: 'Open API', accessToken: 'pat-openapi' } });
    expect(portal.status).toBe(201);
    const portalId = portal.body.portalId as string;
    const revoked = await call('POST', '/orchestrator', { token: a, body: { action: 'connect_portal', name: 'Revoked', accessToken: 'pat-openapi-revoked' } });
    sim.revokeToken('pat-openapi-revoked');
    await call('POST', '/orchestrator', { token: a, body: { action: 'connect_portal', name: 'Rejected', accessToken: 'pat-nobody' } });
    await call('POST', '/orchestrator', { token: a, body: { portalId: revoked.body.portalId } }); // 424
    await call('POST', '/orchestrator', { token: a, body: { action: 'connect_portal', name: 'bad\u202Ename', accessToken: 'x' } }); // 400
    await call('POST', '/orchestrator', { token: a, body: { portalId }, contentType: 'text/plain' }); // 415
    await call('POST', '/orchestrator', { token: a, body: JSON.stringify({ portalId, pad: 'x'.repeat(5000) }) }); // 413
    await call('POST', '/orchestrator', { body: { portalId } }); // 401

    // HubSpot OAuth install: start, HubSpot (the simulator) approves or denies, complete with the redirect's parameters.
    const redirectOf = async (grant: 'approve' | 'deny') => {
      const started = await call('POST', '/orchestrator', { token: a, body: { action: 'start_hubspot_install' } });
      expect(started.status).toBe(200);
      sim.queueInstall({ portalId: 8300, grant });
      return Object.fromEntries((await sim.authorize(started.body.authorizeUrl)).searchParams);
    };
    const approved = await redirectOf('approve');
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'complete_hubspot_install', ...approved } })).status).toBe(201);
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'complete_hubspot_install', ...approved } })).status).toBe(400); // replay
    const denied = await redirectOf('deny');
    const { error_description: _ignored, ...deniedBody } = denied;
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'complete_hubspot_install', ...deniedBody } })).status).toBe(403);
    await call('POST', '/orchestrator', { token: b, body: { portalId } }); // 404

    const run = await call('POST', '/orchestrator', { token: a, body: { portalId, contentTypes: ['site_pages', 'blog_posts', 'hubdb_rows'] } });
    expect(run.status).toBe(201);
    expect((await call('POST', '/orchestrator', { token: a, body: { portalId, contentTypes: ['site_pages'] } })).status).toBe(409);
    const partial = await call('POST', '/orchestrator', { token: a, body: { portalId } });
    expect(partial.body.duplicateRunIds).toEqual({ site_pages: run.body.runId, blog_posts: run.body.runId, hubdb_rows: run.body.runId });
    expect((await call('GET', `/orchestrator?runId=${run.body.runId}`, { token: a })).status).toBe(200); // in flight
    await drain();
    const fetched = await call('GET', `/orchestrator?runId=${run.body.runId}`, { token: a });
    expect(fetched.body.run.status).toBe('completed');
    expect(fetched.body.run.itemsDone).toBe(7 + 5 + 6);

    const exp = await call('POST', '/orchestrator', { token: a, body: { portalId, kind: 'export', contentTypes: ['site_pages', 'hubdb_rows'] } });
    const [exportJob] = await db.sql`select id::text from public.jobs where run_id = ${exp.body.runId} order by id limit 1`;
    expect((await call('GET', `/orchestrator/exports/${exportJob!.id}`, { token: a })).status).toBe(409);
    await drain();
    const exported = await call('GET', `/orchestrator?runId=${exp.body.runId}`, { token: a });
    expect(exported.body.jobs.every((j: { result: { rows: number } }) => j.result.rows > 0)).toBe(true);
    const csv = await call('GET', `/orchestrator/exports/${exportJob!.id}`, { token: a });
    expect(csv.status).toBe(200);
    expect(String(csv.body).split('\r\n')[0]).toMatch(/^hubspot_id,hubspot_updated_at,/);
    await call('GET', `/orchestrator/exports/${exportJob!.id}`, { token: b }); // 404
    await call('GET', '/orchestrator/exports/x', { token: a }); // 400
    const link = new URL(exported.body.jobs[0].result.url);
    expect((await call('GET', `${link.pathname.replace(/^\/functions\/v1/, '')}${link.search}`)).status).toBe(200); // the signed link, no token
    expect((await call('GET', `/orchestrator/exports/${exportJob!.id}?expires=1&signature=${'A'.repeat(43)}`)).status).toBe(403);
    const latest = await call('GET', `/orchestrator/exports?portalId=${portalId}`, { token: a });
    expect(latest.body.exports.map((e: { contentType: string }) => e.contentType)).toEqual(['site_pages', 'hubdb_rows']);
    await call('GET', `/orchestrator/exports?portalId=${portalId}`, { token: b }); // 404
    await call('GET', '/orchestrator/exports', { token: a }); // 400

    const stoppable = await call('POST', '/orchestrator', { token: a, body: { portalId, contentTypes: ['url_redirects'] } });
    await call('POST', '/orchestrator', { token: a, body: { action: 'stop', runId: stoppable.body.runId } });
    await call('POST', '/orchestrator', { token: b, body: { action: 'stop', runId: stoppable.body.runId } }); // 404
    await call('GET', `/orchestrator?runId=${stoppable.body.runId}`, { token: b }); // 404
    await call('GET', '/orchestrator?runId=nope', { token: a }); // 400
    await call('GET', '/orchestrator/portals', { token: a });
    const page = await call('GET', '/orchestrator/runs?limit=2', { token: a });
    await call('GET', `/orchestrator/runs?limit=2&cursor=${page.body.nextCursor}&portalId=${portalId}`, { token: a });
    await call('GET', '/orchestrator/runs?cursor=bad', { token: a }); // 400
    await call('GET', '/orchestrator/stats', { token: a }); // 403
    await db.sql`update auth.users set raw_app_meta_data = '{"queue_operator": true}' where id = ${alice}`;
    await call('GET', '/orchestrator/stats', { token: a });
    // The requests chart (owner) and the operator's views and actions (alice is an operator now, b is not).
    await call('GET', `/orchestrator/requests?portalId=${portalId}`, { token: a });
    await call('GET', `/orchestrator/requests?portalId=${portalId}`, { token: b }); // 404
    // The stored content per type (the page's overview): live items, the owner's portal only.
    const content = await call('GET', `/orchestrator/content?portalId=${portalId}`, { token: a });
    expect(Object.fromEntries(content.body.types.map((t: { contentType: string; items: number }) => [t.contentType, t.items])))
      .toEqual({ site_pages: 7, landing_pages: 3, blog_posts: 5, blog_authors: 2, blog_tags: 4, hubdb_tables: 2, hubdb_rows: 6, url_redirects: 3 });
    await call('GET', `/orchestrator/content?portalId=${portalId}`, { token: b }); // 404
    await call('GET', '/orchestrator/content?portalId=nope', { token: a }); // 400
    await call('GET', '/orchestrator/operator/jobs?status=stopped&limit=1', { token: a });
    await call('GET', '/orchestrator/operator/jobs', { token: b }); // 403
    await call('GET', '/orchestrator/operator/portals', { token: a });
    await call('GET', `/orchestrator/operator/requests?portalId=${portalId}`, { token: a });
    const [stoppedJob] = await db.sql`select id::text from public.jobs where run_id = ${stoppable.body.runId}`;
    await call('POST', '/orchestrator', { token: a, body: { action: 'retry_job', jobId: stoppedJob!.id } }); // 409 JOB_NOT_FAILED
    await call('POST', '/orchestrator', { token: a, body: { action: 'stop_job', jobId: stoppedJob!.id } });
    await call('POST', '/orchestrator', { token: b, body: { action: 'pause_portal', portalId } }); // 403
    await call('POST', '/orchestrator', { token: a, body: { action: 'pause_portal', portalId } });
    await call('POST', '/orchestrator', { token: a, body: { action: 'resume_portal', portalId } });
    // Sync: the schedule (owner only), the sync status and the change feed.
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'set_sync_schedule', portalId, incrementalEveryMinutes: 5 } })).status).toBe(200);
    await call('POST', '/orchestrator', { token: b, body: { action: 'set_sync_schedule', portalId, incrementalEveryMinutes: 5 } }); // 404
    await call('POST', '/orchestrator', { token: a, body: { action: 'set_sync_schedule', portalId, incrementalEveryMinutes: 0 } }); // 400
    const status = await call('GET', `/orchestrator/sync?portalId=${portalId}`, { token: a });
    expect(status.body.lastSync).toMatchObject({ mode: 'full', trigger: 'user', status: 'completed', changes: { updated: 0, deleted: 0 } });
    expect(status.body.nextSyncAt).not.toBeNull();
    await call('GET', `/orchestrator/sync?portalId=${portalId}`, { token: b }); // 404
    await call('GET', '/orchestrator/sync?portalId=nope', { token: a }); // 400
    const changes = await call('GET', `/orchestrator/changes?portalId=${portalId}&limit=5`, { token: a });
    expect(changes.body).toMatchObject({ more: true });
    expect(changes.body.changes).toHaveLength(5);
    const rest = await call('GET', `/orchestrator/changes?portalId=${portalId}&cursor=${changes.body.nextCursor}`, { token: a });
    const [stored] = await db.sql`select count(*)::int as n from public.hubspot_content where portal_id = ${portalId}`;
    expect(rest.body.changes).toHaveLength(Math.min(100, stored!.n - 5));
    await call('GET', `/orchestrator/changes?portalId=${portalId}&cursor=bad`, { token: a }); // 400
    await call('GET', `/orchestrator/changes?portalId=${portalId}`, { token: b }); // 404
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'delete_sync_schedule', portalId } })).body).toEqual({ portalId, deleted: true });

    // Publish: an edited export uploaded (and planned), an app's edit, the plan read from HubSpot (its job driven here), approved, published, rolled back.
    const storedPages = await db.sql`select data from public.hubspot_content where portal_id = ${portalId} and content_type = 'site_pages' and deleted_at is null`;
    const hubspotPages = new HubSpotItems('site_pages').put(...storedPages.map((r) => r.data as Item));
    const exportedPages = String(csv.body);
    const upload = (query: string, file: string, contentType = 'text/csv') => call('POST', `/orchestrator/publish/csv?portalId=${portalId}&contentType=site_pages${query}`, { token: a, body: file, contentType });
    expect((await upload('', exportedPages)).body).toMatchObject({ edits: 0, plan: null }); // 200: nothing changed
    const [firstLine, firstRow, ...restRows] = exportedPages.split('\n');
    const renamed = [firstLine, firstRow!.replace(/^([^,]+,[^,]+,)(?:"[^"]*"|[^,]*)/, '$1Renamed over HTTP'), ...restRows].join('\n');
    const uploaded = await upload('&plan=true', renamed);
    expect(uploaded.status).toBe(202);
    expect((await upload('', `${firstLine}\n1,2\n`)).status).toBe(422);
    expect((await upload('', renamed, 'text/plain')).status).toBe(415);
    await call('POST', `/orchestrator/publish/csv?portalId=${portalId}&contentType=hubdb_tables`, { token: a, body: renamed, contentType: 'text/csv' }); // 400
    await call('POST', `/orchestrator/publish/csv?portalId=${portalId}&contentType=site_pages`, { token: b, body: renamed, contentType: 'text/csv' }); // 404
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'create_publish_plan', portalId } })).status).toBe(409); // still planning
    await runPlan(db.sql, uploaded.body.plan.runId, { site_pages: hubspotPages });
    const planId = uploaded.body.plan.planId as string;
    expect((await call('GET', `/orchestrator/publish/plans/${planId}`, { token: a })).body.plan).toMatchObject({ status: 'ready', approvable: true });
    await call('GET', `/orchestrator/publish/plans/${planId}`, { token: b }); // 404
    await call('GET', '/orchestrator/publish/plans/nope', { token: a }); // 400
    await call('GET', `/orchestrator/publish/plans?portalId=${portalId}`, { token: a });
    await call('GET', `/orchestrator/publish/plans?portalId=${portalId}`, { token: b }); // 404
    await call('GET', `/orchestrator/publish/plans?portalId=${portalId}&cursor=bad`, { token: a }); // 400
    expect((await call('GET', `/orchestrator/publish/plans/${planId}/items?planStatus=ready&limit=10`, { token: a })).body.items).toHaveLength(1);
    await call('GET', `/orchestrator/publish/plans/${planId}/items?limit=0`, { token: a }); // 400
    await call('GET', `/orchestrator/publish/plans/${planId}/items`, { token: b }); // 404
    await call('POST', '/orchestrator', { token: b, body: { action: 'approve_publish_plan', planId } }); // 404
    const approvedPlan = await call('POST', '/orchestrator', { token: a, body: { action: 'approve_publish_plan', planId } });
    expect(approvedPlan.status).toBe(202);
    await call('POST', '/orchestrator', { token: a, body: { action: 'approve_publish_plan', planId } }); // 409 PLAN_ALREADY_APPROVED
    await runApply(db.sql, 'publish', approvedPlan.body.publishRunId, { site_pages: hubspotPages });
    expect((await call('GET', `/orchestrator?runId=${approvedPlan.body.publishRunId}`, { token: a })).body.run).toMatchObject({ kind: 'publish', status: 'completed' });
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'rollback_publish_run', runId: approvedPlan.body.publishRunId } })).status).toBe(202);
    await call('POST', '/orchestrator', { token: a, body: { action: 'rollback_publish_run', runId: approvedPlan.body.publishRunId } }); // 409 ALREADY_ROLLED_BACK
    const audit = await call('GET', `/orchestrator/publish/plans/${planId}/audit.csv`, { token: a });
    expect(String(audit.body).split('\n')[0]).toMatch(/^plan_id,planned_by,/);
    await call('GET', `/orchestrator/publish/plans/${planId}/audit.csv`, { token: b }); // 404
    const otherPage = storedPages.find((r) => (r.data as Item).id !== firstRow!.split(',')[0])!.data as Item;
    await addEdit(db.sql, { portalId, userId: alice }, 'site_pages', otherPage.id, String(otherPage.updated), { name: 'Discard me' });
    const discardable = await call('POST', '/orchestrator', { token: a, body: { action: 'create_publish_plan', portalId, contentTypes: ['site_pages'] } });
    await runPlan(db.sql, discardable.body.runId, { site_pages: hubspotPages });
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'discard_publish_plan', planId: discardable.body.planId } })).body.discarded).toBe(true);

    await db.sql`update private.write_limit_settings set max_writes = 1`;
    await call('POST', '/orchestrator', { token: b, body: { portalId } }); // 404, counted
    await call('POST', '/orchestrator', { token: b, body: { portalId } }); // 429
    await db.sql`update private.write_limit_settings set max_writes = 60`;
    expect((await call('POST', '/orchestrator', { token: a, body: { action: 'disconnect_portal', portalId: revoked.body.portalId } })).status).toBe(200);
    await call('POST', '/orchestrator', { token: a, body: { portalId: revoked.body.portalId } }); // 424 HUBSPOT_DISCONNECTED
    await call('POST', '/orchestrator', { body: { portalId }, token: await keys.signUserToken(alice, { expiresInSeconds: -60 }) }); // 401 TOKEN_EXPIRED

    const problems: string[] = [];
    for (const s of seen) {
      const documented = s.op.responses[s.status] ?? ({ 404: true, 405: true, 500: true } as Record<number, unknown>)[s.status];
      const where = `${s.op.method.toUpperCase()} ${s.op.path} → ${s.status}`;
      if (!documented) {
        problems.push(`${where} is not documented`);
        continue;
      }
      const response = s.op.responses[s.status];
      if (!response) continue; // the statuses every operation may answer are errors: checked below
      if (response.csv) {
        if (!s.contentType?.startsWith('text/csv')) problems.push(`${where}: documented as text/csv, got ${s.contentType}`);
        continue;
      }
      if (!response.json) {
        if (s.body !== '') problems.push(`${where}: documented without a body`);
        continue;
      }
      const matches = response.json.some((schema: z.ZodType) => schema.safeParse(s.body).success);
      if (!matches) problems.push(`${where}: ${JSON.stringify(s.body).slice(0, 300)} matches none of the documented schemas: ${response.json.map((sch) => JSON.stringify(sch.safeParse(s.body).error?.issues.slice(0, 3))).join(' / ')}`);
    }
    expect(problems).toEqual([]);
    const statuses = new Set(seen.map((s) => `${s.op.method} ${s.op.path} ${s.status}`));
    // Every operation answered its success at least once.
    for (const op of OPERATIONS) expect([...statuses].some((k) => k.startsWith(`${op.method} ${op.path} 2`)), `${op.method} ${op.path}`).toBe(true);
    // A generous share of the documented error statuses were really produced (and so checked above).
    for (const k of ['post /orchestrator 400', 'post /orchestrator 401', 'post /orchestrator 404', 'post /orchestrator 409', 'post /orchestrator 413', 'post /orchestrator 415', 'post /orchestrator 424', 'post /orchestrator 429', 'post /orchestrator 403', 'get /orchestrator 400', 'get /orchestrator 404', 'get /orchestrator/exports/{jobId} 404', 'get /orchestrator/exports/{jobId} 409', 'get /orchestrator/exports/{jobId} 403', 'get /orchestrator/exports 400', 'get /orchestrator/exports 404', 'get /orchestrator/stats 403',
      'post /orchestrator 202', 'post /orchestrator/publish/csv 202', 'post /orchestrator/publish/csv 400', 'post /orchestrator/publish/csv 404', 'post /orchestrator/publish/csv 415',
      'post /orchestrator/publish/csv 422', 'get /orchestrator/publish/plans/{planId} 404', 'get /orchestrator/publish/plans/{planId}/items 404',
      'get /orchestrator/publish/plans/{planId}/audit.csv 404']) {
      expect(statuses.has(k), k).toBe(true);
    }
  }, 120_000);
});

// The document itself is well-formed enough for tools: every $ref resolves.
describe('openapi.json references', () => {
  it('every $ref points at a component that exists', () => {
    const doc = openApiDocument() as { components: { schemas: Record<string, unknown> } };
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(10);
    for (const r of refs) expect(doc.components.schemas, r).toHaveProperty(r);
  });
});
