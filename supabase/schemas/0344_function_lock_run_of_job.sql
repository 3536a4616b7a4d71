-- private.lock_run_of_job(job): locks the job's run FOR NO KEY UPDATE (the
-- lock order: run, then job) and returns its id, null for an unknown job. The
-- one preamble of the holder calls that settle or park (complete_job,
-- fail_job, park_job, complete_fetch_job); for the owner only. NO KEY: it
-- excludes every other locker of the run as FOR UPDATE would, but not the
-- foreign-key check (FOR KEY SHARE of the run) that a job's second update in
-- one transaction makes (a sweep's page: its counts, then its deletions). So
-- a holder saving a page never waits for a settlement that holds the run,
-- and a settlement may wait for a job row (tombstone_rows_of_gone_tables:
-- decision 0068).
-- The holder calls' one shared opening; their fence stays written out in each (decision 0030).
create function private.lock_run_of_job(p_job_id bigint) returns uuid
language plpgsql
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if v_run_id is not null then
    perform 1 from public.runs r where r.id = v_run_id for no key update;
    if not found then
      return null;
    end if;
  end if;
  return v_run_id;
end;
$$;
