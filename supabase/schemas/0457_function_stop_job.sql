-- public.stop_job(job): an operator stops one pending or running job (a
-- running holder learns at its next write, as after stop_run); its run is
-- settled (stopped once all its jobs ended). False when the job had already
-- ended. Locks the run, then the job. For the service role only (the
-- orchestrator, for operators).
create function public.stop_job(p_job_id bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  v_run_id := private.lock_run_of_job(p_job_id);
  if v_run_id is null then
    raise exception 'stop_job: job % not found', p_job_id using errcode = 'P0002';
  end if;
  update public.jobs j
     set status = 'stopped', finished_at = now(), lease_expires_at = null, waiting_reason = null, updated_at = now()
   where j.id = p_job_id and j.status in ('pending', 'running');
  if not found then
    return false;
  end if;
  perform private.settle_run(v_run_id);
  return true;
end;
$$;
