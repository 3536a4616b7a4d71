// A loopback stand-in for the parts of Supabase Storage the export sink and the
// orchestrator's downloads use, answering as supabase/storage's storage-api
// does (src/http/routes/tus, src/http/error-handler.ts, src/internal/errors):
//  - resumable uploads served by the real TUS server (@tus/server with its file
//    store, the library Storage runs), configured as Storage configures it:
//    finished uploads cannot be terminated (400), and the bucket's
//    file_size_limit is the upload's maximum size, so with a deferred length
//    the upload is created (201) and only the PATCH that crosses the limit is
//    refused (413);
//  - GET /storage/v1/bucket/<id> (the bucket, with its file_size_limit);
//  - POST /storage/v1/object/sign/<bucket>/<path> and GET of the signed URL,
//    for objects whose upload has finished;
//  - DELETE /storage/v1/object/<bucket> ({"prefixes": [...]}) and
//    DELETE /storage/v1/object/<bucket>/<path>.
// Requests must carry the service key; a wrong one is answered as Storage
// answers a key that is not a valid JWT: HTTP 400 with
// {"statusCode":"403","error":"Unauthorized","message":"Invalid Compact JWS"}.
// Object errors are HTTP 400 with the real status as the body's statusCode
// ("404" + "not_found" for a missing object).
// Given a database (`sql`), buckets are read from storage.buckets, finished
// objects are rows of storage.objects, and deleting removes the row as Storage
// does: in a transaction that sets storage.allow_delete_query (a direct DELETE
// is refused by storage.protect_delete()).
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';
import type { Sql } from '../../shared/db.ts';

export interface StandInRequest {
  method: string;
  path: string;
  /** Upload-Offset of a PATCH. */
  offset?: number;
  /** Upload-Length sent with a request. */
  length?: number;
  /** Content-Length of the request's body. */
  bytes?: number;
  /** The HTTP status answered (once answered). */
  status?: number;
}

export interface StandInOptions {
  /** A database with Storage's schema: buckets from storage.buckets, objects as rows of storage.objects. */
  sql?: Sql;
  /** Without `sql`: the buckets and their file_size_limit (default: `exports`, 50 MB as its migration sets). */
  buckets?: Record<string, { fileSizeLimit: number | null }>;
  /** The server's own upload limit (Storage's FILE_SIZE_LIMIT / the project's), capping every bucket's; default none. */
  uploadFileSizeLimit?: number;
}

export interface StorageStandIn {
  /** Plays SUPABASE_URL. */
  url: string;
  serviceKey: string;
  /** Requests seen, in order. */
  requests: StandInRequest[];
  /** Finished objects, by `bucket/objectName`. */
  finished(): string[];
  /** The bytes of a finished object, or null. */
  object(bucketAndName: string): Promise<Buffer | null>;
  /** Bytes an unfinished upload holds (its URL as the sink got it). */
  uploadOffset(uploadUrl: string): Promise<number>;
  /** Without `sql`: sets a bucket's file_size_limit (null: none). */
  setFileSizeLimit(bucket: string, bytes: number | null): void;
  /** Called with each request before it is handled (a test may abort the client there). */
  onRequest: ((req: StandInRequest) => void) | null;
  close(): Promise<void>;
}

const TUS_PATH = '/storage/v1/upload/resumable';
const OBJECT_PATH = '/storage/v1/object/';
const BUCKET_PATH = '/storage/v1/bucket/';

/** Storage's error answers: HTTP 400 (500 for 500s), the real status in the body. */
const ERRORS = {
  invalidJwt: { statusCode: '403', code: 'AccessDenied', error: 'Unauthorized', message: 'Invalid Compact JWS' },
  noSuchKey: { statusCode: '404', code: 'NoSuchKey', error: 'not_found', message: 'Object not found' },
  noSuchBucket: { statusCode: '404', code: 'NoSuchBucket', error: 'Bucket not found', message: 'Bucket not found' },
  invalidSignature: { statusCode: '400', code: 'InvalidSignature', error: 'InvalidSignature', message: 'Invalid signature' },
  invalidRequest: { statusCode: '400', code: 'InvalidRequest', error: 'InvalidRequest', message: 'body must have required property \'prefixes\'' },
};

export async function startStorageStandIn(opts: StandInOptions = {}): Promise<StorageStandIn> {
  const { sql } = opts;
  const dir = await mkdtemp(path.join(tmpdir(), 'storage-stand-in-'));
  const serviceKey = `service-${randomUUID()}`;
  const buckets = new Map(Object.entries(opts.buckets ?? { exports: { fileSizeLimit: 52428800 } }));
  const finished = new Map<string, string>(); // bucket/objectName -> upload id
  const signed = new Map<string, string>(); // token -> bucket/objectName
  const store = new FileStore({ directory: dir });

  /** The bucket as Storage reads it, or null when there is none. */
  const bucketOf = async (id: string): Promise<{ id: string; fileSizeLimit: number | null } | null> => {
    if (sql) {
      const [row] = await sql`select id, file_size_limit from storage.buckets where id = ${id}`;
      return row ? { id, fileSizeLimit: row.file_size_limit === null ? null : Number(row.file_size_limit) } : null;
    }
    const b = buckets.get(id);
    return b ? { id, fileSizeLimit: b.fileSizeLimit } : null;
  };
  /** As Storage's maxSize: the bucket's limit (or the server's), never above the server's. */
  const maxSize = async (bucket: string | undefined): Promise<number> => {
    const global = opts.uploadFileSizeLimit ?? 0;
    const limit = bucket ? ((await bucketOf(bucket))?.fileSizeLimit ?? 0) : 0;
    if (!limit) return global;
    return global && global < limit ? global : limit;
  };

  const tus = new Server({
    path: TUS_PATH,
    datastore: store,
    // As Storage: a finished upload is an object, removed only through the object API.
    disableTerminationForFinishedUploads: true,
    async maxSize(_req, uploadId) {
      if (!uploadId) return opts.uploadFileSizeLimit ?? 0;
      const upload = await store.getUpload(uploadId).catch(() => null);
      return maxSize(upload?.metadata?.bucketName ?? undefined);
    },
    async onUploadCreate(_req, upload) {
      const bucket = upload.metadata?.bucketName;
      if (!bucket || !(await bucketOf(bucket))) throw { status_code: 404, body: 'Bucket not found' };
      return {};
    },
    async onUploadFinish(_req, upload) {
      const md = upload.metadata ?? {};
      const name = `${md.bucketName}/${md.objectName}`;
      if (sql) {
        await sql`insert into storage.objects (bucket_id, name, metadata, version)
          values (${md.bucketName!}, ${md.objectName!}, ${sql.json({ size: upload.size ?? 0, mimetype: md.contentType ?? null })}, ${upload.id})
          on conflict (bucket_id, name) do update set metadata = excluded.metadata, version = excluded.version, updated_at = now()`;
      }
      finished.set(name, upload.id);
      return {};
    },
  });

  /** Deletes objects as Storage does: the rows in a transaction allowed to delete, then their files. */
  const deleteObjects = async (bucket: string, names: string[]): Promise<string[]> => {
    let deleted: string[];
    if (sql) {
      deleted = await sql.begin(async (tx) => {
        await tx`select set_config('storage.allow_delete_query', 'true', true)`;
        const rows = await tx`delete from storage.objects where bucket_id = ${bucket} and name = any(${names}) returning name`;
        return rows.map((r) => r.name as string);
      });
    } else {
      deleted = names.filter((n) => finished.has(`${bucket}/${n}`));
    }
    for (const name of deleted) {
      const id = finished.get(`${bucket}/${name}`);
      finished.delete(`${bucket}/${name}`);
      if (id) await store.remove(id).catch(() => undefined);
    }
    return deleted;
  };

  const requests: StandInRequest[] = [];
  const standIn: StorageStandIn = {
    url: '',
    serviceKey,
    requests,
    onRequest: null,
    finished: () => [...finished.keys()].sort(),
    async object(name) {
      const id = finished.get(name);
      return id ? await readFile(path.join(dir, id)) : null;
    },
    async uploadOffset(uploadUrl) {
      const id = decodeURIComponent(new URL(uploadUrl).pathname.slice(TUS_PATH.length + 1));
      return (await store.getUpload(id)).offset;
    },
    setFileSizeLimit(bucket, bytes) {
      if (sql) throw new Error('the stand-in reads buckets from the database: update storage.buckets');
      buckets.set(bucket, { fileSizeLimit: bytes });
    },
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const readJson = (req: http.IncomingMessage) =>
    new Promise<unknown>((resolve) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString('utf8')));
      req.on('end', () => {
        try {
          resolve(JSON.parse(text));
        } catch {
          resolve(null);
        }
      });
    });

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => {
    const signedGet = req.method === 'GET' && url.pathname.startsWith(`${OBJECT_PATH}sign/`);
    if (!signedGet && (req.headers.authorization !== `Bearer ${serviceKey}` || req.headers.apikey !== serviceKey)) {
      req.resume();
      return json(res, 400, ERRORS.invalidJwt);
    }
    if (url.pathname === TUS_PATH || url.pathname.startsWith(`${TUS_PATH}/`)) {
      await tus.handle(req, res);
      return;
    }
    if (req.method === 'GET' && url.pathname.startsWith(BUCKET_PATH)) {
      const bucket = await bucketOf(decodeURIComponent(url.pathname.slice(BUCKET_PATH.length)));
      if (!bucket) return json(res, 400, ERRORS.noSuchBucket);
      return json(res, 200, { id: bucket.id, name: bucket.id, owner: '', public: false, file_size_limit: bucket.fileSizeLimit, allowed_mime_types: null });
    }
    if (url.pathname.startsWith(`${OBJECT_PATH}sign/`)) {
      const name = decodeURIComponent(url.pathname.slice(`${OBJECT_PATH}sign/`.length));
      if (req.method === 'POST') {
        req.resume();
        if (!finished.has(name)) return json(res, 400, ERRORS.noSuchKey);
        const token = randomUUID();
        signed.set(token, name);
        return json(res, 200, { signedURL: `/object/sign/${name.split('/').map(encodeURIComponent).join('/')}?token=${token}` });
      }
      if (req.method === 'GET') {
        if (signed.get(url.searchParams.get('token') ?? '') !== name) return json(res, 400, ERRORS.invalidSignature);
        const bytes = await standIn.object(name);
        if (!bytes) return json(res, 400, ERRORS.noSuchKey);
        res.writeHead(200, { 'content-type': 'text/csv', 'content-length': String(bytes.byteLength) });
        res.end(bytes);
        return;
      }
    }
    if (req.method === 'DELETE' && url.pathname.startsWith(OBJECT_PATH)) {
      const rest = url.pathname.slice(OBJECT_PATH.length);
      const slash = rest.indexOf('/');
      if (slash < 0) {
        // DELETE /object/<bucket> {"prefixes": [names]}: the objects of those exact names; answers those deleted.
        const bucket = decodeURIComponent(rest);
        const body = (await readJson(req)) as { prefixes?: unknown } | null;
        const prefixes = body?.prefixes;
        if (!Array.isArray(prefixes) || prefixes.length === 0 || !prefixes.every((p) => typeof p === 'string')) return json(res, 400, ERRORS.invalidRequest);
        if (!(await bucketOf(bucket))) return json(res, 400, ERRORS.noSuchBucket);
        const deleted = await deleteObjects(bucket, prefixes as string[]);
        return json(res, 200, deleted.map((name) => ({ name, bucket_id: bucket })));
      }
      req.resume();
      const bucket = decodeURIComponent(rest.slice(0, slash));
      const name = decodeURIComponent(rest.slice(slash + 1));
      const deleted = await deleteObjects(bucket, [name]);
      if (deleted.length === 0) return json(res, 400, ERRORS.noSuchKey);
      return json(res, 200, { message: 'Successfully deleted' });
    }
    req.resume();
    json(res, 404, { statusCode: 404, error: 'Not Found', message: `Route ${req.method}:${url.pathname} not found` });
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const num = (h: string) => (req.headers[h] === undefined ? undefined : Number(req.headers[h]));
    const seen: StandInRequest = { method: req.method ?? '', path: url.pathname, offset: num('upload-offset'), length: num('upload-length'), bytes: num('content-length') };
    requests.push(seen);
    res.once('finish', () => (seen.status = res.statusCode));
    standIn.onRequest?.(seen);
    handle(req, res, url).catch((e: unknown) => {
      if (!res.headersSent) json(res, 500, { statusCode: '500', code: 'InternalError', error: 'Internal', message: String(e) });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return standIn;
}
