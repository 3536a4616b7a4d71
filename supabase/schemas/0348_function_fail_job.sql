-- public.fail_job(job, token, error, retryable): records the holder's failure
-- and returns the outcome: 'pending' (retried after backoff with jitter),
-- 'failed' (for good; the run settled by counters) or null (not the holder).
-- Locks the run FOR UPDATE, then the job (v_running: see docs/decisions/0003).
-- For the service role only (the worker; release_job).
create function public.fail_job(p_job_id bigint, p_token bigint, p_error text, p_retryable boolean default true)
returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_status text;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return null;
  end if;
  with done as (
    update public.jobs j
       set status = case when p_retryable and j.attempts < j.max_attempts then 'pending' else 'failed' end,
           run_after = case when p_retryable and j.attempts < j.max_attempts
                            then now() + make_interval(secs => least(k.backoff_max_seconds,
                                   k.backoff_base_seconds * power(2, j.attempts - 1)) * (0.5 + random() / 2))
                            else j.run_after end,
           finished_at = case when p_retryable and j.attempts < j.max_attempts then null else now() end,
           lease_expires_at = null,
           last_error = left(p_error, 4000),
           updated_at = now()
      from private.job_kinds k
     where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now()
       and k.kind = j.kind
    returning j.run_id, j.status, j.last_error
  ), counted as (
    update public.runs r
       set jobs_failed = r.jobs_failed + 1,
           status = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_completed = 0 then 'failed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from done d
     where d.status = 'failed' and r.id = d.run_id and r.finished_at is null
    returning r.id, r.owner_id, r.kind, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
              d.last_error
  ), notified as (
    -- The first error is the earliest failed job's: an earlier one if there is
    -- one (this statement's own update is not visible to its subqueries), else this one.
    insert into public.notifications (user_id, run_id, kind, message)
    select c.owner_id, c.id, 'run_' || c.status,
           private.run_notification_message(c.kind, c.status, c.jobs_total, c.jobs_completed, c.jobs_failed, c.jobs_stopped,
             coalesce((select f.last_error from public.jobs f
                        where f.run_id = c.id and f.status = 'failed' order by f.finished_at limit 1), c.last_error))
      from counted c
     where c.finished_at is not null
    on conflict (run_id) do nothing
  )
  select d.status into v_status from done d;
  return v_status;
end;
$$;
