-- public.fail_job(job, token, error, retryable): records the holder's failure
-- and returns the outcome: 'pending' (retried after backoff with jitter),
-- 'failed' (for good; the run settled by counters, count_finished_jobs) or
-- null (not the holder).
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
  v_run_id uuid;
  v_status text;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  if private.lock_run_of_job(p_job_id) is null then
    return null;
  end if;
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
  returning j.run_id, j.status into v_run_id, v_status;
  if v_status = 'failed' then
    perform private.count_finished_jobs(v_run_id, 0, 1);
  end if;
  return v_status;
end;
$$;
