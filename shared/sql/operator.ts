// Operator actions and views (supabase/schemas/0450-0461): retry or stop one
// job, pause or resume a portal, every user's jobs and portals for the
// Operator view, and a portal's HubSpot requests per 10-s window with its
// rate window's state (the requests chart). The service role's calls; the
// orchestrator checks the caller is an operator (or owns the portal) first.
import type { Sql } from '../db.ts';

export type RetryOutcome = 'retried' | 'not_failed' | 'busy' | 'disconnected';

/** A failed job's new attempt (its run reopened); what stood in the way otherwise. Null: no such job. */
export async function retryJob(sql: Sql, jobId: string): Promise<RetryOutcome | null> {
  const rows = await sql`select public.retry_job(j.id) as outcome from public.jobs j where j.id = ${jobId}`;
  return (rows[0]?.outcome as RetryOutcome | undefined) ?? null;
}

/** Stops one pending or running job: true when it did, false when the job had ended, null when there is none. */
export async function stopJob(sql: Sql, jobId: string): Promise<boolean | null> {
  const rows = await sql`select public.stop_job(j.id) as stopped from public.jobs j where j.id = ${jobId}`;
  return rows.length ? rows[0]!.stopped === true : null;
}

/** Pauses a portal (false: it was paused already; null: no such portal). */
export async function pausePortal(sql: Sql, portalId: string, pausedBy: string, reason: string | null): Promise<boolean | null> {
  const rows = await sql`select public.pause_portal(p.id, ${pausedBy}, ${reason}) as paused from public.portals p where p.id = ${portalId}`;
  return rows.length ? rows[0]!.paused === true : null;
}

/** Resumes a paused portal (false: it was not paused; null: no such portal). */
export async function resumePortal(sql: Sql, portalId: string): Promise<boolean | null> {
  const rows = await sql`select public.resume_portal(p.id) as resumed from public.portals p where p.id = ${portalId}`;
  return rows.length ? rows[0]!.resumed === true : null;
}

export interface OperatorJobFilter {
  status?: string;
  portalId?: string;
  kind?: string;
  since?: Date;
  until?: Date;
  limit: number;
  beforeId?: string;
}

export interface OperatorJobRow {
  id: string; run_id: string; portal_id: string; portal_name: string; hubspot_portal_id: string; portal_paused: boolean;
  kind: string; content_type: string; status: string; attempts: number; max_attempts: number; progress_done: number;
  progress_total: number | null; last_error: string | null; waiting_reason: string | null; created_at: Date;
  started_at: Date | null; finished_at: Date | null; updated_at: Date; run_status: string; run_trigger: string; run_fetch_mode: string | null;
}

/** Every user's jobs, newest first, filtered (operator_jobs). */
export async function operatorJobs(sql: Sql, f: OperatorJobFilter): Promise<OperatorJobRow[]> {
  return [...await sql<OperatorJobRow[]>`select id::text, run_id, portal_id, portal_name, hubspot_portal_id::text, portal_paused, kind,
      content_type, status, attempts, max_attempts, progress_done, progress_total, last_error, waiting_reason, created_at,
      started_at, finished_at, updated_at, run_status, run_trigger, run_fetch_mode
    from public.operator_jobs(${f.status ?? null}, ${f.portalId ?? null}, ${f.kind ?? null}, ${f.since ?? null}, ${f.until ?? null},
                              ${f.limit}, ${f.beforeId ?? null})`];
}

export interface OperatorPortalRow {
  portal_id: string; name: string; owner_id: string; hubspot_portal_id: string; auth_kind: string; disconnected_at: Date | null;
  disconnected_reason: string | null; paused_at: Date | null; paused_by: string | null; pause_reason: string | null;
  pending_jobs: number; running_jobs: number; requests_last_10s: number; requests_last_hour: number;
  max_per_interval: number | null; interval_ms: number | null;
}

/** Every portal with its pause, active jobs and HubSpot requests (operator_portals). */
export async function operatorPortals(sql: Sql): Promise<OperatorPortalRow[]> {
  return [...await sql<OperatorPortalRow[]>`select portal_id, name, owner_id, hubspot_portal_id::text, auth_kind, disconnected_at,
      disconnected_reason, paused_at, paused_by, pause_reason, pending_jobs, running_jobs, requests_last_10s, requests_last_hour,
      max_per_interval, interval_ms
    from public.operator_portals()`];
}

/** The portal's HubSpot requests per 10-s window since `since` (hubspot_request_history). */
export async function requestHistory(sql: Sql, hubspotPortalId: string, since: Date): Promise<{ window_start: Date; requests: number }[]> {
  return [...await sql<{ window_start: Date; requests: number }[]>`select window_start, requests
    from public.hubspot_request_history(array[${hubspotPortalId}]::bigint[], ${since})`];
}

/** The portal's rate window now: requests in it, its allowance, and while full when the next can go. */
export async function rateWindow(sql: Sql, hubspotPortalId: string): Promise<{ requests: number; allowed: number; full_until: Date | null } | null> {
  const [row] = await sql<{ requests: number; allowed: number; full_until: Date | null }[]>`select requests, allowed, full_until
    from public.hubspot_rate_window(array[${hubspotPortalId}]::bigint[])`;
  return row ?? null;
}
