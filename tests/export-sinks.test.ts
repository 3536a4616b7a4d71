// Export sinks: the local directory sink, and the Supabase Storage sink against
// a loopback TUS server (@tus/server + @tus/file-store, what Supabase Storage
// runs) with a stand-in signing route. Both resume from a checkpoint after the
// writer is dropped, and publish nothing until commit.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportResumeError, ExportTooLargeError, type ExportWriter } from '../functions/worker/export-sink.ts';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { supabaseStorageSink } from '../functions/worker/tus-sink.ts';
import { localExportPath, parseExportLocation } from '../shared/export-location.ts';
import { startStorageStandIn, type StorageStandIn } from './support/storage-stand-in.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | Buffer | null) => (b === null ? null : new TextDecoder().decode(b));

/** A deterministic "file": numbered lines, so any misplaced byte shows. */
function fileOf(lines: number): string {
  return Array.from({ length: lines }, (_, i) => `line ${String(i).padStart(4, '0')},${'x'.repeat(i % 7)}\n`).join('');
}

/** Writes `data` from `from` in pieces of `piece` bytes. */
async function writeFrom(w: ExportWriter, data: Uint8Array, from: number, piece = 5): Promise<void> {
  for (let at = from; at < data.byteLength; at += piece) await w.write(data.subarray(at, Math.min(at + piece, data.byteLength)));
}

describe('local directory sink', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'sink-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('publishes a file only on commit, atomically, and leaves nothing on abort', async () => {
    const sink = localDirectorySink(root, { chunkBytes: 4 });
    const w = await sink.open('owner/run/blog_posts.csv', { jobId: '101' });
    await w.write(bytes('a,b\n'));
    await w.write(bytes('1,2\n'));
    expect(await readdir(path.join(root, 'exports/owner/run'))).toEqual(['blog_posts.csv.partial-101']);
    expect(w.durableBytes).toBe(8);
    const file = await w.commit();
    expect(file.bytes).toBe(8);
    expect(await readFile(localExportPath(root, file.location), 'utf8')).toBe('a,b\n1,2\n');
    expect(await readdir(path.join(root, 'exports/owner/run'))).toEqual(['blog_posts.csv']);

    const aborted = await sink.open('owner/run/site_pages.csv', { jobId: '102' });
    await aborted.write(bytes('half'));
    await aborted.abort();
    expect(await readdir(path.join(root, 'exports/owner/run'))).toEqual(['blog_posts.csv']);
  });

  it('locates a file as <bucket>/<object path>, as the Storage sink does, never as a path of the server', async () => {
    const file = await (async () => {
      const w = await localDirectorySink(root).open('o/loc/where.csv', { jobId: '103' });
      await w.write(bytes('x\n'));
      return w.commit();
    })();
    expect(file.location).toBe('exports/o/loc/where.csv');
    expect(file.location).not.toContain(root);
    expect(localExportPath(root, file.location)).toBe(path.join(root, 'exports', 'o', 'loc', 'where.csv'));
    // A bucket of its own puts the files in that folder.
    const other = await localDirectorySink(root, { bucket: 'other' }).open('o/loc/where.csv', { jobId: '104' });
    await other.write(bytes('y\n'));
    expect((await other.commit()).location).toBe('other/o/loc/where.csv');
    expect(await readFile(path.join(root, 'other/o/loc/where.csv'), 'utf8')).toBe('y\n');
    // Nothing that is not a location names a file.
    for (const bad of [path.join(root, 'exports/o/loc/where.csv'), '/etc/passwd', 'exports/../x.csv', 'exports//x.csv', 'exports/a/./b', 'exports', 'ex ports/x', 'exports/a\\b', 'exports/a\0b']) {
      expect(parseExportLocation(bad), bad).toBeNull();
      expect(() => localExportPath(root, bad), bad).toThrow();
    }
  });

  it('stores whole chunks only, and a resumed writer continues from the checkpoint (longer file truncated)', async () => {
    const sink = localDirectorySink(root, { chunkBytes: 64 });
    const data = bytes(fileOf(40));
    const first = await sink.open('o/r/resume.csv', { jobId: '7' });
    await writeFrom(first, data.subarray(0, 300), 0);
    expect(first.durableBytes).toBe(256); // four chunks stored, 44 bytes buffered
    await first.close!(); // dropped: the buffered bytes are gone, the stored ones stay
    expect(await readdir(path.join(root, 'exports/o/r'))).toEqual(['resume.csv.partial-7']);

    // The checkpoint is at an earlier page end than what is stored: the file is cut back to it.
    const second = await sink.open('o/r/resume.csv', { jobId: '7', resume: { bytes: 200, upload: null } });
    expect(second.durableBytes).toBe(200);
    await writeFrom(second, data, 200, 17);
    const file = await second.commit();
    expect(file.bytes).toBe(data.byteLength);
    expect(await readFile(localExportPath(root, file.location))).toEqual(Buffer.from(data));
    expect(await readdir(path.join(root, 'exports/o/r'))).toEqual(['resume.csv']);
  });

  it('refuses to resume a partial file that is gone or shorter than the checkpoint', async () => {
    const sink = localDirectorySink(root, { chunkBytes: 8 });
    await expect(sink.open('o/gone/x.csv', { jobId: '1', resume: { bytes: 10, upload: null } })).rejects.toBeInstanceOf(ExportResumeError);
    const w = await sink.open('o/short/x.csv', { jobId: '1' });
    await w.write(bytes('12345678abc'));
    await w.close!();
    await expect(sink.open('o/short/x.csv', { jobId: '1', resume: { bytes: 9, upload: null } })).rejects.toBeInstanceOf(ExportResumeError);
  });

  it('a stale writer cannot write into, or republish, a file another writer has published', async () => {
    const sink = localDirectorySink(root, { chunkBytes: 4 });
    const stale = await sink.open('o/race/x.csv', { jobId: '9' });
    await stale.write(bytes('head'));
    const fresh = await sink.open('o/race/x.csv', { jobId: '9', resume: { bytes: 4, upload: null } });
    await fresh.write(bytes('-fresh-tail\n'));
    const done = await fresh.commit();
    await expect(stale.write(bytes('-stale-tail\n'))).rejects.toThrow();
    await expect(stale.commit()).rejects.toThrow();
    expect(await readFile(localExportPath(root, done.location), 'utf8')).toBe('head-fresh-tail\n');
  });
});

describe('Supabase Storage sink (resumable uploads, loopback TUS server)', () => {
  let storage: StorageStandIn;
  beforeAll(async () => {
    storage = await startStorageStandIn();
  });
  afterAll(async () => {
    await storage.close();
  });
  const sinkOf = (chunkBytes: number) => supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey, chunkBytes });
  const patches = (from: number) => storage.requests.slice(from).filter((r) => r.method === 'PATCH');

  it('uploads whole chunks, declares the length with the last one, publishes only then, and signs a URL', async () => {
    const sink = sinkOf(100);
    const data = bytes(fileOf(30));
    const seen = storage.requests.length;
    const w = await sink.open('owner/run/one.csv', { jobId: '1' });
    expect(w.upload).toMatch(new RegExp(`^${storage.url}/storage/v1/upload/resumable/`));
    await writeFrom(w, data, 0, 33);
    expect(w.durableBytes).toBe(Math.floor(data.byteLength / 100) * 100);
    expect(storage.finished()).not.toContain('exports/owner/run/one.csv');
    const file = await w.commit();
    expect(file).toMatchObject({ location: 'exports/owner/run/one.csv', bytes: data.byteLength });
    expect(storage.finished()).toContain('exports/owner/run/one.csv');
    expect(text(await storage.object('exports/owner/run/one.csv'))).toBe(text(data));

    // Every chunk but the last is exactly chunkBytes; only the last declares the length.
    const sent = patches(seen);
    expect(sent.map((p) => p.offset)).toEqual(sent.map((_, i) => i * 100));
    expect(sent.slice(0, -1).every((p) => p.length === undefined)).toBe(true);
    expect(sent.at(-1)!.length).toBe(data.byteLength);
    const post = storage.requests.slice(seen).find((r) => r.method === 'POST' && r.path.endsWith('/upload/resumable'));
    expect(post?.length).toBeUndefined(); // created with Upload-Defer-Length

    // The signed URL serves the file.
    const res = await fetch(file.url!);
    expect(await res.text()).toBe(text(data));
  });

  it('a length that is a whole number of chunks ends with an empty PATCH declaring it', async () => {
    const data = bytes('x'.repeat(300));
    const seen = storage.requests.length;
    const w = await sinkOf(100).open('owner/run/exact.csv', { jobId: '2' });
    await w.write(data);
    expect(w.durableBytes).toBe(300);
    expect(storage.finished()).not.toContain('exports/owner/run/exact.csv');
    await w.commit();
    expect(patches(seen).map((p) => [p.offset, p.length])).toEqual([[0, undefined], [100, undefined], [200, undefined], [300, 300]]);
    expect(text(await storage.object('exports/owner/run/exact.csv'))).toBe(text(data));
  });

  it('resumes after the writer is dropped mid-upload, skipping what the server already holds', async () => {
    const sink = sinkOf(64);
    const data = bytes(fileOf(60));
    const first = await sink.open('owner/run/resumed.csv', { jobId: '3' });
    await writeFrom(first, data.subarray(0, 500), 0, 9);
    expect(first.durableBytes).toBe(448);
    const upload = first.upload!;
    // Dropped without a word (an isolate cut off). The checkpoint saved earlier says 300 bytes.
    expect(await storage.uploadOffset(upload)).toBe(448);

    const second = await sink.open('owner/run/resumed.csv', { jobId: '3', resume: { bytes: 300, upload } });
    expect(second.durableBytes).toBe(448);
    const seen = storage.requests.length;
    await writeFrom(second, data, 300, 11); // regenerated from the checkpoint: 148 bytes are skipped
    expect(patches(seen)[0]!.offset).toBe(448);
    expect(storage.finished()).not.toContain('exports/owner/run/resumed.csv');
    const file = await second.commit();
    expect(file.bytes).toBe(data.byteLength);
    expect(text(await storage.object('exports/owner/run/resumed.csv'))).toBe(text(data));
  });

  it('resumes after a request is cut off in flight (whatever part of the chunk landed)', async () => {
    const sink = sinkOf(4096);
    const data = bytes(fileOf(2000));
    const abort = new AbortController();
    let patchNo = 0;
    storage.onRequest = (r) => {
      if (r.method === 'PATCH' && ++patchNo === 3) setTimeout(() => abort.abort(new Error('isolate shut down')), 0);
    };
    const first = await sink.open('owner/run/cut.csv', { jobId: '4', signal: abort.signal });
    await expect(writeFrom(first, data, 0, 1000)).rejects.toThrow();
    storage.onRequest = null;
    const stored = first.durableBytes!;
    expect(stored).toBeGreaterThanOrEqual(2 * 4096);

    const second = await sink.open('owner/run/cut.csv', { jobId: '4', resume: { bytes: 4096, upload: first.upload! } });
    expect(second.durableBytes).toBeGreaterThanOrEqual(stored);
    await writeFrom(second, data, 4096, 1000);
    await second.commit();
    expect(text(await storage.object('exports/owner/run/cut.csv'))).toBe(text(data));
  });

  it('refuses uploads that are gone, ahead of nothing, or on another host', async () => {
    const sink = sinkOf(64);
    await expect(sink.open('o/x.csv', { jobId: '5', resume: { bytes: 10, upload: `${storage.url}/storage/v1/upload/resumable/no-such-upload` } }))
      .rejects.toBeInstanceOf(ExportResumeError);
    await expect(sink.open('o/x.csv', { jobId: '5', resume: { bytes: 10, upload: null } })).rejects.toBeInstanceOf(ExportResumeError);
    await expect(sink.open('o/x.csv', { jobId: '5', resume: { bytes: 10, upload: 'http://192.0.2.1/storage/v1/upload/resumable/x' } }))
      .rejects.toBeInstanceOf(ExportResumeError);
    // An upload holding less than the checkpoint cannot be continued either.
    const w = await sink.open('o/short.csv', { jobId: '5' });
    await w.write(bytes('y'.repeat(100)));
    await expect(sink.open('o/short.csv', { jobId: '5', resume: { bytes: 90, upload: w.upload! } })).rejects.toBeInstanceOf(ExportResumeError);
  });

  it('an upload already finished (by a stale attempt) is accepted only with the same length', async () => {
    const sink = sinkOf(64);
    const data = bytes(fileOf(20));
    const stale = await sink.open('owner/run/twice.csv', { jobId: '6' });
    await stale.write(data);
    const upload = stale.upload!;
    await stale.commit();

    const same = await sink.open('owner/run/twice.csv', { jobId: '6', resume: { bytes: 64, upload } });
    await writeFrom(same, data, 64);
    expect((await same.commit()).bytes).toBe(data.byteLength);

    const longer = await sink.open('owner/run/twice.csv', { jobId: '6', resume: { bytes: 64, upload } });
    await expect(writeFrom(longer, bytes(`${fileOf(20)}extra line\n`), 64)).rejects.toBeInstanceOf(ExportResumeError);
  });

  it('a resend after a conflict or failed request is a whole chunk too: every request but the last carries exactly chunkBytes', async () => {
    const chunk = 1000;
    const data = bytes(fileOf(300)); // ~4.4 chunks
    const sent: number[] = [];
    let patchNo = 0;
    // A stale attempt gets the first 400 bytes of the sink's second chunk in first (the same bytes): the sink's
    // PATCH meets a 409, finds the server 400 bytes further, and must not send the 600 left over on their own.
    const racing: typeof fetch = async (input, init) => {
      if (init?.method === 'PATCH') {
        const body = init.body as Uint8Array<ArrayBuffer>;
        if (++patchNo === 2) expect((await fetch(input, { ...init, body: body.subarray(0, 400) })).status).toBe(204);
        sent.push(body.byteLength);
      }
      return fetch(input, init);
    };
    const sink = supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey, chunkBytes: chunk, fetch: racing });
    const w = await sink.open('owner/run/resent.csv', { jobId: '11' });
    await writeFrom(w, data, 0, 77);
    const file = await w.commit();
    expect(text(await storage.object(file.location))).toBe(text(data));
    expect(sent.length).toBeGreaterThan(4);
    expect(sent.slice(0, -1)).toEqual(sent.slice(0, -1).map(() => chunk));
    expect(sent.at(-1)).toBe(data.byteLength - 400 - (sent.length - 2) * chunk); // the rest: the 409'd chunk was resent whole
  });

  it('as Storage: with a deferred length the upload is taken and only the PATCH crossing the bucket\'s file_size_limit is refused (413)', async () => {
    storage.setFileSizeLimit('exports', 2500);
    try {
      const tus = { Authorization: `Bearer ${storage.serviceKey}`, apikey: storage.serviceKey, 'Tus-Resumable': '1.0.0' };
      const metadata = `bucketName ${btoa('exports')},objectName ${btoa('o/raw-limit.csv')}`;
      const created = await fetch(`${storage.url}/storage/v1/upload/resumable`, { method: 'POST', headers: { ...tus, 'Upload-Defer-Length': '1', 'Upload-Metadata': metadata } });
      expect(created.status).toBe(201);
      const upload = new URL(created.headers.get('location')!, storage.url).toString();
      const patch = (offset: number, n: number) =>
        fetch(upload, { method: 'PATCH', headers: { ...tus, 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': String(offset) }, body: new Uint8Array(n) });
      expect((await patch(0, 2000)).status).toBe(204);
      expect((await patch(2000, 1000)).status).toBe(413);
      // The bucket says its limit to a service key.
      const bucket = await fetch(`${storage.url}/storage/v1/bucket/exports`, { headers: tus });
      expect(await bucket.json()).toMatchObject({ id: 'exports', file_size_limit: 2500 });
    } finally {
      storage.setFileSizeLimit('exports', 52428800);
    }
  });

  it('a file larger than the bucket\'s file_size_limit fails for good before the chunk that would cross it is sent', async () => {
    storage.setFileSizeLimit('exports', 2500);
    try {
      const seen = storage.requests.length;
      const w = await sinkOf(1000).open('owner/run/too-large.csv', { jobId: '12' });
      const failed = await writeFrom(w, bytes(fileOf(300)), 0, 5).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(ExportTooLargeError);
      expect((failed as ExportTooLargeError).limitBytes).toBe(2500);
      expect((failed as Error).message).toMatch(/2500 bytes.*"exports" Storage bucket.*file_size_limit/);
      const patches = storage.requests.slice(seen).filter((r) => r.method === 'PATCH');
      expect(patches.map((p) => [p.offset, p.bytes, p.status])).toEqual([[0, 1000, 204], [1000, 1000, 204]]);
      expect(storage.requests.slice(seen).some((r) => r.status === 413)).toBe(false);
      await w.abort();
      expect(storage.requests.at(-1)).toMatchObject({ method: 'DELETE', status: 204 }); // the unfinished upload is terminated

      // A resumed writer whose checkpoint is already past the limit is refused at once, too.
      const again = await sinkOf(1000).open('owner/run/too-large-2.csv', { jobId: '12' });
      await again.write(bytes('z'.repeat(2000)));
      await expect(sinkOf(1000).open('owner/run/too-large-2.csv', { jobId: '12', resume: { bytes: 2000, upload: again.upload! } })).resolves.toBeTruthy();
      storage.setFileSizeLimit('exports', 1500);
      await expect(sinkOf(1000).open('owner/run/too-large-2.csv', { jobId: '12', resume: { bytes: 2000, upload: again.upload! } })).rejects.toBeInstanceOf(ExportTooLargeError);
    } finally {
      storage.setFileSizeLimit('exports', 52428800);
    }
  });

  it('a limit the sink does not know (the server\'s own): Storage\'s late 413 fails the file for good, not for another try', async () => {
    storage.setFileSizeLimit('exports', 2500);
    try {
      const sink = supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey, chunkBytes: 1000, fileSizeLimit: null });
      const seen = storage.requests.length;
      const w = await sink.open('owner/run/late-413.csv', { jobId: '13' });
      const failed = await writeFrom(w, bytes(fileOf(300)), 0, 100).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(ExportTooLargeError);
      expect((failed as ExportTooLargeError).limitBytes).toBeNull();
      expect((failed as Error).message).toMatch(/HTTP 413.*file_size_limit/);
      expect(storage.requests.slice(seen).filter((r) => r.method === 'PATCH').map((r) => r.status)).toEqual([204, 204, 413]); // not retried
    } finally {
      storage.setFileSizeLimit('exports', 52428800);
    }
  });

  it('as Storage, a finished upload cannot be terminated (400); a writer dropping it deletes the object through the Storage API', async () => {
    const data = bytes(fileOf(20));
    const first = await sinkOf(64).open('owner/run/dropped.csv', { jobId: '14' });
    await first.write(data);
    const upload = first.upload!;
    await first.commit();
    expect(storage.finished()).toContain('exports/owner/run/dropped.csv');
    const tus = { Authorization: `Bearer ${storage.serviceKey}`, apikey: storage.serviceKey, 'Tus-Resumable': '1.0.0' };
    const refused = await fetch(upload, { method: 'DELETE', headers: tus });
    expect([refused.status, await refused.text()]).toEqual([400, 'Cannot terminate an already completed upload']);
    expect(storage.finished()).toContain('exports/owner/run/dropped.csv');

    // A later attempt resumes the finished upload, finds its file differs, and drops it for good.
    const seen = storage.requests.length;
    const resumed = await sinkOf(64).open('owner/run/dropped.csv', { jobId: '14', resume: { bytes: 64, upload } });
    await expect(writeFrom(resumed, bytes(`${fileOf(20)}more\n`), 64)).rejects.toBeInstanceOf(ExportResumeError);
    await resumed.abort();
    expect(storage.finished()).not.toContain('exports/owner/run/dropped.csv');
    expect(storage.requests.slice(seen).filter((r) => r.method === 'DELETE').map((r) => [r.path, r.status])).toEqual([['/storage/v1/object/exports', 200]]);
    const sign = await fetch(`${storage.url}/storage/v1/object/sign/exports/owner/run/dropped.csv`, { method: 'POST', headers: { ...tus, 'Content-Type': 'application/json' }, body: '{"expiresIn":60}' });
    expect([sign.status, await sign.json()]).toEqual([400, { statusCode: '404', code: 'NoSuchKey', error: 'not_found', message: 'Object not found' }]);

    // Dropped before its end (as far as the writer knew), but the last chunk had landed: termination is refused, the object deleted.
    const racer = await sinkOf(64).open('owner/run/landed.csv', { jobId: '15' });
    await racer.write(data);
    const stale = await sinkOf(64).open('owner/run/landed.csv', { jobId: '15', resume: { bytes: 64, upload: racer.upload! } });
    await racer.commit();
    await stale.abort();
    expect(storage.finished()).not.toContain('exports/owner/run/landed.csv');
  });

  it('sends the service key on every request; a wrong key is refused as Storage refuses it (HTTP 400, statusCode "403"), and said so', async () => {
    // What Storage answers for a key that is not a valid JWT (src/http/plugins/jwt.ts: AccessDenied, rendered with HTTP 400).
    for (const [method, route] of [['POST', '/storage/v1/upload/resumable'], ['GET', '/storage/v1/bucket/exports'], ['POST', '/storage/v1/object/sign/exports/x.csv']]) {
      const res = await fetch(`${storage.url}${route}`, { method, headers: { Authorization: 'Bearer wrong-key-123', apikey: 'wrong-key-123' } });
      expect([res.status, await res.json()], `${method} ${route}`).toEqual([400, { statusCode: '403', code: 'AccessDenied', error: 'Unauthorized', message: 'Invalid Compact JWS' }]);
    }
    const bad = supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: 'wrong-key-123', chunkBytes: 64 });
    const refused = await bad.open('o/denied.csv', { jobId: '8' }).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(/statusCode 403.*Invalid Compact JWS.*refused the service key/);
    expect((refused as Error).message).not.toContain('wrong-key-123');
    const unlimited = supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: 'wrong-key-123', chunkBytes: 64, fileSizeLimit: null });
    await expect(unlimited.open('o/denied.csv', { jobId: '8' })).rejects.toThrow(/upload creation failed: HTTP 400 \(statusCode 403\) Unauthorized: Invalid Compact JWS/);
  });
});

// Needs a running Supabase stack (`supabase start`, or a project) with a private
// bucket named `exports`: set SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY to run it.
const storageConfigured = Boolean(process.env.SUPABASE_URL && process.env.SUPABASE_SERVICE_ROLE_KEY);
describe.skipIf(!storageConfigured)('Supabase Storage sink (real stack only)', () => {
  it('uploads a file in 6 MiB chunks, resumes it, and signs a download URL', async () => {
    const sink = supabaseStorageSink({ supabaseUrl: process.env.SUPABASE_URL!, serviceKey: process.env.SUPABASE_SERVICE_ROLE_KEY! });
    const data = bytes(fileOf(400_000)); // ~8 MB: two chunks
    const objectPath = `test/${crypto.randomUUID()}/x.csv`;
    const first = await sink.open(objectPath, { jobId: '1' });
    await writeFrom(first, data, 0, 1 << 20);
    const second = await sink.open(objectPath, { jobId: '1', resume: { bytes: 0, upload: first.upload! } });
    await writeFrom(second, data, 0, 1 << 20);
    const file = await second.commit();
    expect(file.url).toBeTruthy();
    const res = await fetch(file.url!);
    expect(await res.text()).toBe(text(data));
  });
});
