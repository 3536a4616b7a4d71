-- public.retry_job(job): a failed job is pending again with one attempt more
-- (checkpoint kept, error cleared, a new run of retryable failures: retry_until
-- cleared) and its run reopened (old notification
-- deleted), settled again when the job ends. 'retried', 'not_failed', 'busy'
-- (another active job of its portal, kind and type) or 'disconnected'. Locks
-- the run, then the job. The service role only (the orchestrator, for operators).
create function public.retry_job(p_job_id bigint) returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_job public.jobs;
begin
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if not found then
    raise exception 'retry_job: job % not found', p_job_id using errcode = 'P0002';
  end if;
  perform 1 from public.runs r where r.id = v_run_id for update;
  select * into v_job from public.jobs j where j.id = p_job_id for update;
  if v_job.status <> 'failed' then
    return 'not_failed';
  end if;
  if exists (select 1 from public.portals p where p.id = v_job.portal_id and p.disconnected_at is not null) then
    return 'disconnected';
  end if;
  if exists (select 1 from public.jobs a
              where a.portal_id = v_job.portal_id and a.kind = v_job.kind and a.content_type = v_job.content_type
                and a.status in ('pending', 'running')) then
    return 'busy';
  end if;
  begin
    update public.jobs j
       set status = 'pending', finished_at = null, run_after = now(), lease_expires_at = null,
           max_attempts = greatest(j.max_attempts, j.attempts + 1), last_error = null, waiting_reason = null,
           stalled_releases = 0, retry_until = null, failing_progress = null, updated_at = now()
     where j.id = p_job_id;
  exception when unique_violation then
    return 'busy'; -- an active job of that type was created meanwhile (create_run, another retry)
  end;
  update public.runs r
     set status = case when r.started_at is null then 'pending' else 'running' end,
         finished_at = null,
         waiting_reason = (select j.waiting_reason from public.jobs j where j.id = p_job_id) -- a paused portal's
   where r.id = v_run_id and r.finished_at is not null;
  delete from public.notifications n where n.run_id = v_run_id;
  perform private.settle_run(v_run_id);
  return 'retried';
end;
$$;
