-- private.tables_list_holder(job, fencing_token, caller): the job, when the caller
-- holds it (its fencing token, running, lease not expired) and it may use its
-- run's HubDB tables list (a fetch of HubDB tables or rows);
-- null when fenced off; raises for any other job. The shared check of
-- take_hubdb_tables_list and store_hubdb_tables_list; owner only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function private.tables_list_holder(p_job_id bigint, p_fencing_token bigint, p_caller text)
returns public.jobs
language plpgsql
stable
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now();
  if not found then
    return null;
  end if;
  if v_job.kind <> 'fetch' or v_job.content_type not in ('hubdb_tables', 'hubdb_rows') then
    raise exception '%: job % is not a fetch of HubDB tables or rows', p_caller, p_job_id using errcode = '22023';
  end if;
  return v_job;
end;
$$;
