// The local export sink: files under a directory (EXPORT_DIR; the embedded
// default and the tests), each appended chunk by chunk and renamed into place
// when complete.
import { mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import { EXPORT_BUCKET, exportLocation, localExportPath } from '../../shared/export-location.ts';
import { abortError, buffered, ExportResumeError, type ExportSink } from './export-sink.ts';

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
        // Published by an attempt whose completion was then refused (its job lease ended between publishing and
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
