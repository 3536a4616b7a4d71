// Why a pending job (and its run) waits, as the HTTP API shows it:
// `waitingReason` in words (the jobs table's waiting_reason when the worker
// parked the job), `waitingReasonCode` for programs, `waitingUntil` when the wait
// has an end. One SQL expression, used wherever jobs or runs are answered, so
// every answer derives it the same way from the job's row and the portal's
// other jobs (RLS: the caller sees only their own, which the portal's jobs all are).
import type { TransactionSql } from '../db.ts';

/** The values of `waitingReasonCode` (null: not waiting, or only queued for a free worker). */
export const WAITING_REASONS = ['hubspot_daily_limit', 'hubspot_rate_limit', 'fetch_in_flight', 'export_in_flight', 'retry_backoff', 'portal_paused'] as const;
export type WaitingReason = (typeof WAITING_REASONS)[number];

/** The waiting columns a job (`w.*`) or run (`rw.*`) read carries. */
export interface WaitingColumns {
  waiting_reason_code: WaitingReason | null;
  waiting_reason_text: string | null;
  waiting_until: Date | null;
}

/**
 * The job `j`'s waiting reason code. A parked job (the worker's park_job, which
 * writes "waiting for HubSpot's daily limit until …" or "HubSpot asked to wait
 * N s") until its run_after; an export while a fetch of its portal and type is
 * in flight; a fetch while an export of them runs (they never overlap:
 * private.claimable); a retryable failure until its backoff ends; a portal an
 * operator paused (pause_portal holds its jobs with run_after 'infinity': no end).
 */
const JOB_WAITING_REASON = `case
  when j.status <> 'pending' then null
  when j.run_after = 'infinity' then 'portal_paused'
  when j.waiting_reason is not null and j.run_after > now() then
    case when j.waiting_reason like 'waiting for HubSpot''s daily limit%' then 'hubspot_daily_limit' else 'hubspot_rate_limit' end
  when j.kind = 'export' and exists (select 1 from public.jobs x where x.portal_id = j.portal_id and x.kind = 'fetch'
         and x.content_type = j.content_type and x.status in ('pending', 'running')) then 'fetch_in_flight'
  when j.kind = 'fetch' and exists (select 1 from public.jobs x where x.portal_id = j.portal_id and x.kind = 'export'
         and x.content_type = j.content_type and x.status = 'running') then 'export_in_flight'
  when j.last_error is not null and j.run_after > now() then 'retry_backoff'
end`;

/** When the job `j`'s wait ends, for the reasons that have an end. */
const JOB_WAITING_UNTIL = `case when j.status = 'pending' and j.run_after > now() and j.run_after <> 'infinity' then j.run_after end`;

/**
 * The waiting columns of the job `j` (a lateral join named `w`): the reason's
 * code, its text (what the worker stored when it parked the job, e.g. "waiting
 * for HubSpot's daily limit until <ISO time>", else a sentence of the same
 * form) and when the wait ends.
 */
const JOB_WAITING = `lateral (
  select c.code as waiting_reason_code,
         case c.code
           when 'hubspot_daily_limit' then j.waiting_reason
           when 'hubspot_rate_limit' then j.waiting_reason
           when 'portal_paused' then j.waiting_reason
           when 'fetch_in_flight' then 'export waiting for the fetch'
           when 'export_in_flight' then 'fetch waiting for the export'
           when 'retry_backoff' then 'retrying after a failure until ' || to_char(j.run_after at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
         end as waiting_reason_text,
         case when c.code is not null then ${JOB_WAITING_UNTIL} end as waiting_until
    from (select ${JOB_WAITING_REASON} as code) c) w`;

/** `cross join` of the waiting columns (`w.*`), for a query over `public.jobs j`. */
export function jobWaitingJoin(tx: TransactionSql) {
  return tx.unsafe(`cross join ${JOB_WAITING}`);
}

/**
 * The waiting columns of the run `r` (`rw.*`): while the run is unfinished and
 * none of its jobs is running, those of its first waiting job (by id); null
 * otherwise (some job is working, or none waits for anything).
 */
export function runWaitingJoin(tx: TransactionSql) {
  return tx.unsafe(`left join lateral (
    select w.waiting_reason_code, w.waiting_reason_text, w.waiting_until
      from public.jobs j cross join ${JOB_WAITING}
     where j.run_id = r.id and r.finished_at is null
       and not exists (select 1 from public.jobs jr where jr.run_id = r.id and jr.status = 'running')
       and w.waiting_reason_code is not null
     order by j.id
     limit 1) rw on true`);
}
