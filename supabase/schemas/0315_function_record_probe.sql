-- private.record_probe(portal, run, types, changed, sweep_from, tables_pages):
-- what a probe leaves besides its changed types' fetch jobs: a changed HubDB
-- type's tables list, stored for the run (private.hubdb_tables_lists: its
-- jobs read it no more; take_hubdb_tables_list answers 'use'); the types that
-- did not change recorded as synced now (last_incremental_at, and on a sweep
-- cycle HubDB rows' last_sweep_at: sweep_from, when the probe was set). Locks
-- the portal's list row when it stores. complete_probe_job and
-- report_schedule_probe call it; owner only.
create function private.record_probe(p_portal_id uuid, p_run_id uuid, p_types text[], p_changed text[],
                                     p_sweep_from timestamptz, p_tables_pages text[])
returns void
language plpgsql
set search_path = ''
-- Its statement's custom plans never beat the generic one: planned once, not at every quiet cycle.
set plan_cache_mode = force_generic_plan
as $$
begin
  if p_run_id is not null and p_changed && array['hubdb_tables', 'hubdb_rows'] then
    insert into private.hubdb_tables_lists as l (portal_id, run_id, pages, read_at)
    values (p_portal_id, p_run_id, p_tables_pages, now())
    on conflict (portal_id) do update
       set run_id = excluded.run_id, pages = excluded.pages, read_at = excluded.read_at, reader_job_id = null, read_lease_expires_at = null;
  end if;
  update public.sync_marks m
     set last_incremental_at = now(), updated_at = now(),
         last_sweep_at = case when m.content_type = 'hubdb_rows' and p_sweep_from is not null then p_sweep_from else m.last_sweep_at end
   where m.portal_id = p_portal_id and m.content_type = any (p_types)
     and m.content_type <> all (coalesce(p_changed, '{}'));
end;
$$;
