-- public.complete_jobs(ids, tokens): completes many held jobs at once and
-- settles their runs by counters; returns how many were still held. Locks the
-- runs FOR UPDATE in id order, then the jobs (v_running: see
-- docs/decisions/0003). For the service role only.
create function public.complete_jobs(p_job_ids bigint[], p_tokens bigint[])
returns integer
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_count integer;
begin
  if p_job_ids is null or p_tokens is null or cardinality(p_job_ids) <> cardinality(p_tokens) then
    raise exception 'complete_jobs: job ids and tokens must be arrays of the same length' using errcode = '22023';
  end if;
  perform 1 from public.runs r
   where r.id in (select j.run_id from public.jobs j where j.id = any (p_job_ids))
   order by r.id
     for update;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now()
      from unnest(p_job_ids, p_tokens) as t(id, token)
     where j.id = t.id and j.fencing_token = t.token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  ), per_run as (
    select d.run_id, count(*)::integer as n from done d group by d.run_id
  ), counted as (
    update public.runs r
       set jobs_completed = r.jobs_completed + p.n,
           status = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_failed = 0 then 'completed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from per_run p
     where r.id = p.run_id and r.finished_at is null
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
  select count(*)::integer into v_count from done;
  return v_count;
end;
$$;
