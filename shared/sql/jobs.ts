// Jobs (supabase/schemas/0330-0349): claims and the holder's calls (heartbeat,
// release, park, complete, fail). SQL owns the state machine; each function
// here is one SQL call (one transaction) and parses its row once.
import type { ContentType, JobKind } from '../content-types.ts';
import type { Sql } from '../db.ts';

export type JobStatus = 'pending' | 'running' | 'completed' | 'failed' | 'stopped';
export type RunStatus = 'pending' | 'running' | 'completed' | 'partially_failed' | 'failed' | 'stopped';

/** A job as claimed by a worker. Ids and fencing tokens are bigint, kept as strings. */
export interface ClaimedJob {
  id: string;
  runId: string;
  portalId: string;
  /** The portal owner (absent from queue_test.complete_job_and_claim_next's narrower row). */
  ownerId: string | null;
  kind: JobKind;
  /** Null for a probe (it asks about every type of its run). */
  contentType: ContentType | null;
  attempts: number;
  maxAttempts: number;
  fencingToken: string;
  leaseExpiresAt: Date;
  /** When the claim happened, by the database's clock (absent from queue_test.complete_job_and_claim_next's row). */
  claimedAt: Date | null;
  checkpoint: unknown;
  progressDone: number;
  progressTotal: number | null;
  /** Releases in a row without progress so far (a processor may take a smaller unit of work). */
  stalledReleases: number;
}

type Row = Record<string, unknown>;

/** A claim function's row as a ClaimedJob. */
export function toClaimedJob(r: Row): ClaimedJob {
  return {
    id: String(r.id),
    runId: r.run_id as string,
    portalId: r.portal_id as string,
    ownerId: (r.owner_id as string | undefined) ?? null,
    kind: r.kind as JobKind,
    contentType: (r.content_type as ContentType | null) ?? null,
    attempts: r.attempts as number,
    maxAttempts: r.max_attempts as number,
    fencingToken: String(r.fencing_token),
    leaseExpiresAt: r.lease_expires_at as Date,
    claimedAt: (r.updated_at as Date | undefined) ?? null,
    checkpoint: r.checkpoint ?? null,
    progressDone: r.progress_done as number,
    progressTotal: (r.progress_total as number | null) ?? null,
    stalledReleases: (r.stalled_releases as number | undefined) ?? 0,
  };
}

/** Claims the next job for this worker (fair across portals, see claim_jobs), or null. */
export async function claimNextJob(sql: Sql, workerId: string, kinds: readonly JobKind[] | null = null): Promise<ClaimedJob | null> {
  // claim_jobs(…, 1, …) directly (the tests' queue_test.claim_next_job is the
  // same call behind one more plpgsql frame). The columns toClaimedJob reads (as in claimJobs), not
  // `select *`: the job's 11 other columns (six timestamps) cost a parse each.
  const rows = await sql`select id, run_id, portal_id, owner_id, kind, content_type, attempts, max_attempts, fencing_token,
    lease_expires_at, updated_at, checkpoint, progress_done, progress_total, stalled_releases
    from public.claim_jobs(${workerId}, 1, ${kinds as string[] | null})`;
  return rows[0] ? toClaimedJob(rows[0]) : null;
}

/** Claims up to `max` jobs at once. */
export async function claimJobs(sql: Sql, workerId: string, max: number, kinds: readonly JobKind[] | null = null): Promise<ClaimedJob[]> {
  const rows = await sql`select id, run_id, portal_id, owner_id, kind, content_type, attempts, max_attempts, fencing_token,
    lease_expires_at, updated_at, checkpoint, progress_done, progress_total, stalled_releases
    from public.claim_jobs(${workerId}, ${max}, ${kinds as string[] | null})`;
  return rows.map(toClaimedJob);
}

export interface Progress {
  done?: number;
  total?: number;
  checkpoint?: unknown;
}

/** Extends the job lease; false means the job is no longer ours (stop working on it). */
export async function heartbeatJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, progress: Progress = {}): Promise<boolean> {
  const [row] = await sql`select public.heartbeat_job(${job.id}, ${job.fencingToken}, ${progress.done ?? null},
    ${progress.total ?? null}, ${progress.checkpoint === undefined ? null : sql.json(progress.checkpoint as never)}) as ok`;
  return row?.ok === true;
}

/**
 * What a release did: 'released' (pending again, no attempt used), 'failed'
 * (the job kind's max_stalled_releases-th release in a row without progress:
 * failed for good, its run settled), or null (the job was no longer ours).
 */
export type ReleaseResult = 'released' | 'failed' | null;

/** Hands the job back without using an attempt (time budget ran out); see ReleaseResult. */
export async function releaseJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, progress: Progress = {}): Promise<ReleaseResult> {
  const [row] = await sql`select public.release_job(${job.id}, ${job.fencingToken}, ${progress.done ?? null},
    ${progress.checkpoint === undefined ? null : sql.json(progress.checkpoint as never)}) as result`;
  return (row?.result as ReleaseResult | undefined) ?? null;
}

/**
 * Parks the held job until `until` without using an attempt (for HubSpot's
 * daily limit): pending again, due at `until`, `reason` on the job and its run
 * (e.g. "waiting for HubSpot's daily limit until 2026-12-01T00:00:00Z"). False when fenced off.
 */
export async function parkJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, until: Date, reason: string): Promise<boolean> {
  const [row] = await sql`select public.park_job(${job.id}, ${job.fencingToken}, ${until}, ${reason}) as ok`;
  return row?.ok === true;
}

/**
 * True when a claim would find work right now: an expired job lease, a due job within its portal's cap and the
 * fetch/export rule, or (with `schedules`) a due schedule probe.
 */
export async function claimableJobsExist(sql: Sql, kinds: readonly JobKind[] | null = null, schedules = true): Promise<boolean> {
  const [row] = await sql`select public.claimable_jobs_exist(${kinds as string[] | null}, ${schedules}) as more`;
  return row?.more === true;
}

/** Completes the job (and settles its run); false when fenced off. */
export async function completeJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, result: unknown = null): Promise<boolean> {
  const [row] = await sql`select public.complete_job(${job.id}, ${job.fencingToken},
    ${result === null ? null : sql.json(result as never)}) as ok`;
  return row?.ok === true;
}

/** Completes many held jobs; returns how many were still held. */
export async function completeJobs(sql: Sql, jobs: readonly Pick<ClaimedJob, 'id' | 'fencingToken'>[]): Promise<number> {
  const [row] = await sql`select public.complete_jobs(${jobs.map((j) => j.id)}::bigint[], ${jobs.map((j) => j.fencingToken)}::bigint[]) as n`;
  return Number(row?.n ?? 0);
}

/**
 * What the database decided for a failure: `retried` (pending again after a
 * backoff), `failed` (for good: not retryable, or out of attempts), or `lost`
 * (the caller no longer held the job, so nothing changed).
 */
export type FailOutcome = 'retried' | 'failed' | 'lost';

/** Records a failure: retryable ones go back to pending with backoff until max attempts. */
export async function failJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, error: string, retryable: boolean): Promise<FailOutcome> {
  const [row] = await sql`select public.fail_job(${job.id}, ${job.fencingToken}, ${error}, ${retryable}) as status`;
  return row?.status === 'pending' ? 'retried' : row?.status === 'failed' ? 'failed' : 'lost';
}

