-- public.complete_job(job, fencing_token, result): the holder completes its job and
-- settles the run by counters (private.count_finished_jobs: the last job
-- finishes it); false for anyone else. Locks the run FOR UPDATE, then the job
-- (v_running: see docs/decisions/0003). For the service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.complete_job(p_job_id bigint, p_fencing_token bigint, p_result jsonb default null)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if private.lock_run_of_job(p_job_id) is null then
    return false;
  end if;
  -- A CTE named done, as in complete_jobs: the holder-plan check (tests/queue-plans.test.ts) reads its scan by that name.
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           result = case when p_result is null then j.result else coalesce(j.result, '{}'::jsonb) || p_result end
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  )
  select d.run_id into v_run_id from done d;
  if v_run_id is null then
    return false;
  end if;
  perform private.count_finished_jobs(v_run_id, 1, 0);
  return true;
end;
$$;
