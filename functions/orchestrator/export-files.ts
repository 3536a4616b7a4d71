// Export files as the orchestrator hands them to their owners: from the local
// export directory (npm start, tests) or from the private Storage bucket
// (deployed), where every read also issues a fresh signed URL. Ownership is
// decided before these are called (RLS on the job row). A file is located as
// `<bucket>/<object path>` either way (what the worker's sinks record).
import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { localExportPath, parseExportLocation } from '../../shared/export-location.ts';
import { describeStorageError, readStorageError, storageKeyRefused, storageObjectMissing, type StorageErrorAnswer } from '../../shared/storage-errors.ts';
import type { ExportFile, ExportFiles } from './deps.ts';

export type { ExportFile, ExportFiles };

/** The file is not (or no longer) there: only Storage's "object not found" (or a missing local file) means this. */
export class ExportFileGoneError extends Error {
  override name = 'ExportFileGoneError';
}

/**
 * The store could not be asked: STORAGE_MISCONFIGURED when it refused this
 * server's key (bad, expired, rotated, or not a service key) or lacks the
 * bucket, which an operator must fix; STORAGE_UNAVAILABLE when it failed or
 * did not answer. The file may well be there.
 */
export class ExportStoreError extends Error {
  override name = 'ExportStoreError';
  constructor(
    readonly code: 'STORAGE_MISCONFIGURED' | 'STORAGE_UNAVAILABLE',
    message: string,
  ) {
    super(message);
  }
}

const CHUNK = 64 * 1024;

/**
 * Files under `rootDir` (the worker's EXPORT_DIR): a location names
 * `<rootDir>/<bucket>/<object path>`. An absolute path under `rootDir` (what
 * results recorded before locations were bucket paths) is read too; anything
 * outside it is never opened.
 */
export function localExportFiles(rootDir: string): ExportFiles {
  const root = path.resolve(rootDir);
  const fileOf = (location: string): string | null => {
    if (parseExportLocation(location)) return localExportPath(root, location);
    if (typeof location !== 'string' || !path.isAbsolute(location)) return null;
    const file = path.resolve(location);
    return file.startsWith(root + path.sep) ? file : null;
  };
  return {
    async signedUrl() {
      return null;
    },
    shownLocation(location) {
      if (parseExportLocation(location)) return location;
      // An older result's absolute path: shown relative to the export directory, or only its name.
      const file = fileOf(location);
      return file ? path.relative(root, file).split(path.sep).join('/') : path.basename(String(location));
    },
    async open(location) {
      const file = fileOf(location);
      if (!file) return null;
      const info = await stat(file).catch(() => null);
      if (!info?.isFile()) return null;
      const handle = await open(file, 'r');
      let closed = false;
      const close = async () => {
        if (closed) return;
        closed = true;
        await handle.close().catch(() => {});
      };
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const buf = new Uint8Array(CHUNK);
            const { bytesRead } = await handle.read(buf, 0, CHUNK, null);
            if (bytesRead === 0) {
              await close();
              controller.close();
            } else controller.enqueue(buf.subarray(0, bytesRead));
          } catch (e) {
            await close();
            controller.error(e);
          }
        },
        async cancel() {
          await close();
        },
      });
      return { body, size: info.size };
    },
  };
}

export interface StorageExportFilesOptions {
  supabaseUrl: string;
  serviceKey: string;
  /** How long a signed URL stays valid (default 3600 s). */
  expiresInSeconds?: number;
  fetch?: typeof fetch;
}

/**
 * Files in Supabase Storage, located as `<bucket>/<object path>` (what the
 * worker's Storage sink records). Signs with the service key:
 * `POST /storage/v1/object/sign/<bucket>/<path>` → `{signedURL}`.
 *
 * Storage answers most errors with HTTP 400 and what they mean in the JSON
 * body's `statusCode` (a string): `"404"` with `not_found` is a missing
 * object, `"403"` a refused key (`Invalid Compact JWS`, an expired or rotated
 * key). Only the first means the file is gone.
 */
export function storageExportFiles(opts: StorageExportFilesOptions): ExportFiles {
  const base = `${opts.supabaseUrl.replace(/\/$/, '')}/storage/v1`;
  const doFetch = opts.fetch ?? fetch;
  const expiresIn = opts.expiresInSeconds ?? 3600;
  const auth = { Authorization: `Bearer ${opts.serviceKey}`, apikey: opts.serviceKey };

  /** A request to Storage; a failure to get an answer at all is STORAGE_UNAVAILABLE. */
  const request = async (what: string, url: string, init?: RequestInit): Promise<Response> => {
    try {
      return await doFetch(url, init);
    } catch (e) {
      throw new ExportStoreError('STORAGE_UNAVAILABLE', `Storage ${what} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  /** What an error answer means for the file: gone, or the store's own failure. */
  const refusal = (what: string, answer: StorageErrorAnswer): ExportStoreError => {
    const misconfigured = storageKeyRefused(answer) || (answer.status === 404 && /bucket/i.test(`${answer.error} ${answer.code}`));
    return new ExportStoreError(misconfigured ? 'STORAGE_MISCONFIGURED' : 'STORAGE_UNAVAILABLE', `Storage ${what} failed: ${describeStorageError(answer)}`);
  };
  /**
   * "Object not found" for a file the worker stored: true unless the bucket
   * itself is out of sight, which means the key is not a service key (RLS
   * hides every object from other roles) or the bucket is missing.
   */
  const confirmGone = async (bucket: string): Promise<void> => {
    const res = await doFetch(`${base}/bucket/${encodeURIComponent(bucket)}`, { headers: auth }).catch(() => null);
    if (!res || res.ok) return void (await res?.body?.cancel());
    const answer = await readStorageError(res);
    if (storageKeyRefused(answer) || (answer.status === 404 && /bucket/i.test(`${answer.error} ${answer.code} ${answer.message}`))) {
      throw new ExportStoreError('STORAGE_MISCONFIGURED', `Storage cannot see the bucket "${bucket}" with this key: ${describeStorageError(answer)}`);
    }
  };

  const sign = async (location: string) => {
    const parsed = parseExportLocation(location);
    if (!parsed) throw new ExportFileGoneError(`not a Storage location: ${JSON.stringify(location).slice(0, 100)}`);
    const objectPath = parsed.objectPath.split('/').map(encodeURIComponent).join('/');
    const res = await request('sign', `${base}/object/sign/${encodeURIComponent(parsed.bucket)}/${objectPath}`, {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ expiresIn }),
    });
    if (!res.ok) {
      const answer = await readStorageError(res);
      if (storageObjectMissing(answer)) {
        await confirmGone(parsed.bucket);
        throw new ExportFileGoneError(`${location} is not in Storage`);
      }
      throw refusal('sign', answer);
    }
    const signed = (await res.json().catch(() => ({}))) as { signedURL?: unknown };
    if (typeof signed.signedURL !== 'string') throw new ExportStoreError('STORAGE_UNAVAILABLE', 'Storage sign returned no signedURL');
    return { url: `${base}${signed.signedURL}`, expiresAt: new Date(Date.now() + expiresIn * 1000).toISOString() };
  };
  return {
    signedUrl: sign,
    shownLocation: (location) => location,
    async open(location) {
      let signed;
      try {
        signed = await sign(location);
      } catch (e) {
        if (e instanceof ExportFileGoneError) return null;
        throw e;
      }
      const res = await request('download', signed.url);
      if (!res.ok || !res.body) {
        const answer = await readStorageError(res);
        if (storageObjectMissing(answer)) return null; // deleted between signing and reading
        throw refusal('download', answer);
      }
      const size = Number(res.headers.get('content-length') ?? NaN);
      return { body: res.body, size: Number.isFinite(size) ? size : undefined };
    },
  };
}
