// What an export sink is: where export files go, a local directory
// (./local-sink.ts: embedded default, tests) or a private Supabase Storage
// bucket (./tus-sink.ts: deployed). Both are resumable: a writer stores the
// file chunk by chunk, an export checkpoints the part that is stored, and a
// later invocation opens a writer that continues from that checkpoint. A file
// becomes visible under its final name only when complete, at its location
// (shared/export-location.ts).
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
  /** Aborts the writer's I/O at once (job lease lost, isolate shutting down). */
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

export function abortError(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new Error('aborted');
}

/** Copies `data` into `buf` from `used`, calling `flush` whenever `buf` fills up. */
export async function buffered(buf: Uint8Array, used: () => number, setUsed: (n: number) => void, data: Uint8Array, flush: () => Promise<void>): Promise<void> {
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
