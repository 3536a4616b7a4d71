-- public.complete_job(job, token, result): the holder completes its job and
-- settles the run by counters (the last job finishes it and writes its
-- notification); false for anyone else. Locks the run FOR UPDATE, then the job
-- (v_running: see docs/decisions/0003). For the service role only.
create function public.complete_job(p_job_id bigint, p_token bigint, p_result jsonb default null)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_done boolean;
begin
  -- Lock order: the run, then the job.
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return false;
  end if;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           result = case when p_result is null then j.result else coalesce(j.result, '{}'::jsonb) || p_result end
     where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  ), counted as (
    update public.runs r
       set jobs_completed = r.jobs_completed + 1,
           status = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_failed = 0 then 'completed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from done d
     where r.id = d.run_id and r.finished_at is null
    returning r.id, r.owner_id, r.kind, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped
  ), notified as (
    insert into public.notifications (user_id, run_id, kind, message)
    select c.owner_id, c.id, 'run_' || c.status,
           private.run_notification_message(c.kind, c.status, c.jobs_total, c.jobs_completed, c.jobs_failed, c.jobs_stopped,
             (select f.last_error from public.jobs f
               where f.run_id = c.id and f.status = 'failed' order by f.finished_at limit 1))
      from counted c
     where c.finished_at is not null
    on conflict (run_id) do nothing
  )
  select exists (select 1 from done) into v_done;
  return v_done;
end;
$$;
