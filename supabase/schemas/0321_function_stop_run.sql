-- public.stop_run(run): stops a run: its pending and running jobs become
-- stopped at once (a running holder finds out at its next write) and the run
-- is settled. Locks the run FOR UPDATE, then its jobs. False when the run had
-- finished or does not exist. For the service role only (the orchestrator).
create function public.stop_run(p_run_id uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform 1 from public.runs r where r.id = p_run_id and r.finished_at is null for update;
  if not found then
    return false;
  end if;
  update public.jobs j
     set status = 'stopped', finished_at = now(), lease_expires_at = null, updated_at = now()
   where j.run_id = p_run_id and j.status in ('pending', 'running');
  perform private.settle_run(p_run_id);
  return true;
end;
$$;
