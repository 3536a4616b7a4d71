-- public.reconcile_stuck_runs(): the safety net at the start of every worker
-- invocation: fails jobs whose last job lease expired, then settles unfinished
-- runs whose jobs are all terminal (run rows FOR UPDATE SKIP LOCKED, at most
-- 1,000). Returns the runs it settled. For the service role only.
create function public.reconcile_stuck_runs() returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_fixed integer := 0;
begin
  v_fixed := private.fail_exhausted_jobs(1000);
  for v_run_id in
    select r.id
      from public.runs r
      join lateral (
        select count(*) as total,
               count(*) filter (where j.status in ('pending', 'running')) as active
          from public.jobs j
         where j.run_id = r.id
      ) c on true
     where r.finished_at is null and c.total > 0 and c.active = 0
     order by r.created_at
     limit 1000
       for update of r skip locked
  loop
    if private.settle_run(v_run_id) then
      v_fixed := v_fixed + 1;
    end if;
  end loop;
  return v_fixed;
end;
$$;
comment on function public.reconcile_stuck_runs() is
  'Settles runs left pending/running after all their jobs ended (and fails jobs whose last job lease expired). Returns runs settled.';
