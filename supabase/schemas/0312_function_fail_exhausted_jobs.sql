-- private.fail_exhausted_jobs(limit): fails running jobs whose job lease expired
-- on their last attempt, settling their runs; returns the runs it finished.
-- Called by claim_jobs and settle_stuck_runs, which may already hold a run
-- and a job: run rows are taken FOR UPDATE SKIP LOCKED (a busy run waits for
-- the next call), never waited for.
create function private.fail_exhausted_jobs(p_limit integer default 50) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_job record;
  v_finished integer := 0;
begin
  for v_job in
    select j.id, j.run_id
      from public.jobs j
     where j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts
     order by j.lease_expires_at
     limit p_limit
  loop
    perform 1 from public.runs r where r.id = v_job.run_id for update skip locked;
    if not found then
      continue;
    end if;
    update public.jobs j
       set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           last_error = format('Job lease expired on attempt %s of %s; the worker stopped responding (%s).',
                               j.attempts, j.max_attempts, coalesce(left(j.last_error, 200), 'no error recorded'))
     where j.id = v_job.id and j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts;
    if found and private.settle_run(v_job.run_id) then
      v_finished := v_finished + 1;
    end if;
  end loop;
  return v_finished;
end;
$$;
