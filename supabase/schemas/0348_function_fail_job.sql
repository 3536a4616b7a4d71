-- public.fail_job(job, fencing_token, error, retryable): records the holder's failure
-- and returns the outcome: 'pending' (retried after a backoff with jitter, the
-- attempt given back), 'failed' (for good; the run settled by counters,
-- count_finished_jobs) or null (not the holder).
-- A retryable failure is retried until the job has failed for its kind's
-- job_kinds.retry_for_seconds without progress (retry_until: set at the first
-- failure of such a run of them, kept while progress_done stays at or below
-- failing_progress). Each wait is about as long as the job has been failing
-- (at least backoff_base_seconds, at most backoff_max_seconds, 50–100 %
-- jitter), so the waits double, and never runs past retry_until: the last try
-- is at the give-up time. It gives the attempt back, as release and park do:
-- attempts count claims that ended without an answer (a killed worker, whose
-- job lease expired), so an outage costs time, never attempts. A permanent
-- failure fails the job at once. Locks the run FOR UPDATE, then the job
-- (v_running: see docs/decisions/0003). For the service role only (the
-- worker; release_job). Decision: docs/decisions/0072.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.fail_job(p_job_id bigint, p_fencing_token bigint, p_error text, p_retryable boolean default true)
returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_job record;
  v_until timestamptz;
  v_retry boolean;
  v_wait double precision;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  if private.lock_run_of_job(p_job_id) is null then
    return null;
  end if;
  select j.run_id, j.progress_done, j.retry_until, j.failing_progress,
         k.retry_for_seconds, k.backoff_base_seconds, k.backoff_max_seconds
    into v_job
    from public.jobs j
    join private.job_kinds k on k.kind = j.kind
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
     for update of j;
  if not found then
    return null;
  end if;
  -- The run of failures goes on while nothing progressed since the last one; else it starts now.
  v_until := case when v_job.retry_until is not null and v_job.progress_done <= v_job.failing_progress then v_job.retry_until
                  else now() + make_interval(secs => v_job.retry_for_seconds) end;
  v_retry := p_retryable and now() < v_until;
  -- As long as it has failed so far (now - (v_until - retry_for)), within the kind's bounds, with jitter.
  v_wait := least(v_job.backoff_max_seconds,
                  greatest(v_job.backoff_base_seconds, extract(epoch from now() - v_until) + v_job.retry_for_seconds))
            * (0.5 + random() / 2);
  update public.jobs j
     set status = case when v_retry then 'pending' else 'failed' end,
         attempts = case when v_retry then greatest(j.attempts - 1, 0) else j.attempts end,
         run_after = case when v_retry then least(v_until, now() + make_interval(secs => v_wait)) else j.run_after end,
         finished_at = case when v_retry then null else now() end,
         retry_until = case when p_retryable then v_until else j.retry_until end,
         failing_progress = case when p_retryable then j.progress_done else j.failing_progress end,
         lease_expires_at = null,
         last_error = left(p_error, 4000),
         updated_at = now()
   where j.id = p_job_id;
  if not v_retry then
    perform private.count_finished_jobs(v_job.run_id, 0, 1);
  end if;
  return case when v_retry then 'pending' else 'failed' end;
end;
$$;
