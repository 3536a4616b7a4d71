-- public.take_hubdb_tables_list(job, fencing_token, read_seconds): for the holder of a
-- fetch job of HubDB tables or rows, what to do for the HubDB tables list of
-- its run (private.hubdb_tables_lists): 'use' the pages another job of the run
-- stored (with read_at), 'wait' wait_ms while another job of the run reads it
-- (its read lease), or 'read' it from HubSpot (the caller now holds the read
-- lease for read_seconds, then stores the pages with store_hubdb_tables_list).
-- A row of another run (an earlier cycle) is never used: it is taken over. No
-- row when fenced off. Locks the portal's list row only. The service role only.
create function public.take_hubdb_tables_list(p_job_id bigint, p_fencing_token bigint, p_read_seconds integer default 20)
returns table (decision text, pages text[], read_at timestamptz, wait_ms integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_list private.hubdb_tables_lists;
begin
  if p_read_seconds is null or p_read_seconds not between 1 and 300 then
    raise exception 'take_hubdb_tables_list: a read lease of 1-300 s is required' using errcode = '22023';
  end if;
  v_job := private.tables_list_holder(p_job_id, p_fencing_token, 'take_hubdb_tables_list');
  if v_job.id is null then
    return;
  end if;

  insert into private.hubdb_tables_lists as l (portal_id, run_id) values (v_job.portal_id, v_job.run_id)
  on conflict (portal_id) do nothing;
  select * into v_list from private.hubdb_tables_lists l where l.portal_id = v_job.portal_id for update;
  if v_list.run_id = v_job.run_id and v_list.pages is not null then
    return query select 'use'::text, v_list.pages, v_list.read_at, null::integer;
    return;
  end if;
  if v_list.run_id = v_job.run_id and v_list.reader_job_id <> p_job_id and v_list.read_lease_expires_at > now() then
    return query select 'wait'::text, null::text[], null::timestamptz,
      greatest(1, ceil(extract(epoch from v_list.read_lease_expires_at - now()) * 1000))::integer;
    return;
  end if;
  -- Nobody of this run reads it (or its reader's read lease ran out), or the row is another run's.
  update private.hubdb_tables_lists l
     set run_id = v_job.run_id, reader_job_id = p_job_id, read_lease_expires_at = now() + make_interval(secs => p_read_seconds),
         pages = null, read_at = null
   where l.portal_id = v_job.portal_id;
  return query select 'read'::text, null::text[], null::timestamptz, null::integer;
end;
$$;
