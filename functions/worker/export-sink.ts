// Where export files go: a local directory (embedded default, tests) or a
// private Supabase Storage bucket (deployed). Both are resumable: a writer
// stores the file chunk by chunk, an export checkpoints the part that is
// stored, and a later invocation opens a writer that continues from that
// checkpoint. A file becomes visible under its final name only when complete.
// Either way a finished file is located as `<bucket>/<object path>`: in
// Storage, that object; locally, `<export dir>/<bucket>/<object path>`
// (localExportPath), never a path of the server's.
import { mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';

/** The bucket export files go to (locally: the folder under the export directory). */
export const EXPORT_BUCKET = 'exports';

/** The location of a file: `<bucket>/<object path>`. */
export function exportLocation(bucket: string, objectPath: string): string {
  const location = `${bucket}/${objectPath}`;
  if (!parseExportLocation(location)) throw new Error(`not a bucket and object path: ${JSON.stringify(location).slice(0, 100)}`);
  return location;
}

/**
 * A location's bucket and object path, or null when it is not a location
 * (an absolute path, an empty, `.` or `..` segment, a backslash or NUL).
 */
export function parseExportLocation(location: string): { bucket: string; objectPath: string } | null {
  if (typeof location !== 'string' || /[\\\0]/.test(location)) return null;
  const slash = location.indexOf('/');
  const bucket = location.slice(0, slash);
  const objectPath = location.slice(slash + 1);
  if (slash <= 0 || !/^[a-z0-9_-]+$/i.test(bucket)) return null;
  if (objectPath.split('/').some((s) => s === '' || s === '.' || s === '..')) return null;
  return { bucket, objectPath };
}

/**
 * The file a local export's location names: `<rootDir>/<bucket>/<object path>`
 * (what localDirectorySink(rootDir) wrote; read it with e.g.
 * `readFile(localExportPath(exportDir, result.location))`). Throws for a string
 * that is not a location, so nothing outside rootDir is ever named.
 */
export function localExportPath(rootDir: string, location: string): string {
  const parsed = parseExportLocation(location);
  if (!parsed) throw new Error(`not an export location: ${JSON.stringify(location).slice(0, 100)}`);
  return path.join(path.resolve(rootDir), parsed.bucket, ...parsed.objectPath.split('/'));
}

export interface CommittedExport {
  /** Where the finished file is: `<bucket>/<object path>` (see localExportPath for local files). */
  location: string;
  /** A download URL, when the sink can make one. */
  url?: string;
  bytes: number;
}

/** Where a resumed writer continues: a point up to which an earlier writer had stored the file. */
export interface ResumePoint {
  /** The writer continues the file after this many bytes (the caller writes the bytes that follow). */
  bytes: number;
  /** The earlier writer's `upload` handle (null when the sink needs none). */
  upload: string | null;
}

export interface OpenOptions {
  /** The export job: its unfinished file is kept apart from other jobs'. */
  jobId: string;
  /** Continue an unfinished file instead of starting a new one. */
  resume?: ResumePoint | null;
  /** Aborts the writer's I/O at once (lease lost, isolate shutting down). */
  signal?: AbortSignal;
}

/**
 * The unfinished file cannot be continued (it is gone, expired, holds less
 * than the checkpoint, or was finished with other content): start a new file.
 */
export class ExportResumeError extends Error {
  override name = 'ExportResumeError';
}

/**
 * The file is larger than the destination accepts (the Storage bucket's file
 * size limit): no attempt can store it until an operator raises the limit.
 */
export class ExportTooLargeError extends Error {
  override name = 'ExportTooLargeError';
  constructor(
    readonly bucket: string,
    /** The limit in bytes, when known. */
    readonly limitBytes: number | null,
    /** What showed it (the size reached, or Storage's refusal). */
    detail: string,
  ) {
    super(
      `This export is larger than the ${limitBytes === null ? 'file size limit' : `${mib(limitBytes)} (${limitBytes} bytes)`} the "${bucket}" Storage bucket ` +
        `accepts per file (${detail}), so it was not stored and retrying cannot help. To export it, an operator raises the bucket's ` +
        `file_size_limit (Dashboard: Storage, bucket "${bucket}", Edit bucket; the exports bucket migration sets 50 MB) and, where it is lower, ` +
        `the project's upload size limit, which caps every bucket (Dashboard: Storage settings); then export again.`,
    );
  }
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(bytes % (1024 * 1024) === 0 ? 0 : 1)} MiB`;
}

/** A Storage error answer, read by what it means. */
export interface StorageErrorAnswer {
  httpStatus: number;
  /**
   * The status the error stands for: Storage answers most errors with HTTP 400
   * and the real one as the body's `statusCode` (a string: `"404"` for a
   * missing object, `"403"` for a refused key); else the HTTP status.
   */
  status: number;
  /** The body's `error` (`not_found`, `Unauthorized`, `Bucket not found`, ...), `code` (`NoSuchKey`, `AccessDenied`, ...) and `message`. */
  error: string | null;
  code: string | null;
  message: string | null;
}

/** Reads an error answer of Storage's (JSON `{statusCode, code, error, message}`, or TUS's plain text). */
export async function readStorageError(res: Response): Promise<StorageErrorAnswer> {
  const text = await res.text().catch(() => '');
  let body: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: TUS answers its own errors as text
  }
  const str = (v: unknown) => (typeof v === 'string' ? v.slice(0, 300) : typeof v === 'number' ? String(v) : null);
  const claimed = Number(str(body?.statusCode));
  return {
    httpStatus: res.status,
    status: Number.isInteger(claimed) && claimed >= 100 && claimed <= 599 ? claimed : res.status,
    error: str(body?.error),
    code: str(body?.code),
    message: body ? str(body.message) : text.trim().slice(0, 300) || null,
  };
}

/** The object is not there (Storage's NoSuchKey: statusCode "404", error "not_found"); a missing bucket is not this. */
export function storageObjectMissing(a: StorageErrorAnswer): boolean {
  return a.status === 404 && (a.error === 'not_found' || a.code === 'NoSuchKey');
}

/** Storage refused the key (bad, expired or rotated; or not a service key): statusCode "401"/"403", or HTTP 401/403 from the gateway. */
export function storageKeyRefused(a: StorageErrorAnswer): boolean {
  return a.status === 401 || a.status === 403 || a.httpStatus === 401 || a.httpStatus === 403;
}

/** For messages and logs (never the key: Storage does not echo it). */
export function describeStorageError(a: StorageErrorAnswer): string {
  const said = [a.error, a.message].filter(Boolean).join(': ');
  const what = `HTTP ${a.httpStatus}${a.status !== a.httpStatus ? ` (statusCode ${a.status})` : ''}${said ? ` ${said}` : ''}`;
  return storageKeyRefused(a) ? `${what}; Storage refused the service key (check SUPABASE_SECRET_KEYS / SUPABASE_SERVICE_ROLE_KEY)` : what;
}

export interface ExportWriter {
  /**
   * Appends bytes (buffered; each full chunk is stored as it fills). On a
   * resumed writer, bytes the destination already holds are skipped.
   */
  write(chunk: Uint8Array): Promise<void>;
  /** Stores the rest and publishes the complete file under its final name. */
  commit(): Promise<CommittedExport>;
  /** Drops the unfinished file for good. */
  abort(): Promise<void>;
  /**
   * Resumable writers: how many bytes of the file are stored for good. A writer
   * opened later with `resume.bytes` up to this value continues the file.
   * Absent: nothing is stored before commit (the export cannot checkpoint).
   */
  readonly durableBytes?: number;
  /** Resumable writers: what a checkpoint keeps to find the file again (the upload URL); null when the path suffices. */
  readonly upload?: string | null;
  /** Resumable writers: lets go, keeping the stored part for a later writer; buffered bytes are dropped. */
  close?(): Promise<void>;
}

export interface ExportSink {
  /** Opens a writer for the file that will be published at `objectPath`. */
  open(objectPath: string, opts: OpenOptions): Promise<ExportWriter>;
}

function abortError(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new Error('aborted');
}

/** Copies `data` into `buf` from `used`, calling `flush` whenever `buf` fills up. */
async function buffered(buf: Uint8Array, used: () => number, setUsed: (n: number) => void, data: Uint8Array, flush: () => Promise<void>): Promise<void> {
  let rest = data;
  while (rest.byteLength > 0) {
    const at = used();
    const n = Math.min(buf.byteLength - at, rest.byteLength);
    buf.set(rest.subarray(0, n), at);
    setUsed(at + n);
    rest = rest.subarray(n);
    if (at + n === buf.byteLength) await flush();
  }
}

export interface LocalSinkOptions {
  /** Bytes written (and synced) at a time; a checkpoint can only move on when a chunk is stored. Default 1 MiB. */
  chunkBytes?: number;
  /** The folder under `rootDir` the files go to, and their locations' bucket (default `exports`). */
  bucket?: string;
}

/**
 * Writes exports under `rootDir/<bucket>` (`<bucket>/<object path>` is the
 * location, see localExportPath): appends to `<file>.partial-<job>` chunk by
 * chunk (each synced), and renames it to `<file>` when complete. A resumed
 * writer truncates the partial file to the checkpoint and appends from there;
 * a file published by an attempt that then lost the job is taken back and
 * resumed the same way (as a finished TUS upload is), never left behind.
 */
export function localDirectorySink(rootDir: string, opts: LocalSinkOptions = {}): ExportSink {
  const chunkBytes = opts.chunkBytes ?? 1024 * 1024;
  const bucket = opts.bucket ?? EXPORT_BUCKET;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw new Error('localDirectorySink: chunkBytes must be a positive integer');
  return {
    async open(objectPath, { jobId, resume, signal }) {
      const location = exportLocation(bucket, objectPath);
      const finalPath = localExportPath(rootDir, location);
      const partialPath = `${finalPath}.partial-${jobId}`;
      await mkdir(path.dirname(finalPath), { recursive: true });
      let stored = 0;
      if (resume && resume.bytes > 0) {
        let size = await stat(partialPath).then((s) => s.size, () => -1);
        // Published by an attempt whose completion was then refused (its lease ended between publishing and
        // completing): no job result names the file, so it becomes the partial file again and is resumed.
        if (size < 0 && (await rename(finalPath, partialPath).then(() => true, () => false))) {
          size = await stat(partialPath).then((s) => s.size, () => -1);
        }
        if (size < resume.bytes) {
          throw new ExportResumeError(size < 0 ? 'the partial export file is gone' : `the partial export file has ${size} bytes, the checkpoint ${resume.bytes}`);
        }
        if (size > resume.bytes) await truncate(partialPath, resume.bytes);
        stored = resume.bytes;
      } else {
        await (await open(partialPath, 'w')).close();
      }
      const buf = new Uint8Array(chunkBytes);
      let used = 0;
      // The file is opened for each chunk, never created: a writer whose partial
      // file was published (renamed) or removed meanwhile fails instead of writing on.
      const store = async (final: boolean) => {
        if (signal?.aborted) throw abortError(signal);
        const handle = await open(partialPath, 'r+');
        try {
          for (let done = 0; done < used; ) done += (await handle.write(buf, done, used - done, stored + done)).bytesWritten;
          if (final) await handle.truncate(stored + used);
          await handle.datasync();
        } finally {
          await handle.close();
        }
        stored += used;
        used = 0;
      };
      return {
        get durableBytes() {
          return stored;
        },
        upload: null,
        write: (chunk) => buffered(buf, () => used, (n) => (used = n), chunk, () => store(false)),
        async commit() {
          await store(true);
          await rename(partialPath, finalPath);
          return { location, bytes: stored };
        },
        async close() {
          used = 0;
        },
        async abort() {
          used = 0;
          await rm(partialPath, { force: true });
        },
      };
    },
  };
}

export interface StorageSinkOptions {
  supabaseUrl: string;
  serviceKey: string;
  bucket?: string;
  signedUrlSeconds?: number;
  /** Bytes per upload request; Supabase Storage wants 6 MiB (the default) for all but the last. */
  chunkBytes?: number;
  /**
   * The most bytes a file may have (the bucket's file_size_limit, or the
   * project's upload limit where that is lower). Absent: the bucket's
   * file_size_limit, read from Storage (GET /storage/v1/bucket/<bucket>) at
   * most every 5 minutes. null: no known limit. A 413 from Storage fails the
   * export for good either way.
   */
  fileSizeLimit?: number | null;
  fetch?: typeof fetch;
}

const TUS_VERSION = '1.0.0';
/** How long a bucket's file_size_limit is trusted before it is read again. */
const LIMIT_TTL_MS = 5 * 60_000;
/** Cleanup requests (abort) are not tied to the job's signal, but do not hang either. */
const CLEANUP_TIMEOUT_MS = 30_000;

/**
 * Streams exports into a private Supabase Storage bucket (default `exports`)
 * with resumable (TUS) uploads: the length is declared with the last chunk
 * (Upload-Defer-Length), so the object exists only once the whole file is
 * uploaded; then a download URL is signed. Memory: one chunk.
 *
 * Every request but the last carries exactly `chunkBytes` (resends too: the
 * hosted S3 backend needs multipart parts of at least 5 MiB). A file that
 * would exceed the bucket's file_size_limit fails with ExportTooLargeError
 * before the chunk that crosses it is sent (Storage itself would take the
 * upload and refuse only that chunk, as the length is deferred). A writer
 * dropped for good removes what it stored: the unfinished upload (TUS
 * termination) or, once finished, the object (Storage refuses to terminate
 * finished uploads; the object is deleted through the Storage API).
 */
export function supabaseStorageSink(opts: StorageSinkOptions): ExportSink {
  const bucket = opts.bucket ?? EXPORT_BUCKET;
  const chunkBytes = opts.chunkBytes ?? 6 * 1024 * 1024;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw new Error('supabaseStorageSink: chunkBytes must be a positive integer');
  if (opts.fileSizeLimit != null && !(Number.isSafeInteger(opts.fileSizeLimit) && opts.fileSizeLimit > 0)) {
    throw new Error('supabaseStorageSink: fileSizeLimit must be a positive integer or null');
  }
  const doFetch = opts.fetch ?? fetch;
  const base = `${opts.supabaseUrl.replace(/\/$/, '')}/storage/v1`;
  const baseHost = new URL(base).host;
  const auth = { Authorization: `Bearer ${opts.serviceKey}`, apikey: opts.serviceKey };
  const tus = { ...auth, 'Tus-Resumable': TUS_VERSION, 'x-upsert': 'true' };
  const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
  const encodedPath = (p: string) => p.split('/').map(encodeURIComponent).join('/');
  const failure = async (res: Response) => describeStorageError(await readStorageError(res));

  /** The upload's state on the server: bytes stored and, once declared, its length. */
  const head = async (url: string, signal?: AbortSignal) => {
    const res = await doFetch(url, { method: 'HEAD', headers: tus, signal });
    if (res.status === 404 || res.status === 410) throw new ExportResumeError(`the upload is gone (HTTP ${res.status})`);
    if (!res.ok) throw new Error(`Storage upload status failed with HTTP ${res.status}`);
    const offset = Number(res.headers.get('upload-offset'));
    const lengthHeader = res.headers.get('upload-length');
    if (!Number.isSafeInteger(offset) || offset < 0) throw new Error('Storage upload status has no valid Upload-Offset');
    return { offset, length: lengthHeader === null ? null : Number(lengthHeader) };
  };

  let limitCache: { at: number; value: Promise<number | null> } | null = null;
  /** The bucket's file_size_limit (null: none set); read from Storage unless configured. */
  const fileSizeLimit = (signal?: AbortSignal): Promise<number | null> => {
    if (opts.fileSizeLimit !== undefined) return Promise.resolve(opts.fileSizeLimit);
    if (limitCache && Date.now() - limitCache.at < LIMIT_TTL_MS) return limitCache.value;
    const value = (async () => {
      const res = await doFetch(`${base}/bucket/${encodeURIComponent(bucket)}`, { headers: auth, signal });
      if (!res.ok) throw new Error(`Storage bucket "${bucket}" could not be read: ${await failure(res)}`);
      const limit = ((await res.json()) as { file_size_limit?: unknown }).file_size_limit;
      const n = Number(limit);
      return limit === null || limit === undefined || !Number.isSafeInteger(n) || n <= 0 ? null : n;
    })();
    const entry = { at: Date.now(), value };
    limitCache = entry;
    value.catch(() => {
      if (limitCache === entry) limitCache = null;
    });
    return value;
  };

  return {
    async open(objectPath, { resume, signal }) {
      const location = exportLocation(bucket, objectPath);
      // Known before anything is uploaded: a file that cannot fit fails before the chunk that would cross it is sent.
      const limit = await fileSizeLimit(signal);
      const tooLarge = (detail: string) => new ExportTooLargeError(bucket, limit, detail);
      let url: string;
      /** Bytes the server holds. */
      let offset: number;
      /** The declared length (null while deferred). */
      let length: number | null;
      /** Position in the file of the next byte the caller writes. */
      let position: number;
      if (resume) {
        if (!resume.upload) throw new ExportResumeError('the checkpoint has no upload to resume');
        url = resume.upload;
        // The service key goes only to our own Storage host.
        if (new URL(url, base).host !== baseHost) throw new ExportResumeError('the checkpoint\'s upload is not on this Storage host');
        ({ offset, length } = await head(url, signal));
        if (offset < resume.bytes) throw new ExportResumeError(`the upload holds ${offset} bytes, the checkpoint ${resume.bytes}`);
        if (limit !== null && resume.bytes > limit) throw tooLarge(`it had reached ${resume.bytes} bytes`);
        position = resume.bytes;
      } else {
        const metadata = [
          ['bucketName', bucket],
          ['objectName', objectPath],
          ['contentType', 'text/csv; charset=utf-8'],
          ['cacheControl', '3600'],
        ].map(([k, v]) => `${k} ${b64(v!)}`).join(',');
        const res = await doFetch(`${base}/upload/resumable`, {
          method: 'POST',
          headers: { ...tus, 'Upload-Defer-Length': '1', 'Upload-Metadata': metadata },
          signal,
        });
        const created = res.headers.get('location');
        if (res.status === 413) throw tooLarge(`Storage refused the upload: ${await failure(res)}`);
        if (res.status !== 201 || !created) throw new Error(`Storage upload creation failed: ${await failure(res)}`);
        await res.body?.cancel();
        url = new URL(created, `${base}/upload/resumable`).toString();
        if (new URL(url).host !== baseHost) throw new Error('Storage answered with an upload URL on another host');
        offset = 0;
        length = null;
        position = 0;
      }

      const buf = new Uint8Array(chunkBytes);
      /** Bytes in buf: the file's bytes from `offset` on. */
      let used = 0;

      /** Adopts the server's offset after a conflict or a failed request: drops what it already has. */
      const resync = async () => {
        const state = await head(url, signal);
        if (state.offset < offset) throw new Error(`the upload went back from ${offset} to ${state.offset} bytes`);
        const ahead = state.offset - offset;
        if (ahead >= used) {
          used = 0; // the server is at or past the end of the buffer: later writes skip up to its offset
        } else {
          buf.copyWithin(0, ahead, used);
          used -= ahead;
        }
        offset = state.offset;
        length = state.length;
      };

      /** Uploads the buffer (the whole file's last bytes when `total` is given). */
      const send = async (total: number | null) => {
        for (let attempt = 1; ; attempt++) {
          if (signal?.aborted) throw abortError(signal);
          const headers: Record<string, string> = { ...tus, 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': String(offset) };
          if (total !== null && length === null) headers['Upload-Length'] = String(total);
          let res: Response | null = null;
          try {
            res = await doFetch(url, { method: 'PATCH', headers, body: buf.subarray(0, used), signal });
          } catch (e) {
            if (signal?.aborted || attempt >= 3) throw e;
          }
          const status = res?.status ?? 0;
          if (status === 204 || status === 200) {
            const newOffset = Number(res!.headers.get('upload-offset'));
            await res!.body?.cancel();
            if (!Number.isSafeInteger(newOffset) || newOffset !== offset + used) throw new Error(`Storage stored up to ${newOffset}, expected ${offset + used}`);
            offset = newOffset;
            used = 0;
            if (total !== null) length = total;
            return;
          }
          // The bucket's limit (or the project's, which we may not know) is crossed: no retry can store this file.
          if (status === 413) throw tooLarge(`Storage refused the bytes from ${offset} on: ${await failure(res!)}`);
          if (status === 404 || status === 410) {
            await res!.body?.cancel();
            throw new ExportResumeError(`the upload is gone (HTTP ${status})`);
          }
          // 409: someone else (a stale attempt writing the same bytes) moved the offset; other failures: see what landed.
          if (status !== 0 && status !== 409 && status !== 423 && status < 500) throw new Error(`Storage upload failed: ${await failure(res!)}`);
          await res?.body?.cancel();
          if (attempt >= 3) throw new Error(`Storage upload failed with HTTP ${status || 'network error'} three times`);
          await resync();
          if (total !== null && offset > total) throw new ExportResumeError(`the upload holds ${offset} bytes, this file has ${total}`);
          if (used === 0 && (total === null || length === total)) return;
          if (length !== null && total !== null && length !== total) throw new ExportResumeError(`the upload was finished with ${length} bytes, this file has ${total}`);
          // Part of a chunk that is not the last landed: its rest waits for the bytes that follow, so that
          // every request but the last is a whole chunk (resends too).
          if (total === null && used < buf.byteLength) return;
        }
      };

      /** Deletes the finished object through the Storage API (never by SQL: Storage removes the file with the row). */
      const deleteObject = async () => {
        const res = await doFetch(`${base}/object/${encodeURIComponent(bucket)}`, {
          method: 'DELETE',
          headers: { ...auth, 'Content-Type': 'application/json' },
          body: JSON.stringify({ prefixes: [objectPath] }),
          signal: AbortSignal.timeout(CLEANUP_TIMEOUT_MS),
        });
        if (!res.ok) throw new Error(`Storage did not delete ${location}: ${await failure(res)}`);
        await res.body?.cancel();
      };

      return {
        get durableBytes() {
          return offset;
        },
        upload: url,
        async write(chunk) {
          let data = chunk;
          if (position < offset) {
            // A resumed upload may be ahead of its checkpoint (stopped after a chunk, before the checkpoint): skip what it has.
            const skip = Math.min(offset - position, data.byteLength);
            data = data.subarray(skip);
            position += skip;
          }
          if (data.byteLength === 0) return;
          if (length !== null && position + data.byteLength > length) {
            throw new ExportResumeError(`the upload was finished with ${length} bytes, this file is longer`);
          }
          if (limit !== null && position + data.byteLength > limit) {
            used = 0;
            throw tooLarge(`it reached ${position + data.byteLength} bytes`);
          }
          position += data.byteLength;
          await buffered(buf, () => used, (n) => (used = n), data, () => send(null));
        },
        async commit() {
          if (position < offset || (length !== null && length !== position)) {
            throw new ExportResumeError(`the upload holds ${length ?? offset} bytes, this file has ${position}`);
          }
          if (length === null || offset < length) await send(position);
          const signed = await doFetch(`${base}/object/sign/${encodeURIComponent(bucket)}/${encodedPath(objectPath)}`, {
            method: 'POST',
            headers: { ...auth, 'Content-Type': 'application/json' },
            body: JSON.stringify({ expiresIn: opts.signedUrlSeconds ?? 7 * 24 * 3600 }),
            signal,
          });
          if (!signed.ok) throw new Error(`Storage sign failed: ${await failure(signed)}`);
          const body = (await signed.json()) as { signedURL?: unknown };
          const signedUrl = typeof body.signedURL === 'string' ? `${base}${body.signedURL}` : undefined;
          return { location, url: signedUrl, bytes: position };
        },
        async close() {
          used = 0;
        },
        async abort() {
          used = 0;
          if (length === null || offset < length) {
            // Unfinished (as far as this writer knows): terminate the upload; no object exists yet.
            const res = await doFetch(url, { method: 'DELETE', headers: tus, signal: AbortSignal.timeout(CLEANUP_TIMEOUT_MS) });
            if (res.status === 204 || res.status === 404 || res.status === 410) {
              await res.body?.cancel();
              return;
            }
            const answer = await readStorageError(res);
            // Storage terminates no finished upload ("Cannot terminate an already completed upload", HTTP 400):
            // its last chunk landed after all, and the object is there. Anything else is a real failure.
            if (res.status !== 400 || storageKeyRefused(answer)) throw new Error(`Storage did not drop the upload of ${location}: ${describeStorageError(answer)}`);
          }
          await deleteObject();
        },
      };
    },
  };
}
