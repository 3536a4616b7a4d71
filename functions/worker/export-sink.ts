// Where export files go: a local directory (embedded default, tests) or a
// private Supabase Storage bucket (deployed). Both are resumable: a writer
// stores the file chunk by chunk, an export checkpoints the part that is
// stored, and a later invocation opens a writer that continues from that
// checkpoint. A file becomes visible under its final name only when complete.
import { mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';

export interface CommittedExport {
  /** Where the finished file is (a local path, or bucket/object path). */
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
}

/**
 * Writes exports under `rootDir`: appends to `<file>.partial-<job>` chunk by
 * chunk (each synced), and renames it to `<file>` when complete. A resumed
 * writer truncates the partial file to the checkpoint and appends from there;
 * a file published by an attempt that then lost the job is taken back and
 * resumed the same way (as a finished TUS upload is), never left behind.
 */
export function localDirectorySink(rootDir: string, opts: LocalSinkOptions = {}): ExportSink {
  const chunkBytes = opts.chunkBytes ?? 1024 * 1024;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw new Error('localDirectorySink: chunkBytes must be a positive integer');
  return {
    async open(objectPath, { jobId, resume, signal }) {
      const finalPath = path.join(rootDir, objectPath);
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
          return { location: finalPath, bytes: stored };
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
  fetch?: typeof fetch;
}

const TUS_VERSION = '1.0.0';

/**
 * Streams exports into a private Supabase Storage bucket (default `exports`)
 * with resumable (TUS) uploads: the length is declared with the last chunk
 * (Upload-Defer-Length), so the object exists only once the whole file is
 * uploaded; then a download URL is signed. Memory: one chunk.
 */
export function supabaseStorageSink(opts: StorageSinkOptions): ExportSink {
  const bucket = opts.bucket ?? 'exports';
  const chunkBytes = opts.chunkBytes ?? 6 * 1024 * 1024;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw new Error('supabaseStorageSink: chunkBytes must be a positive integer');
  const doFetch = opts.fetch ?? fetch;
  const base = `${opts.supabaseUrl.replace(/\/$/, '')}/storage/v1`;
  const baseHost = new URL(base).host;
  const auth = { Authorization: `Bearer ${opts.serviceKey}`, apikey: opts.serviceKey };
  const tus = { ...auth, 'Tus-Resumable': TUS_VERSION, 'x-upsert': 'true' };
  const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
  const encodedPath = (p: string) => p.split('/').map(encodeURIComponent).join('/');

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

  return {
    async open(objectPath, { resume, signal }) {
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
        const location = res.headers.get('location');
        if (res.status !== 201 || !location) throw new Error(`Storage upload creation failed with HTTP ${res.status}`);
        url = new URL(location, `${base}/upload/resumable`).toString();
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
          let status = 0;
          let newOffset = Number.NaN;
          try {
            const res = await doFetch(url, { method: 'PATCH', headers, body: buf.subarray(0, used), signal });
            status = res.status;
            newOffset = Number(res.headers.get('upload-offset'));
            await res.body?.cancel();
          } catch (e) {
            if (signal?.aborted || attempt >= 3) throw e;
          }
          if (status === 204 || status === 200) {
            if (!Number.isSafeInteger(newOffset) || newOffset !== offset + used) throw new Error(`Storage stored up to ${newOffset}, expected ${offset + used}`);
            offset = newOffset;
            used = 0;
            if (total !== null) length = total;
            return;
          }
          if (status === 404 || status === 410) throw new ExportResumeError(`the upload is gone (HTTP ${status})`);
          // 409: someone else (a stale attempt writing the same bytes) moved the offset; other failures: see what landed.
          if (status !== 0 && status !== 409 && status !== 423 && status < 500) throw new Error(`Storage upload failed with HTTP ${status}`);
          if (attempt >= 3) throw new Error(`Storage upload failed with HTTP ${status || 'network error'} three times`);
          await resync();
          if (total !== null && offset > total) throw new ExportResumeError(`the upload holds ${offset} bytes, this file has ${total}`);
          if (used === 0 && (total === null || length === total)) return;
          if (length !== null && total !== null && length !== total) throw new ExportResumeError(`the upload was finished with ${length} bytes, this file has ${total}`);
        }
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
          if (!signed.ok) throw new Error(`Storage sign failed with HTTP ${signed.status}`);
          const body = (await signed.json()) as { signedURL?: unknown };
          const signedUrl = typeof body.signedURL === 'string' ? `${base}${body.signedURL}` : undefined;
          return { location: `${bucket}/${objectPath}`, url: signedUrl, bytes: position };
        },
        async close() {
          used = 0;
        },
        async abort() {
          used = 0;
          await doFetch(url, { method: 'DELETE', headers: tus }).then((r) => r.body?.cancel(), () => undefined);
        },
      };
    },
  };
}
