// The Storage export sink: files streamed into a private Supabase Storage
// bucket with resumable (TUS) uploads, published only once complete.
import { EXPORT_BUCKET, exportLocation } from '../../shared/export-location.ts';
import { describeStorageError, readStorageError, storageKeyRefused } from '../../shared/storage-errors.ts';
import { abortError, buffered, ExportResumeError, ExportTooLargeError, type ExportSink, type ExportWriter } from './export-sink.ts';

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
