// Export downloads from Storage read Storage's errors by what they mean: Storage
// answers most errors with HTTP 400 and the real status in the JSON body's
// `statusCode` (a string). Only "object not found" (statusCode "404",
// not_found) means the file is gone (410); a refused key (statusCode "403",
// e.g. "Invalid Compact JWS" for a bad, expired or rotated key) is the
// operator's to fix (503 STORAGE_MISCONFIGURED, logged without the key), and a
// Storage that does not answer is 503 STORAGE_UNAVAILABLE. A run's results
// keep their file and say why no URL could be signed. Real database, the
// loopback Storage stand-in, the real handler.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageExportFiles, type ExportFiles } from '../functions/orchestrator/export-files.ts';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { supabaseStorageSink } from '../functions/worker/tus-sink.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { createSigningKeys, type SigningKeys } from '../local/supabase.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { createLogger } from '../shared/log.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { startStorageStandIn, type StorageStandIn } from './support/storage-stand-in.ts';

const db = useTestDatabase();
const CSV = 'name,url\r\nHome,https://example.test/\r\n';
let storage: StorageStandIn;
let keys: SigningKeys;
let owner: { userId: string; portalId: string; token: string };
const logLines: string[] = [];

function handlerWith(exportFiles: ExportFiles) {
  return createOrchestratorHandler({
    sql: db.sql,
    // No secrets to redact: what is logged must not hold the key in the first place.
    log: createLogger({ write: (line) => logLines.push(line) }),
    maxBodyBytes: 64 * 1024,
    verifyUser: createUserVerifier({ jwks: keys.jwks }),
    ...hubspotDeps({ sql: db.sql, basePath: 'http://127.0.0.1:9', rateLimit: { maxPer10s: 190 }, tokenKeys: testTokenKeys, oauthApp: null }),
    wakeWorker: () => {},
    exportFiles,
  });
}
const filesWith = (serviceKey: string, supabaseUrl = storage.url) => storageExportFiles({ supabaseUrl, serviceKey, expiresInSeconds: 600 });

async function call(h: (req: Request) => Promise<Response>, pathAndQuery: string): Promise<{ status: number; body: any }> {
  const res = await h(new Request(`http://127.0.0.1/functions/v1/orchestrator${pathAndQuery}`, { headers: { Authorization: `Bearer ${owner.token}` } }));
  const text = await res.text();
  return { status: res.status, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

/** A completed export job whose file the worker's Storage sink stored. */
async function storedExport(): Promise<{ runId: string; jobId: string; location: string }> {
  await db.sql`select public.stop_run(id) from public.runs where portal_id = ${owner.portalId} and finished_at is null`;
  const { runId } = await createRun(db.sql, { portalId: owner.portalId, requestedBy: owner.userId, kind: 'export', contentTypes: ['url_redirects'] });
  const job = (await claimNextJob(db.sql, 'downloads-test', ['export']))!;
  expect(job.runId).toBe(runId);
  const w = await supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey }).open(`${owner.userId}/${runId}/url_redirects-${job.fencingToken}.csv`, { jobId: job.id });
  await w.write(new TextEncoder().encode(CSV));
  const file = await w.commit();
  expect(await completeJob(db.sql, job, { rows: 1, bytes: file.bytes, location: file.location, url: file.url ?? null })).toBe(true);
  return { runId: runId!, jobId: job.id, location: file.location };
}

beforeAll(async () => {
  storage = await startStorageStandIn({ sql: db.sql });
  keys = await createSigningKeys();
  const { userId, portalId } = await createUserWithPortal(db.sql);
  owner = { userId, portalId, token: await keys.signUserToken(userId) };
});
afterAll(async () => {
  await storage.close();
});

describe('export downloads from Storage', () => {
  it('with the service key: the file is streamed and every GET ?runId= signs a fresh URL', async () => {
    const { runId, jobId } = await storedExport();
    const h = handlerWith(filesWith(storage.serviceKey));
    expect(await call(h, `/exports/${jobId}`)).toEqual({ status: 200, body: CSV });
    const { body } = await call(h, `?runId=${runId}`);
    const result = body.jobs[0].result;
    expect(result.url).toMatch(new RegExp(`^${storage.url}/storage/v1/object/sign/exports/`));
    expect(result.urlUnavailable).toBeUndefined();
    expect(await (await fetch(result.url)).text()).toBe(CSV);
  });

  it('a refused key (HTTP 400, statusCode "403": bad, expired or rotated) answers 503 STORAGE_MISCONFIGURED, never 410; the result says why it has no URL', async () => {
    const { runId, jobId, location } = await storedExport();
    const rotated = 'rotated-service-key-0123456789';
    const h = handlerWith(filesWith(rotated));
    logLines.length = 0;
    const download = await call(h, `/exports/${jobId}`);
    expect(download.status).toBe(503);
    expect(download.body.code).toBe('STORAGE_MISCONFIGURED');
    expect(download.body.message).toMatch(/file is kept/);

    const { status, body } = await call(h, `?runId=${runId}`);
    expect(status).toBe(200); // the run is still answered
    const result = body.jobs[0].result;
    expect(result).toMatchObject({ rows: 1, location, url: null, urlUnavailable: { code: 'STORAGE_MISCONFIGURED' } });
    expect(result.urlUnavailable.message).toMatch(/credentials/);

    // The operator is told what Storage said, and never the key.
    const logged = logLines.filter((l) => l.includes('export_storage_misconfigured'));
    expect(logged.length).toBe(2);
    expect(logged[0]).toMatch(/statusCode 403.*Invalid Compact JWS/);
    expect(logLines.join('\n')).not.toContain(rotated);
    // The file was never gone: with the right key it downloads.
    expect(await call(handlerWith(filesWith(storage.serviceKey)), `/exports/${jobId}`)).toEqual({ status: 200, body: CSV });
  });

  it('only "object not found" (statusCode "404", not_found) means gone: 410 EXPORT_FILE_GONE, and the result says so', async () => {
    const { runId, jobId, location } = await storedExport();
    const deleted = await fetch(`${storage.url}/storage/v1/object/${location}`, { method: 'DELETE', headers: { Authorization: `Bearer ${storage.serviceKey}`, apikey: storage.serviceKey } });
    expect(deleted.status).toBe(200);
    const h = handlerWith(filesWith(storage.serviceKey));
    const download = await call(h, `/exports/${jobId}`);
    expect([download.status, download.body.code]).toEqual([410, 'EXPORT_FILE_GONE']);
    const result = (await call(h, `?runId=${runId}`)).body.jobs[0].result;
    expect(result).toMatchObject({ location, url: null, urlUnavailable: { code: 'EXPORT_FILE_GONE' } }); // not the worker's stale URL
  });

  it('"object not found" for a key that cannot see the bucket (not a service key: RLS hides everything) is not "gone" either', async () => {
    const { jobId } = await storedExport();
    // As Storage answers a valid JWT of another role: objects and buckets are out of its sight.
    const rlsHidden: typeof fetch = async (input) => {
      const route = new URL(String(input)).pathname;
      const body = route.startsWith('/storage/v1/bucket/')
        ? { statusCode: '404', code: 'NoSuchBucket', error: 'Bucket not found', message: 'Bucket not found' }
        : { statusCode: '404', code: 'NoSuchKey', error: 'not_found', message: 'Object not found' };
      return new Response(JSON.stringify(body), { status: 400, headers: { 'content-type': 'application/json' } });
    };
    const h = handlerWith(storageExportFiles({ supabaseUrl: storage.url, serviceKey: 'anon-key', fetch: rlsHidden }));
    const download = await call(h, `/exports/${jobId}`);
    expect([download.status, download.body.code]).toEqual([503, 'STORAGE_MISCONFIGURED']);
  });

  it('a Storage that does not answer is 503 STORAGE_UNAVAILABLE, and the result says so', async () => {
    const { runId, jobId } = await storedExport();
    const h = handlerWith(filesWith(storage.serviceKey, 'http://127.0.0.1:1'));
    const download = await call(h, `/exports/${jobId}`);
    expect([download.status, download.body.code]).toEqual([503, 'STORAGE_UNAVAILABLE']);
    const result = (await call(h, `?runId=${runId}`)).body.jobs[0].result;
    expect(result).toMatchObject({ url: null, urlUnavailable: { code: 'STORAGE_UNAVAILABLE' } });
  });
});
