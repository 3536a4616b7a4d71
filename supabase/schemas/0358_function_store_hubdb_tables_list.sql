-- public.store_hubdb_tables_list(job, fencing_token, pages): the holder of a fetch job
-- of HubDB tables or rows that read its run's HubDB tables list
-- (take_hubdb_tables_list answered 'read') stores the pages for the run's
-- other job, and gives up its read lease. Answers the pages another job of
-- the run stored first (the caller uses those, so both jobs use one list);
-- null otherwise: stored, or not (fenced off, or the row taken over by another
-- run), the caller uses its own. Null pages only give up the read lease (the
-- read failed). Locks the portal's list row only. The service role only.
create function public.store_hubdb_tables_list(p_job_id bigint, p_fencing_token bigint, p_pages text[])
returns text[]
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_list private.hubdb_tables_lists;
begin
  if p_pages is not null and (cardinality(p_pages) = 0 or array_position(p_pages, null) is not null) then
    raise exception 'store_hubdb_tables_list: pages must be at least one page, none null' using errcode = '22023';
  end if;
  v_job := private.tables_list_holder(p_job_id, p_fencing_token, 'store_hubdb_tables_list');
  if v_job.id is null then
    return null;
  end if;

  select * into v_list from private.hubdb_tables_lists l
   where l.portal_id = v_job.portal_id and l.run_id = v_job.run_id
     for update;
  if not found then
    return null;
  end if;
  if v_list.pages is not null then
    return v_list.pages;
  end if;
  if p_pages is null then
    update private.hubdb_tables_lists l set reader_job_id = null, read_lease_expires_at = null
     where l.portal_id = v_job.portal_id and l.reader_job_id = p_job_id;
    return null;
  end if;
  update private.hubdb_tables_lists l set pages = p_pages, read_at = now(), reader_job_id = null, read_lease_expires_at = null
   where l.portal_id = v_job.portal_id;
  return null;
end;
$$;
