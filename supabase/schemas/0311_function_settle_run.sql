-- private.settle_run(run): recounts a run's jobs; when all are terminal it
-- finishes the run and settles it as counting does (settle_finished_run; its
-- quiet cycles are folded by the portal's next counted one). The caller holds
-- the run's lock (stop_run, fail_exhausted_jobs, disconnect_portal,
-- settle_stuck_runs). A publish or restore run that goes on fails the items
-- of its jobs that failed or were stopped (private.fail_publish_items). True
-- when this call finished the run.
create function private.settle_run(p_run_id uuid) returns boolean
language plpgsql
set search_path = ''
as $$
declare
  v_total integer;
  v_completed integer;
  v_failed integer;
  v_stopped integer;
  v_active integer;
  v_started integer;
  v_status text;
  v_run public.runs;
begin
  select count(*),
         count(*) filter (where j.status = 'completed'),
         count(*) filter (where j.status = 'failed'),
         count(*) filter (where j.status = 'stopped'),
         count(*) filter (where j.status in ('pending', 'running')),
         count(*) filter (where j.started_at is not null)
    into v_total, v_completed, v_failed, v_stopped, v_active, v_started
    from public.jobs j
   where j.run_id = p_run_id;

  if v_total = 0 then
    return false;
  end if;

  if v_active > 0 then
    update public.runs r
       set jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped,
           status = case when r.status = 'pending' and v_started > 0 then 'running' else r.status end,
           started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end
     where r.id = p_run_id and r.finished_at is null;
    if v_failed + v_stopped > 0
       and exists (select 1 from public.runs r where r.id = p_run_id and r.kind in ('publish', 'restore') and r.finished_at is null) then
      perform private.fail_publish_items(p_run_id, false);
    end if;
    return false;
  end if;

  v_status := case
    when v_stopped > 0 then 'stopped'
    when v_failed = 0 then 'completed'
    when v_completed = 0 then 'failed'
    else 'partially_failed'
  end;

  update public.runs r
     set status = v_status, finished_at = now(),
         started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end,
         jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped,
         quiet = v_status = 'completed' and r.trigger = 'schedule' and r.kind = 'fetch' and private.run_is_quiet(r.id)
   where r.id = p_run_id and r.finished_at is null
  returning r.* into v_run;
  if not found then
    return false;
  end if;
  -- Compaction waits for a counted settlement: this may run for many portals in one call, in no portal order.
  perform private.settle_finished_run(v_run, false);
  return true;
end;
$$;
