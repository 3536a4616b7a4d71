-- private.count_finished_jobs(run, completed, failed): settlement by counters:
-- adds jobs that just finished to their unfinished run's counters; when they
-- were its last, finishes the run (status, quiet) and settles it
-- (settle_finished_run). A publish or restore run that goes on fails the
-- items of its jobs that failed (private.fail_publish_items). The caller holds
-- the run's lock and has already finished the jobs. True when this call
-- finished the run; owner only.
create function private.count_finished_jobs(p_run_id uuid, p_completed integer, p_failed integer) returns boolean
language plpgsql
set search_path = ''
as $$
declare
  v_run public.runs;
begin
  update public.runs r
     set jobs_completed = r.jobs_completed + p_completed,
         jobs_failed = r.jobs_failed + p_failed,
         status = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then 'running'
                       when r.jobs_stopped > 0 then 'stopped'
                       when r.jobs_failed + p_failed = 0 then 'completed'
                       when r.jobs_completed + p_completed = 0 then 'failed'
                       else 'partially_failed' end,
         finished_at = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then null else now() end,
         started_at = coalesce(r.started_at, now()),
         waiting_reason = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end,
         quiet = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped >= r.jobs_total
                           and r.trigger = 'schedule' and r.kind = 'fetch' and r.jobs_stopped = 0 and r.jobs_failed + p_failed = 0
                      then private.run_is_quiet(r.id) else false end
   where r.id = p_run_id and r.finished_at is null
  returning r.* into v_run;
  if not found or v_run.finished_at is null then
    if p_failed > 0 and v_run.kind in ('publish', 'restore') then
      perform private.fail_publish_items(p_run_id, false);
    end if;
    return false;
  end if;
  perform private.settle_finished_run(v_run, true);
  return true;
end;
$$;
