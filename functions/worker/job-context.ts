// What a job processor gets: the claimed job, the database, the invocation's
// budget (wall clock and CPU), and a signal that fires when the job must stop
// at once (job lease lost, or the isolate is shutting down).
import type { ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import type { Logger } from '../../shared/log.ts';
import { releaseJob, type ClaimedJob, type Progress, type ReleaseResult } from '../../shared/sql/jobs.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import type { HubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import type { ExportSink } from './export-sink.ts';

/** What a processor asks before starting its next unit of work (a page, a chunk). */
export interface UnitCost {
  /** Wall-clock ms the next unit is expected to take (its own measurement so far). */
  wallMs?: number;
  /** CPU ms the next unit is expected to cost (its own measurement so far). */
  cpuMs?: number;
}

export interface JobContext {
  sql: Sql;
  job: ClaimedJob;
  log: Logger;
  /**
   * Aborted when the job must stop at once and write nothing more: the job lease
   * was lost, or the isolate is shutting down (the invocation then releases the job
   * itself, with the checkpoint already in the database).
   */
  signal: AbortSignal;
  /** Milliseconds of wall clock left before the invocation must have checkpointed and let go. */
  timeLeft(): number;
  /**
   * Null when the next unit of work fits in what is left of the invocation's
   * wall clock and CPU budget; otherwise why the job should checkpoint and be
   * released now (no attempt used).
   */
  outOfBudget(next?: UnitCost): string | null;
  /** CPU ms this isolate has spent in the current invocation so far (measured where the runtime allows). */
  cpuMs(): number;
  /** A HubSpot client for this job's portal (token from the database, shared request budget, waits capped by timeLeft). */
  hubspotForPortal(portalId: string): Promise<HubSpotContentClient>;
  /**
   * A HubSpot write client for this job's portal (a publish's batches: the same
   * token, budget and deadline). The invocation always gives one; a context made
   * for a job that writes nothing (a test's fetch or export) may not.
   */
  hubspotWritesForPortal?(portalId: string): Promise<HubSpotWriteClient>;
  exportSink: ExportSink;
  now(): number;
}

/**
 * How a job's processing ended: the one outcome type, from the processor
 * (completed, released, lost) and from the database's decision on a failure
 * (retried or failed, as `fail_job` answered). The invocation counts each kind.
 */
export type JobOutcome =
  | { kind: 'completed' }
  | { kind: 'released'; reason: string }
  | { kind: 'retried'; reason: string }
  | { kind: 'failed'; reason: string }
  | { kind: 'lost'; reason: string };

/** The job was no longer ours (job lease expired, stopped, reclaimed): nothing more is written for it. */
export const lost = (reason: string): JobOutcome => ({ kind: 'lost', reason });

/** A failure that retrying cannot fix (bad credentials, unknown kind): fail the job now. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/** The content type of a job that has one (a fetch or an export; only a probe has none). */
export function jobContentType(job: { kind: string; contentType: ContentType | null }): ContentType {
  if (job.contentType === null) throw new PermanentJobError(`A ${job.kind} job needs a content type.`);
  return job.contentType;
}

/**
 * Releases the job (see ReleaseResult), trying again while the call fails (the
 * connection busy with a cancelled query, a dropped connection) until
 * `untilMs`; after that, or when the job is no longer ours, null. Only a
 * release that landed, or a job that is not ours, ends it: a held job is
 * never silently kept.
 */
export async function releaseWithRetry(
  sql: Sql, job: ClaimedJob, progress: Progress, untilMs: number, log?: Logger,
): Promise<ReleaseResult> {
  for (let pause = 20; ; pause = Math.min(pause * 2, 500)) {
    try {
      return await releaseJob(sql, job, progress);
    } catch (e) {
      const wait = Math.min(pause, untilMs - Date.now());
      log?.warn('release_retry', { error: e instanceof Error ? e.message : String(e), retry_in_ms: Math.max(0, wait) });
      if (wait <= 0) return null;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** How long a processor's release is tried again at most: within the wall clock kept in reserve. */
const RELEASE_RETRY_MS = 2_000;

/**
 * Hands the job back without using an attempt (its checkpoint, if given, is
 * saved with it). When the release is refused the job was no longer ours:
 * it is counted as lost, and its job lease (or the new holder) decides what next.
 * A job released too often in a row without progress is failed instead, by
 * the database (release_job).
 */
export async function releaseOrLost(ctx: Pick<JobContext, 'sql' | 'job' | 'log' | 'timeLeft'>, reason: string, progress: Progress = {}): Promise<JobOutcome> {
  const until = Date.now() + Math.max(RELEASE_RETRY_MS, ctx.timeLeft());
  const result = await releaseWithRetry(ctx.sql, ctx.job, progress, until, ctx.log);
  if (result === 'released') return { kind: 'released', reason };
  if (result === 'failed') return { kind: 'failed', reason: `released too often without progress (${reason})` };
  return lost(`job lease lost before release (${reason})`);
}
