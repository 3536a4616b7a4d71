// Runs (supabase/schemas/0310-0321): creating, stopping and settling stuck runs,
// and the reads of runs and their jobs the orchestrator answers with, made as
// the user (RLS decides what they see).
import type { ContentType, JobKind, RunKind } from '../content-types.ts';
import { asUser, type Sql, type TransactionSql, type UserClaims } from '../db.ts';
import type { JobStatus, RunStatus } from './jobs.ts';
import { fromFetchOf, type FromFetch } from './export.ts';
import { jobWaitingJoin, runWaitingJoin, type WaitingColumns } from './waiting.ts';

/**
 * The stuck-run safety net: settles runs whose jobs all ended; returns how
 * many it settled. whenDue (the worker's call): only when the fleet's last
 * settle_stuck_runs is older than private.settle_stuck_runs_state.every, else
 * 0 at once.
 */
export async function settleStuckRuns(sql: Sql, opts: { whenDue?: boolean } = {}): Promise<number> {
  const [row] = await sql`select public.settle_stuck_runs(${opts.whenDue ?? false}) as n`;
  return Number(row?.n ?? 0);
}

export interface CreateRunInput {
  portalId: string;
  requestedBy: string;
  kind: RunKind;
  contentTypes: readonly ContentType[];
  totals?: readonly number[] | null;
  maxAttempts?: number | null;
  leaseSeconds?: number | null;
  /** A fetch: 'full' (default) or 'incremental' (docs/sync.md). */
  fetchMode?: 'full' | 'incremental';
  /** Who asked (default 'user'). */
  trigger?: 'user' | 'schedule';
}

export interface CreateRunResult {
  runId: string | null;
  createdTypes: ContentType[];
  duplicateTypes: ContentType[];
}

/** Creates a run with one job per content type not already in flight (race-free). */
export async function createRun(sql: Sql, input: CreateRunInput): Promise<CreateRunResult> {
  const [row] = await sql`select * from public.create_run(${input.portalId}, ${input.requestedBy}, ${input.kind},
    ${input.contentTypes as string[]}, ${(input.totals ?? null) as number[] | null}, ${input.maxAttempts ?? null}, ${input.leaseSeconds ?? null},
    ${input.fetchMode ?? 'full'}, ${input.trigger ?? 'user'})`;
  if (!row) throw new Error('create_run returned no row');
  return {
    runId: (row.run_id as string | null) ?? null,
    createdTypes: (row.created_types as ContentType[]) ?? [],
    duplicateTypes: (row.duplicate_types as ContentType[]) ?? [],
  };
}

/** Stops a run; false when it had already finished. */
export async function stopRun(sql: Sql, runId: string): Promise<boolean> {
  const [row] = await sql`select public.stop_run(${runId}) as ok`;
  return row?.ok === true;
}


/** A run as the HTTP API reads it, with its waiting columns (shared/sql/waiting.ts). */
export interface RunRow extends WaitingColumns {
  id: string;
  portal_id: string;
  kind: RunKind;
  status: RunStatus;
  content_types: ContentType[];
  jobs_total: number;
  jobs_completed: number;
  jobs_failed: number;
  jobs_stopped: number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  trigger: 'user' | 'schedule';
  fetch_mode: 'full' | 'incremental' | null;
}

/** A job of a run as the HTTP API reads it (ids as text), with its waiting columns. */
export interface RunJobRow extends WaitingColumns {
  id: string;
  portal_id: string;
  kind: JobKind;
  /** Null for a probe. */
  content_type: ContentType | null;
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  progress_done: number;
  progress_total: number | null;
  last_error: string | null;
  result: Record<string, unknown> | null;
  started_at: Date | null;
  finished_at: Date | null;
  /** While the job (pending or running) keeps failing with retryable errors, no progress since the last: when it gives up. */
  retrying_until: Date | null;
  /** A completed export's fetch (the content it read); absent for other jobs. */
  from_fetch?: FromFetch | null;
}

/**
 * Content type → the run that already covers it, among `types`: the portal's
 * in-flight job of `kind` for it, or its completed job in a run of that kind
 * still in flight (create_run's rule: a second trigger joins the first run).
 */
export async function inFlightRuns(sql: Sql, portalId: string, kind: string, types: readonly string[]): Promise<Record<string, string>> {
  if (types.length === 0) return {};
  const rows = await sql`select j.content_type, j.run_id from public.jobs j join public.runs r on r.id = j.run_id
    where j.portal_id = ${portalId} and j.kind = ${kind} and j.content_type = any(${types as string[]}) and r.finished_at is null
      and j.status in ('pending', 'running', 'completed')`;
  return Object.fromEntries(rows.map((r) => [r.content_type as string, r.run_id as string]));
}

/** The jobs of a run just created, in id order. */
export async function createdJobs(sql: Sql, runId: string): Promise<{ id: string; contentType: ContentType; status: JobStatus; total: number | null }[]> {
  const rows = await sql`select id::text, content_type, status, progress_total from public.jobs where run_id = ${runId} order by id`;
  return rows.map((j) => ({ id: j.id as string, contentType: j.content_type as ContentType, status: j.status as JobStatus, total: j.progress_total as number | null }));
}

/** The run with its jobs as the user sees them (one transaction), or null when it is not theirs; each completed export with its fetch. */
export async function runWithJobs(sql: Sql, claims: UserClaims, runId: string): Promise<{ run: RunRow; jobs: RunJobRow[] } | null> {
  return asUser(sql, claims, async (tx) => {
    const [run] = await tx<RunRow[]>`select r.id, r.portal_id, r.kind, r.status, r.content_types, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
        r.created_at, r.started_at, r.finished_at, r.trigger, r.fetch_mode, rw.* from public.runs r ${runWaitingJoin(tx)} where r.id = ${runId}`;
    if (!run) return null;
    const jobs = await tx<RunJobRow[]>`select j.id::text, j.portal_id, j.kind, j.content_type, j.status, j.attempts, j.max_attempts, j.progress_done, j.progress_total,
        j.last_error, j.result, j.started_at, j.finished_at,
        case when j.status in ('pending', 'running') and j.progress_done <= j.failing_progress then j.retry_until end as retrying_until,
        w.* from public.jobs j ${jobWaitingJoin(tx)} where j.run_id = ${runId} order by j.id`;
    for (const j of jobs) if (j.kind === 'export' && j.status === 'completed' && j.content_type !== null) j.from_fetch = await fromFetchOf(tx, { ...j, content_type: j.content_type });
    return { run, jobs: [...jobs] };
  });
}

/** A run of the runs list: its keyset position (`cursor_at`, microseconds UTC) and its jobs' item sums (bigint as text). */
export interface RunListRow extends RunRow {
  cursor_at: string;
  items_done: string | null;
  items_total: string | null;
}

/** The user's runs, newest first, after a keyset position; `limit + 1` rows, so the caller knows whether more follow. */
export async function userRuns(
  sql: Sql, claims: UserClaims,
  q: { portalId?: string; kind?: RunKind; after: { at: string; id: string } | null; limit: number },
): Promise<RunListRow[]> {
  return asUser(sql, claims, async (tx: TransactionSql) => [...await tx<RunListRow[]>`
    select r.id, r.portal_id, r.kind, r.status, r.content_types, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
           r.created_at, r.started_at, r.finished_at, r.trigger, r.fetch_mode,
           to_char(r.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at,
           j.items_done, j.items_total, rw.*
      from public.runs r
      ${runWaitingJoin(tx)}
      cross join lateral (
        select sum(jj.progress_done)::bigint as items_done,
               case when count(*) > 0 and count(jj.progress_total) = count(*) then sum(jj.progress_total)::bigint end as items_total
          from public.jobs jj where jj.run_id = r.id) j
     where true
       -- ::text first: a parameter typed timestamptz would pass through a JS Date and lose the microseconds.
       ${q.portalId ? tx`and r.portal_id = ${q.portalId}` : tx``}
       ${q.kind ? tx`and r.kind = ${q.kind}` : tx``}
       ${q.after ? tx`and (r.created_at, r.id) < (${q.after.at}::text::timestamptz, ${q.after.id}::uuid)` : tx``}
     order by r.created_at desc, r.id desc
     limit ${q.limit + 1}`]);
}

/** True when the run is the user's (RLS). */
export async function isOwnRun(sql: Sql, claims: UserClaims, runId: string): Promise<boolean> {
  const rows = await asUser(sql, claims, (tx) => tx`select id from public.runs where id = ${runId}`);
  return rows.length > 0;
}

/** The run's status now (service role), or null when there is no such run. */
export async function runStatus(sql: Sql, runId: string): Promise<RunStatus | null> {
  const [run] = await sql`select status from public.runs where id = ${runId}`;
  return (run?.status as RunStatus | undefined) ?? null;
}
