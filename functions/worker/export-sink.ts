// Where export files go: a local directory (embedded default, tests) or a
// private Supabase Storage bucket (deployed). A file becomes visible under its
// final name only when complete; a crashed attempt leaves at most a partial file.
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

export interface CommittedExport {
  /** Where the finished file is (a local path, or bucket/object path). */
  location: string;
  /** A download URL, when the sink can make one. */
  url?: string;
  bytes: number;
}

export interface ExportWriter {
  write(chunk: string): Promise<void>;
  /** Publishes the complete file under its final name. */
  commit(): Promise<CommittedExport>;
  /** Drops the partial file. */
  abort(): Promise<void>;
}

export interface ExportSink {
  /** Opens a writer for `objectPath`; `attemptId` keeps concurrent attempts' partial files apart. */
  open(objectPath: string, attemptId: string): Promise<ExportWriter>;
}

/** Writes exports under `rootDir`, via `<file>.partial-<attempt>` and an atomic rename. */
export function localDirectorySink(rootDir: string): ExportSink {
  return {
    async open(objectPath, attemptId) {
      const finalPath = path.join(rootDir, objectPath);
      const partialPath = `${finalPath}.partial-${attemptId}`;
      await mkdir(path.dirname(finalPath), { recursive: true });
      const handle = await open(partialPath, 'w');
      const encoder = new TextEncoder();
      let bytes = 0;
      return {
        async write(chunk) {
          const data = encoder.encode(chunk);
          bytes += data.byteLength;
          await handle.write(data);
        },
        async commit() {
          await handle.sync();
          await handle.close();
          await rename(partialPath, finalPath);
          return { location: finalPath, bytes };
        },
        async abort() {
          await handle.close().catch(() => {});
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
  fetch?: typeof fetch;
}

/**
 * Streams exports into a private Supabase Storage bucket (default `exports`):
 * uploads `<path>.partial-<attempt>`, then moves it to `<path>` and signs a
 * download URL. Memory stays flat: the upload body is a stream.
 */
export function supabaseStorageSink(opts: StorageSinkOptions): ExportSink {
  const bucket = opts.bucket ?? 'exports';
  const doFetch = opts.fetch ?? fetch;
  const base = `${opts.supabaseUrl.replace(/\/$/, '')}/storage/v1`;
  const headers = { Authorization: `Bearer ${opts.serviceKey}`, apikey: opts.serviceKey };
  const storageCall = async (pathName: string, body: unknown) => {
    const res = await doFetch(`${base}${pathName}`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`Storage ${pathName.split('/')[2]} failed with HTTP ${res.status}`);
    return (await res.json()) as Record<string, unknown>;
  };
  return {
    async open(objectPath, attemptId) {
      const partial = `${objectPath}.partial-${attemptId}`;
      const stream = new TransformStream<Uint8Array, Uint8Array>();
      const writer = stream.writable.getWriter();
      const encoder = new TextEncoder();
      let bytes = 0;
      const upload = doFetch(`${base}/object/${bucket}/${partial}`, {
        method: 'POST',
        headers: { ...headers, 'Content-Type': 'text/csv; charset=utf-8', 'x-upsert': 'true' },
        body: stream.readable,
        duplex: 'half',
      } as RequestInit);
      return {
        async write(chunk) {
          const data = encoder.encode(chunk);
          bytes += data.byteLength;
          await writer.write(data);
        },
        async commit() {
          await writer.close();
          const res = await upload;
          if (!res.ok) throw new Error(`Storage upload failed with HTTP ${res.status}`);
          await doFetch(`${base}/object/${bucket}/${objectPath}`, { method: 'DELETE', headers }).catch(() => undefined);
          await storageCall('/object/move', { bucketId: bucket, sourceKey: partial, destinationKey: objectPath });
          const signed = await storageCall(`/object/sign/${bucket}/${objectPath}`, { expiresIn: opts.signedUrlSeconds ?? 7 * 24 * 3600 });
          const url = typeof signed.signedURL === 'string' ? `${base}${signed.signedURL}` : undefined;
          return { location: `${bucket}/${objectPath}`, url, bytes };
        },
        async abort() {
          await writer.abort().catch(() => {});
          await upload.catch(() => undefined);
          await doFetch(`${base}/object/${bucket}/${partial}`, { method: 'DELETE', headers }).catch(() => undefined);
        },
      };
    },
  };
}
