// Why a pending job (and its run) waits, as the HTTP API shows it
// (`waitingReason`, with `waitingUntil` when the wait has an end). One SQL
// expression, used wherever jobs or runs are answered, so every answer derives
// it the same way from the job's row and the portal's other jobs (RLS: the
// caller sees only their own, which the portal's jobs all are).
import type { TransactionSql } from '../../shared/db.ts';

/** The values of `waitingReason` (null: not waiting, or only queued for a free worker). */
export const WAITING_REASONS = ['hubspot_daily_limit', 'hubspot_rate_limit', 'fetch_in_flight', 'export_in_flight', 'retry_backoff'] as const;
export type WaitingReason = (typeof WAITING_REASONS)[number];

/**
 * The job `j`'s waiting reason. A parked job (the worker's park_job, which
 * writes "waiting for HubSpot's daily limit until …" or "HubSpot asked to wait
 * N s") until its run_after; an export while a fetch of its portal and type is
 * in flight; a fetch while an export of them runs (they never overlap:
 * private.claimable); a retryable failure until its backoff ends.
 */
const JOB_WAITING_REASON = `case
  when j.status <> 'pending' then null
  when j.waiting_reason is not null and j.run_after > now() then
    case when j.waiting_reason like 'waiting for HubSpot''s daily limit%' then 'hubspot_daily_limit' else 'hubspot_rate_limit' end
  when j.kind = 'export' and exists (select 1 from public.jobs x where x.portal_id = j.portal_id and x.kind = 'fetch'
         and x.content_type = j.content_type and x.status in ('pending', 'running')) then 'fetch_in_flight'
  when j.kind = 'fetch' and exists (select 1 from public.jobs x where x.portal_id = j.portal_id and x.kind = 'export'
         and x.content_type = j.content_type and x.status = 'running') then 'export_in_flight'
  when j.last_error is not null and j.run_after > now() then 'retry_backoff'
end`;

/** When the job `j`'s wait ends, for the reasons that have an end. */
const JOB_WAITING_UNTIL = `case when j.status = 'pending' and j.run_after > now() then j.run_after end`;

/** `waiting_reason` and `waiting_until` columns for a query over `public.jobs j`. */
export function jobWaitingColumns(tx: TransactionSql) {
  return tx.unsafe(`(${JOB_WAITING_REASON}) as waiting_reason_code, (${JOB_WAITING_UNTIL}) as waiting_until`);
}

/**
 * `waiting_reason_code` and `waiting_until` of the run `r`: while the run is
 * unfinished and none of its jobs is running, those of its first waiting job
 * (by id); null otherwise (some job is working, or none waits for anything).
 */
export function runWaitingColumns(tx: TransactionSql) {
  return tx.unsafe(`w.waiting_reason_code, w.waiting_until`);
}

/** The lateral join runWaitingColumns reads (`w`), for a query over `public.runs r`. */
export function runWaitingJoin(tx: TransactionSql) {
  return tx.unsafe(`left join lateral (
    select (${JOB_WAITING_REASON}) as waiting_reason_code, (${JOB_WAITING_UNTIL}) as waiting_until
      from public.jobs j
     where j.run_id = r.id and r.finished_at is null
       and not exists (select 1 from public.jobs jr where jr.run_id = r.id and jr.status = 'running')
       and (${JOB_WAITING_REASON}) is not null
     order by j.id
     limit 1) w on true`);
}
