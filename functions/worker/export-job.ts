// The export job: Postgres formats one content type's live items as CSV
// (COPY ... TO STDOUT WITH (FORMAT csv), page by page in id order) and the
// worker passes the bytes to a sink without decoding them. The job keeps a
// checkpoint of the stored part of the file and resumes from it in as many
// invocations as it takes; only a complete file is ever published.
import type { Readable } from 'node:stream';
import type { ReservedSql, Sql } from '../../shared/db.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { beginExport, exportHeaderCopy, exportPage, exportRowsCopy, jobOwner } from '../../shared/sql/export.ts';
import { completeJob, heartbeatJob } from '../../shared/sql/jobs.ts';
import { exportColumns } from './export-columns.ts';
import { ExportResumeError, ExportTooLargeError, type ExportWriter } from './export-sink.ts';
import { jobContentType, lost, PermanentJobError, releaseOrLost, type JobContext, type JobOutcome } from './job-context.ts';

/**
 * Items per COPY. The checkpoint moves at page ends (once the sink has stored
 * them), so a resumed export redoes at most one page; each page costs the
 * worker a few queries (~0.3 ms of CPU under Deno), hence pages of thousands.
 */
const PAGE_ROWS = 5000;
const MIN_PAGE_ROWS = 100;

/**
 * What an export job keeps in `jobs.checkpoint`: the file being written and
 * how far it is stored. Every number is a page end the sink had stored when
 * the checkpoint was saved; the file's bytes up to `bytes` are the header and
 * the items up to `afterId`, and regenerating from `afterId` gives the bytes
 * that follow (the data does not change while an export runs).
 */
export interface ExportCheckpoint {
  v: 1;
  /** Object path of the file (fixed when the export began). */
  path: string;
  /** The exported fields, pinned when the export began (header and rows agree across invocations). */
  columns: string[];
  /** hubspot_content.id of the last item stored ("0": none yet). */
  afterId: string;
  /** Items stored. */
  rows: number;
  /** Bytes of the file stored up to that item, header included. */
  bytes: number;
  /** The sink's handle of the unfinished upload (the TUS upload URL), or null. */
  upload: string | null;
}

export interface ExportJobOptions {
  /** Items per COPY page (default 5000). */
  pageRows?: number;
}

/**
 * Path of an export file: one folder per owner and run, one name per export
 * file (the fencing token of the attempt that began it). Only the location of
 * the file the completing attempt finished is recorded in the job's result.
 */
export function exportObjectPath(ownerId: string, runId: string, type: ContentType, fencingToken: string): string {
  return `${ownerId}/${runId}/${type}-${fencingToken}.csv`;
}

const DIGITS = /^\d{1,19}$/;
/** SQLSTATE of export_header/export_rows for a caller that is not the job's holder. */
const NOT_HOLDER = '55000';

/** The checkpoint of this job's export, or null when there is none (or it is not one of ours). */
function readCheckpoint(raw: unknown, pathPrefix: string): ExportCheckpoint | null {
  if (!raw || typeof raw !== 'object') return null;
  const c = raw as Record<string, unknown>;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  const ok =
    c.v === 1 &&
    typeof c.path === 'string' && c.path.startsWith(pathPrefix) && /^\d+\.csv$/.test(c.path.slice(pathPrefix.length)) &&
    Array.isArray(c.columns) && c.columns.length > 0 && c.columns.every((f) => typeof f === 'string' && f.length > 0 && f.length <= 200) &&
    typeof c.afterId === 'string' && DIGITS.test(c.afterId) &&
    count(c.rows) && count(c.bytes) &&
    (c.upload === null || typeof c.upload === 'string');
  return ok ? (c as unknown as ExportCheckpoint) : null;
}

/**
 * Runs an export job to a published file, or checkpoints and releases it, or
 * stops at once when the job lease is lost. A file larger than the destination
 * accepts fails the job for good (PermanentJobError), its upload dropped.
 */
export async function processExportJob(ctx: JobContext, opts: ExportJobOptions = {}): Promise<JobOutcome> {
  try {
    return await processExport(ctx, opts);
  } catch (e) {
    if (e instanceof ExportTooLargeError) throw new PermanentJobError(e.message);
    throw e;
  }
}

async function processExport(ctx: JobContext, opts: ExportJobOptions): Promise<JobOutcome> {
  const { sql, job } = ctx;
  const contentType = jobContentType(job);
  const ownerId = job.ownerId ?? (await jobOwner(sql, job.id));
  const checkpoint = readCheckpoint(job.checkpoint, `${ownerId}/${job.runId}/${contentType}-`);
  if (!checkpoint && job.checkpoint != null) ctx.log.warn('export_checkpoint_ignored', { reason: 'not an export checkpoint of this job' });
  const fresh = (): ExportCheckpoint => ({
    v: 1,
    path: exportObjectPath(ownerId, job.runId, contentType, job.fencingToken),
    columns: [...exportColumns(contentType)],
    afterId: '0',
    rows: 0,
    bytes: 0,
    upload: null,
  });
  if (!checkpoint) return await exportFile(ctx, fresh(), false, opts);
  try {
    return await exportFile(ctx, checkpoint, true, opts);
  } catch (e) {
    if (!(e instanceof ExportResumeError)) throw e;
    // The unfinished file is gone (expired, removed) or cannot be continued: the only way on is a new file.
    ctx.log.warn('export_restarted', { reason: e.message, rows_lost: checkpoint.rows });
    return await exportFile(ctx, fresh(), false, opts);
  }
}

/**
 * Writes the file of `cp` from its checkpoint on (`resumed`) or from the start,
 * checkpointing each stored page end. Throws ExportResumeError when a resumed
 * file cannot be continued (after dropping it).
 */
async function exportFile(ctx: JobContext, start: ExportCheckpoint, resumed: boolean, opts: ExportJobOptions): Promise<JobOutcome> {
  const { sql, job, signal } = ctx;
  // A job released without progress takes smaller pages: half as many rows per stalled release.
  const pageRows = opts.pageRows ?? Math.max(MIN_PAGE_ROWS, PAGE_ROWS >> Math.min(job.stalledReleases, 8));
  let cp = start;
  const writer = await ctx.exportSink.open(cp.path, { jobId: job.id, resume: resumed ? { bytes: cp.bytes, upload: cp.upload } : null, signal });
  // Until a checkpoint names the file nobody can resume it: it is dropped if we stop.
  let keep = resumed;
  let committed = false;
  try {
    if (!resumed) {
      // The columns and the upload are in the database before the first byte (export_header/export_rows read the columns there).
      cp = { ...cp, upload: writer.upload ?? null };
      if (!(await beginExport(sql, job, cp))) return lost('job lease lost before the export began');
      keep = true;
    }
    const width = cp.columns.length + 2;
    let position = cp.bytes;
    let afterId = cp.afterId;
    let rows = cp.rows;
    /** Page ends written but not yet known to be stored. */
    const ends: Pick<ExportCheckpoint, 'afterId' | 'rows' | 'bytes'>[] = [];
    let unitStartMs = ctx.now();
    let unitStartCpu = ctx.cpuMs();

    if (position === 0) {
      position += await copyTo(sql, writer, exportHeaderCopy(job, width), signal);
      ends.push({ afterId, rows, bytes: position });
    }
    for (;;) {
      if (signal.aborted) return lost('job lease lost');
      const page = await exportPage(sql, job, afterId, pageRows);
      if (!page.held) return lost('fenced off');
      if (page.lastId === null) break;
      const lastId = page.lastId;
      position += await copyTo(sql, writer, exportRowsCopy(job, width, afterId, lastId), signal);
      afterId = lastId;
      rows += page.rowCount;
      ends.push({ afterId, rows, bytes: position });

      // Once the sink has stored page ends, checkpoint the last of them; then ask whether to go on.
      const stored = writer.durableBytes;
      if (stored === undefined) continue;
      let reached: (typeof ends)[number] | undefined;
      while (ends.length > 0 && ends[0]!.bytes <= stored) reached = ends.shift();
      if (!reached) continue;
      cp = { ...cp, ...reached };
      if (!(await heartbeatJob(sql, job, { done: cp.rows, checkpoint: cp }))) return lost('heartbeat refused');
      const wallMs = ctx.now() - unitStartMs;
      const cpuMs = ctx.cpuMs() - unitStartCpu;
      unitStartMs = ctx.now();
      unitStartCpu = ctx.cpuMs();
      const reason = ctx.outOfBudget({ wallMs, cpuMs });
      if (reason) return await releaseOrLost(ctx, reason, { done: cp.rows, checkpoint: cp });
    }

    // Still the holder? (Narrows the time in which a stale attempt can publish; the result names the file either way.)
    if (signal.aborted || !(await heartbeatJob(sql, job, { done: rows }))) return lost('job lease lost before publishing');
    const file = await writer.commit();
    committed = true;
    const done = await completeJob(sql, job, { rows, bytes: file.bytes, location: file.location, url: file.url ?? null });
    return done ? { kind: 'completed' } : lost('fenced off at completion');
  } catch (e) {
    if (signal.aborted) return lost('job lease lost');
    if ((e as { code?: unknown }).code === NOT_HOLDER) return lost('fenced off');
    if (e instanceof ExportResumeError) {
      if (!resumed) throw new Error(`export upload failed: ${e.message}`);
      keep = false;
    }
    // No attempt can finish this file: what it stored is dropped, not kept for a resume.
    if (e instanceof ExportTooLargeError) keep = false;
    throw e;
  } finally {
    if (!committed) {
      if (keep) await writer.close?.().catch(() => undefined);
      else {
        await writer.abort().catch((e: unknown) => {
          // Left behind in the bucket (an unfinished upload expires; a finished object stays): say so.
          ctx.log.warn('export_abort_failed', { path: cp.path, error: e instanceof Error ? e.message : String(e) });
        });
      }
    }
  }
}

/** Bytes of COPY output collected before they are handed to the writer (one call per stage, not per row). */
const STAGE_BYTES = 64 * 1024;

/**
 * Streams one COPY's output into the writer, bytes as they come (never
 * decoded), and returns how many. Postgres sends one message per row: they are
 * collected into a stage and handed over a stage at a time, the stream paused
 * while the writer works. When the writer fails or the signal fires, the query
 * is cancelled and the rest drained (the connection goes back to the pool
 * clean); nothing more is written.
 */
export async function copyTo(sql: Sql, writer: Pick<ExportWriter, 'write'>, text: string, signal: AbortSignal): Promise<number> {
  // On a connection of its own for the COPY's length: postgres.js pipelines other
  // queries onto a busy connection, and one that meets a COPY in progress fails
  // (COPY_IN_PROGRESS). Another lane's queries and the heartbeat wait instead.
  const conn = await sql.reserve();
  let gone = false;
  try {
    return await copyOn(conn, writer, text, signal);
  } catch (e) {
    gone = connectionGone(e);
    throw e;
  } finally {
    // A connection that closed is back in the pool's closed queue already: released too, it would be
    // handed to the next query with no socket, whose write throws where nothing can catch it and ends
    // the process (postgres.js 3.4.9, porsager/postgres#1208).
    if (!gone) conn.release();
  }
}

/** Errors that say the connection itself is gone (postgres.js' own, the socket's, Postgres' classes 08 and 57P). */
function connectionGone(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string'
    && (['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET', 'EPIPE'].includes(code)
      || code.startsWith('08') || code.startsWith('57P'));
}

async function copyOn(sql: ReservedSql, writer: Pick<ExportWriter, 'write'>, text: string, signal: AbortSignal): Promise<number> {
  const query = sql.unsafe(text);
  const stream = (await query.readable()) as Readable;
  const stage = new Uint8Array(STAGE_BYTES);
  let staged = 0;
  let bytes = 0;
  let failure: { error: unknown } | null = null;
  let writing: Promise<void> | null = null;
  const fail = (error: unknown) => {
    if (failure) return;
    failure = { error };
    query.cancel();
  };
  // Stopped (job lease lost, isolate shutting down): cancel now, not at the next row, and drain.
  const onAbort = () => {
    fail(signal.reason ?? new Error('aborted'));
    stream.resume();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await new Promise<void>((resolve) => {
      stream.on('data', (chunk: Uint8Array) => {
        if (failure) return; // draining
        if (signal.aborted) return fail(signal.reason ?? new Error('aborted'));
        bytes += chunk.byteLength;
        if (staged + chunk.byteLength <= stage.byteLength) {
          stage.set(chunk, staged);
          staged += chunk.byteLength;
          return;
        }
        // The stage is full: hand it over, the stream paused (the stage and the chunk stay untouched meanwhile).
        stream.pause();
        writing = (async () => {
          if (staged > 0) await writer.write(stage.subarray(0, staged));
          staged = 0;
          if (chunk.byteLength > stage.byteLength) await writer.write(chunk);
          else {
            stage.set(chunk, 0);
            staged = chunk.byteLength;
          }
        })().then(
          () => {
            writing = null;
            stream.resume();
          },
          (e: unknown) => {
            writing = null;
            fail(e);
            stream.resume();
          },
        );
      });
      let ended = false;
      stream.once('end', () => {
        ended = true;
        resolve();
      });
      stream.once('error', (e: unknown) => {
        if (!failure) failure = { error: e };
        resolve();
      });
      stream.once('close', () => {
        if (!ended && !failure) failure = { error: new Error('the COPY stream closed before its end') };
        resolve();
      });
    });
    if (writing) await writing;
    if (!failure && staged > 0) {
      if (signal.aborted) throw signal.reason ?? new Error('aborted');
      await writer.write(stage.subarray(0, staged));
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    // postgres.js 3.4 pauses the socket when a COPY stream's buffer is full and
    // never resumes it if the copy ends in the same read: the connection would
    // hang on its next query (porsager/postgres#499). Resume it, as the
    // stream's own read() does; with no socket left, the connection closed under the COPY.
    try {
      (stream as unknown as { _read?: (size: number) => void })._read?.(0);
    } catch (e) {
      const cause = failure ? (failure as { error: unknown }).error : e;
      failure = { error: Object.assign(new Error('the connection closed during the COPY', { cause }), { code: 'CONNECTION_CLOSED' }) };
    }
  }
  if (failure) throw (failure as { error: unknown }).error;
  return bytes;
}
