-- public.settle_stuck_runs(when_due): the stuck-run safety net: fails jobs
-- whose last job lease expired, then settles unfinished runs that have jobs
-- and none active (run rows FOR UPDATE SKIP LOCKED, at most 1,000). With
-- p_when_due (the worker, at the start of every invocation) it runs only when
-- private.settle_stuck_runs_state.every has passed since it last ran, and only
-- in one caller at a time (the state row FOR UPDATE SKIP LOCKED): a fleet's
-- invocations start every second, and the scan reads every run in flight.
-- Returns the runs it settled. For the service role only.
create function public.settle_stuck_runs(p_when_due boolean default false) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_settled integer := 0;
begin
  if p_when_due then
    perform 1 from private.settle_stuck_runs_state s
     where s.id and s.last_settled_at <= now() - s.every
       for update skip locked;
    if not found then
      return 0;
    end if;
    update private.settle_stuck_runs_state s set last_settled_at = now() where s.id;
  end if;
  v_settled := private.fail_exhausted_jobs(1000);
  for v_run_id in
    select r.id
      from public.runs r
     where r.finished_at is null
       and exists (select 1 from public.jobs j where j.run_id = r.id)
       and not exists (select 1 from public.jobs j where j.run_id = r.id and j.status in ('pending', 'running'))
     order by r.created_at
     limit 1000
       for update of r skip locked
  loop
    if private.settle_run(v_run_id) then
      v_settled := v_settled + 1;
    end if;
  end loop;
  return v_settled;
end;
$$;
comment on function public.settle_stuck_runs(boolean) is
  'Settles runs left pending/running after all their jobs ended (and fails jobs whose last job lease expired). Returns runs settled. p_when_due: only when private.settle_stuck_runs_state.every has passed since the last time (the worker''s call).';
