// What the orchestrator answers about runs and their files, called directly
// against a real database and the HubSpot simulator: why a job or run waits
// (waitingReason), a second trigger joining the run in flight, which fetch an
// export reflects, why a file cannot be downloaded (EXPORT_NOT_READY with
// Retry-After, EXPORT_STOPPED, EXPORT_FAILED), signed links for local files,
// locations that never name a server path, the latest export per type, and
// disconnecting a portal.
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localExportFiles } from '../functions/orchestrator/export-files.ts';
import { exportLinks } from '../functions/orchestrator/export-links.ts';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { exportLocation, localExportPath } from '../shared/export-location.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createSigningKeys, type SigningKeys } from '../local/supabase.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { createUserVerifier } from '../shared/auth.ts';
import type { Sql } from '../shared/db.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { createLogger } from '../shared/log.ts';
import { claimNextJob, completeJob, failJob, parkJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { writeCounts } from './support/orchestrator-harness.ts';

const db = useTestDatabase();
const BASE = 'http://127.0.0.1:54321/functions/v1/orchestrator';
let sim: HubSpotSimulator;
let keys: SigningKeys;
let sql: Sql;
let exportDir: string;
let handler: (req: Request) => Promise<Response>;

interface Actor {
  userId: string;
  token: string;
  portalId: string;
}
let ann: Actor;
let ben: Actor;

async function actor(hubspotPortalId: number, token: string): Promise<Actor> {
  const userId = await createUser(db.sql);
  sim.addPortal({ portalId: hubspotPortalId, token, sizes: { site_pages: 3, blog_posts: 2, blog_tags: 1, url_redirects: 2 } });
  const portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: userId, hubspotPortalId, name: `Portal ${hubspotPortalId}`, accessToken: token });
  return { userId, token: await keys.signUserToken(userId), portalId };
}

const get = (who: Actor | null, pathAndQuery: string) => new Request(`${BASE}${pathAndQuery}`, { headers: who ? { Authorization: `Bearer ${who.token}` } : {} });
const post = (who: Actor, body: unknown) =>
  new Request(BASE, { method: 'POST', headers: { Authorization: `Bearer ${who.token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
async function call(req: Request): Promise<{ status: number; body: any; res: Response }> {
  const res = await handler(req);
  const text = await res.text();
  return { status: res.status, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text, res };
}

/** Ends every unfinished run of the portal (an export waits while a fetch of its type is in flight). */
async function settle(who: Actor) {
  await db.sql`select public.stop_run(id) from public.runs where portal_id = ${who.portalId} and finished_at is null`;
}

/** Claims the pending job of `runId` (the only claimable one: others are settled first). */
async function claimOf(runId: string, kind: 'fetch' | 'export') {
  const job = await claimNextJob(db.sql, 'test-worker', [kind]);
  expect(job?.runId).toBe(runId);
  return job!;
}

/** A completed fetch of one type, then a completed export of it with its file where the worker's local sink puts it. */
async function fetchedAndExported(who: Actor, contentType: 'url_redirects' | 'blog_tags', csv: string) {
  await settle(who);
  const fetch = await createRun(db.sql, { portalId: who.portalId, requestedBy: who.userId, kind: 'fetch', contentTypes: [contentType] });
  const fj = await claimOf(fetch.runId!, 'fetch');
  expect(await completeJob(db.sql, fj, { fetched: 2 })).toBe(true);
  const exp = await createRun(db.sql, { portalId: who.portalId, requestedBy: who.userId, kind: 'export', contentTypes: [contentType] });
  const ej = await claimOf(exp.runId!, 'export');
  const location = exportLocation('exports', `${who.userId}/${exp.runId}/${contentType}-${ej.fencingToken}.csv`);
  const file = localExportPath(exportDir, location);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, csv);
  expect(await completeJob(db.sql, ej, { rows: 1, bytes: Buffer.byteLength(csv), location, url: null })).toBe(true);
  return { fetchRunId: fetch.runId!, fetchJobId: fj.id, exportRunId: exp.runId!, exportJobId: ej.id, location, file };
}

beforeAll(async () => {
  sql = db.connect(8);
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000 } });
  keys = await createSigningKeys();
  exportDir = await mkdtemp(path.join(tmpdir(), 'orchestrator-run-answers-'));
  handler = createOrchestratorHandler({
    sql,
    log: createLogger({ write: (line) => void (line.includes('orchestrator_error') && console.error(line)) }),
    maxBodyBytes: 64 * 1024,
    verifyUser: createUserVerifier({ jwks: keys.jwks }),
    ...hubspotDeps({ sql, basePath: sim.url, rateLimit: { maxPer10s: 190 }, tokenKeys: testTokenKeys, oauthApp: null }),
    wakeWorker: () => {},
    exportFiles: localExportFiles(exportDir),
    exportLinks: exportLinks(BASE, 'a-local-export-url-key-for-tests'),
  });
  ann = await actor(8100, 'pat-answers-ann');
  ben = await actor(8200, 'pat-answers-ben');
}, 60_000);
afterAll(async () => {
  await sim?.close();
});

describe('waitingReason', () => {
  it('says why a pending job and its run wait: the fetch in flight, HubSpot\'s daily limit, a retry backoff; null while working', async () => {
    await settle(ann);
    const fetch = await call(post(ann, { portalId: ann.portalId, contentTypes: ['site_pages'] }));
    const exp = await call(post(ann, { portalId: ann.portalId, kind: 'export', contentTypes: ['site_pages'] }));
    expect([fetch.status, exp.status]).toEqual([201, 201]);
    const waitingExport = (await call(get(ann, `?runId=${exp.body.runId}`))).body;
    expect(waitingExport.jobs[0]).toMatchObject({ status: 'pending', waitingReasonCode: 'fetch_in_flight', waitingReason: 'export waiting for the fetch', waitingUntil: null });
    expect(waitingExport.run).toMatchObject({ status: 'pending', waitingReasonCode: 'fetch_in_flight', waitingReason: 'export waiting for the fetch' });

    const job = await claimOf(fetch.body.runId, 'fetch');
    const running = (await call(get(ann, `?runId=${fetch.body.runId}`))).body;
    expect(running.jobs[0]).toMatchObject({ status: 'running', waitingReason: null, waitingReasonCode: null, waitingUntil: null });
    expect(running.run.waitingReason).toBeNull();

    const until = new Date(Date.now() + 3_600_000);
    // What the worker writes when HubSpot's daily limit is spent (functions/worker/fetch-job.ts).
    expect(await parkJob(db.sql, job, until, `waiting for HubSpot's daily limit until ${until.toISOString()}`)).toBe(true);
    const parked = (await call(get(ann, `?runId=${fetch.body.runId}`))).body;
    expect(parked.jobs[0]).toMatchObject({
      status: 'pending', waitingReasonCode: 'hubspot_daily_limit', waitingReason: `waiting for HubSpot's daily limit until ${until.toISOString()}`,
    });
    expect(new Date(parked.jobs[0].waitingUntil).getTime()).toBe(until.getTime());
    expect(parked.run).toMatchObject({ waitingReasonCode: 'hubspot_daily_limit', waitingReason: parked.jobs[0].waitingReason });
    const listed = (await call(get(ann, `/runs?portalId=${ann.portalId}`))).body.runs;
    expect(listed.find((r: { id: string }) => r.id === fetch.body.runId)).toMatchObject({ waitingReasonCode: 'hubspot_daily_limit' });
    expect(listed.find((r: { id: string }) => r.id === exp.body.runId)).toMatchObject({ waitingReasonCode: 'fetch_in_flight' });

    await db.sql`update public.jobs set run_after = now() where id = ${job.id}`;
    const again = await claimOf(fetch.body.runId, 'fetch');
    expect(await failJob(db.sql, again, 'HubSpot answered 502', true)).toBe('retried');
    const retrying = (await call(get(ann, `?runId=${fetch.body.runId}`))).body;
    expect(retrying.jobs[0]).toMatchObject({ status: 'pending', waitingReasonCode: 'retry_backoff' });
    expect(retrying.jobs[0].waitingReason).toBe(`retrying after a failure until ${new Date(retrying.jobs[0].waitingUntil).toISOString()}`);
    // When it gives up: fetch's retry_for_seconds (30 min) after this first failure; none before it failed.
    expect(parked.jobs[0].retryingUntil).toBeNull();
    const [failedAt] = await db.sql`select updated_at from public.jobs where id = ${job.id}`;
    expect(new Date(retrying.jobs[0].retryingUntil).getTime()).toBe((failedAt!.updated_at as Date).getTime() + 1_800_000);
    // HubSpot's Retry-After, as the worker parks for it.
    await db.sql`update public.jobs set run_after = now() where id = ${job.id}`;
    const third = await claimOf(fetch.body.runId, 'fetch');
    expect(await parkJob(db.sql, third, new Date(Date.now() + 60_000), 'HubSpot asked to wait 60 s')).toBe(true);
    const rateLimited = (await call(get(ann, `?runId=${fetch.body.runId}`))).body.jobs[0];
    expect(rateLimited).toMatchObject({ waitingReasonCode: 'hubspot_rate_limit', waitingReason: 'HubSpot asked to wait 60 s' });
    await settle(ann);
    const stopped = (await call(get(ann, `?runId=${exp.body.runId}`))).body;
    expect(stopped.run).toMatchObject({ waitingReason: null, waitingReasonCode: null });
    expect(stopped.jobs[0]).toMatchObject({ waitingReason: null, waitingReasonCode: null });
  });
});

describe('a second trigger joins the run in flight', () => {
  it('types already completed in an unfinished run are duplicates pointing at it; a failed one may be asked again; a finished run does not hold', async () => {
    await settle(ann);
    const first = await call(post(ann, { portalId: ann.portalId, contentTypes: ['blog_tags', 'url_redirects', 'site_pages'] }));
    expect(first.status).toBe(201);
    const runId = first.body.runId;
    const byType = Object.fromEntries(first.body.jobs.map((j: { contentType: string; id: string }) => [j.contentType, j.id]));
    // blog_tags completes, site_pages fails for good; url_redirects still runs: the run is in flight.
    for (let i = 0; i < 3; i++) {
      const job = await claimNextJob(db.sql, 'test-worker', ['fetch']);
      if (job!.contentType === 'blog_tags') expect(await completeJob(db.sql, job!, { fetched: 1 })).toBe(true);
      if (job!.contentType === 'site_pages') expect(await failJob(db.sql, job!, 'broken', false)).toBe('failed');
    }
    const again = await call(post(ann, { portalId: ann.portalId, contentTypes: ['blog_tags', 'url_redirects'] }));
    expect(again.status, JSON.stringify(again.body)).toBe(409);
    expect(again.body).toMatchObject({ code: 'ALL_DUPLICATE_JOBS', details: { duplicateRunIds: { blog_tags: runId, url_redirects: runId } } });
    const retry = await call(post(ann, { portalId: ann.portalId, contentTypes: ['site_pages', 'blog_tags'] }));
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ createdTypes: ['site_pages'], duplicateTypes: ['blog_tags'], duplicateRunIds: { blog_tags: runId } });
    // The same through create_run itself (what a scheduled sync calls), without the handler's early answer.
    const direct = await createRun(db.sql, { portalId: ann.portalId, requestedBy: ann.userId, kind: 'fetch', contentTypes: ['blog_tags'] });
    expect(direct).toMatchObject({ runId: null, duplicateTypes: ['blog_tags'] });
    expect(byType.blog_tags).toBeDefined();
    await settle(ann);
    const fresh = await call(post(ann, { portalId: ann.portalId, contentTypes: ['blog_tags'] }));
    expect(fresh.status).toBe(201);
    expect(fresh.body.runId).not.toBe(runId);
    await settle(ann);
  });
});

describe('export files', () => {
  it('a completed export: location is a bucket path (never a server path), url a signed link that works without a token, fromFetch names the fetch', async () => {
    const csv = 'hubspot_id,hubspot_updated_at,url\r\n1,2026-01-01T00:00:00Z,/a\r\n';
    const e = await fetchedAndExported(ben, 'url_redirects', csv);
    const { body } = await call(get(ben, `?runId=${e.exportRunId}`));
    const result = body.jobs[0].result;
    expect(result.location).toBe(e.location);
    expect(result.location).toMatch(/^exports\/[0-9a-f-]{36}\/[0-9a-f-]{36}\/url_redirects-\d+\.csv$/);
    expect(JSON.stringify(body)).not.toContain(exportDir);
    expect(result.fromFetch).toMatchObject({ runId: e.fetchRunId, jobId: e.fetchJobId, status: 'completed' });
    expect(result.url).toMatch(new RegExp(`^${BASE}/exports/${e.exportJobId}\\?expires=\\d+&signature=[\\w-]{43}$`));
    expect(Date.parse(result.urlExpiresAt) - Date.now()).toBeGreaterThan(3_500_000);

    // The link alone downloads (no Authorization), with the file name the attachment carries.
    const link = new URL(result.url);
    const byLink = await handler(new Request(link));
    expect(byLink.status).toBe(200);
    expect(byLink.headers.get('content-disposition')).toBe(`attachment; filename="url_redirects-${e.exportRunId.slice(0, 8)}.csv"`);
    expect(await byLink.text()).toBe(csv);
    // Tampered, for another job, or expired: 403 LINK_INVALID, nothing streamed.
    const forged = new URL(link);
    forged.searchParams.set('signature', `${link.searchParams.get('signature')!.slice(0, -2)}AA`);
    const otherJob = new URL(link.toString().replace(`/exports/${e.exportJobId}?`, `/exports/${Number(e.exportJobId) + 1}?`));
    const later = new URL(link);
    later.searchParams.set('expires', String(Number(link.searchParams.get('expires')) + 10));
    const past = await exportLinks(BASE, 'a-local-export-url-key-for-tests').sign(e.exportJobId, -10);
    for (const bad of [forged, otherJob, later, new URL(past.url)]) {
      const r = await call(new Request(bad));
      expect([r.status, r.body.code], bad.toString()).toEqual([403, 'LINK_INVALID']);
    }
    // An older result that recorded an absolute path is shown relative to the export directory.
    await db.sql`update public.jobs set result = result || ${db.sql.json({ location: e.file })} where id = ${e.exportJobId}`;
    const legacy = (await call(get(ben, `?runId=${e.exportRunId}`))).body.jobs[0].result;
    expect(legacy.location).toBe(e.location);
    expect(legacy.url).toMatch(/signature=/);
    await db.sql`update public.jobs set result = result || ${db.sql.json({ location: e.location })} where id = ${e.exportJobId}`;
  });

  it('409 EXPORT_NOT_READY with Retry-After while pending or running; EXPORT_STOPPED and EXPORT_FAILED for jobs that never will have a file', async () => {
    await settle(ben);
    const { runId } = await createRun(db.sql, { portalId: ben.portalId, requestedBy: ben.userId, kind: 'export', contentTypes: ['blog_tags'] });
    const [pending] = await db.sql`select id::text from public.jobs where run_id = ${runId}`;
    const notReady = await call(get(ben, `/exports/${pending!.id}`));
    expect([notReady.status, notReady.body.code]).toEqual([409, 'EXPORT_NOT_READY']);
    expect(notReady.body.message).toMatch(/waiting to start/);
    expect(notReady.res.headers.get('retry-after')).toBe('5');
    expect(notReady.body.details.retryAfterSeconds).toBe(5);
    await claimOf(runId!, 'export');
    const running = await call(get(ben, `/exports/${pending!.id}`));
    expect([running.body.code, running.body.message]).toEqual(['EXPORT_NOT_READY', expect.stringMatching(/being written/)]);
    expect(running.res.headers.get('retry-after')).toBe('5');
    await db.sql`select public.stop_run(${runId})`;
    const stopped = await call(get(ben, `/exports/${pending!.id}`));
    expect([stopped.status, stopped.body.code]).toEqual([409, 'EXPORT_STOPPED']);
    expect(stopped.res.headers.get('retry-after')).toBeNull();

    const failed = await createRun(db.sql, { portalId: ben.portalId, requestedBy: ben.userId, kind: 'export', contentTypes: ['blog_tags'] });
    const fj = await claimOf(failed.runId!, 'export');
    expect(await failJob(db.sql, fj, 'the bucket is full', false)).toBe('failed');
    const f = await call(get(ben, `/exports/${fj.id}`));
    expect([f.status, f.body.code]).toEqual([409, 'EXPORT_FAILED']);
    expect(f.body.message).toContain('the bucket is full');
  });

  it('GET /exports?portalId= answers the newest completed export of each type, the caller\'s own only', async () => {
    const a = await fetchedAndExported(ben, 'blog_tags', 'hubspot_id,hubspot_updated_at\r\n');
    const b = await fetchedAndExported(ben, 'blog_tags', 'hubspot_id,hubspot_updated_at\r\n9,2026-01-01T00:00:00Z\r\n');
    const latest = await call(get(ben, `/exports?portalId=${ben.portalId}`));
    expect(latest.status).toBe(200);
    const types = latest.body.exports.map((x: { contentType: string }) => x.contentType);
    expect(types).toEqual(['blog_tags', 'url_redirects']); // content-type order; types never exported are absent
    const tags = latest.body.exports[0];
    expect(tags).toMatchObject({ jobId: b.exportJobId, runId: b.exportRunId, result: { location: b.location, fromFetch: { runId: b.fetchRunId } } });
    expect(tags.jobId).not.toBe(a.exportJobId);
    expect(tags.result.url).toMatch(/signature=/);
    expect((await call(get(ann, `/exports?portalId=${ben.portalId}`))).body.code).toBe('PORTAL_NOT_FOUND');
    expect((await call(get(ben, '/exports'))).body.code).toBe('INVALID_QUERY');
    expect((await call(get(ben, '/exports?portalId=nope'))).status).toBe(400);
  });
});

describe('disconnect_portal', () => {
  it('deletes the tokens, fails the pending fetch, keeps content and files; idempotent; not for others; a reconnect works', async () => {
    const dana = await actor(8300, 'pat-answers-dana');
    const run = await call(post(dana, { portalId: dana.portalId, contentTypes: ['site_pages'] }));
    expect(run.status).toBe(201);
    const before = await writeCounts(db.sql);
    const foreign = await call(post(ann, { action: 'disconnect_portal', portalId: dana.portalId }));
    expect([foreign.status, foreign.body.code]).toEqual([404, 'PORTAL_NOT_FOUND']);
    expect((await call(post(dana, { action: 'disconnect_portal' }))).body.code).toBe('INVALID_BODY');
    expect(await writeCounts(db.sql)).toEqual(before);

    const done = await call(post(dana, { action: 'disconnect_portal', portalId: dana.portalId }));
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toMatchObject({ portalId: dana.portalId, disconnectedReason: 'disconnected by its owner', failedFetchJobs: 1 });
    const [creds] = await db.sql`select count(*)::int as n from private.portal_credentials where portal_id = ${dana.portalId}`;
    expect(creds!.n).toBe(0);
    const progress = (await call(get(dana, `?runId=${run.body.runId}`))).body;
    expect(progress.run.status).toBe('failed');
    expect(progress.jobs[0].lastError).toMatch(/disconnected by its owner/);
    const listed = (await call(get(dana, '/portals'))).body.portals[0];
    expect(listed).toMatchObject({ id: dana.portalId, disconnectedReason: 'disconnected by its owner' });
    expect(listed.disconnectedAt).not.toBeNull();
    // A fetch now says why; an export of stored content is still possible.
    const refused = await call(post(dana, { portalId: dana.portalId, contentTypes: ['site_pages'] }));
    expect([refused.status, refused.body.code]).toEqual([424, 'HUBSPOT_DISCONNECTED']);
    expect(refused.body.message).toMatch(/disconnected by its owner/);
    expect((await call(post(dana, { portalId: dana.portalId, kind: 'export', contentTypes: ['site_pages'] }))).status).toBe(201);

    const twice = await call(post(dana, { action: 'disconnect_portal', portalId: dana.portalId }));
    expect(twice.status).toBe(200);
    expect(twice.body.failedFetchJobs).toBe(0);
    expect(twice.body.disconnectedAt).toBe(done.body.disconnectedAt);

    const back = await call(post(dana, { action: 'connect_portal', name: 'Back again', accessToken: 'pat-answers-dana' }));
    expect(back.status, JSON.stringify(back.body)).toBe(201);
    expect(back.body.portalId).toBe(dana.portalId);
    expect((await call(get(dana, '/portals'))).body.portals[0]).toMatchObject({ disconnectedAt: null, disconnectedReason: null });
  });
});
