-- private.save_swept_table(job, table, missing ids): the deletions a sweep of
-- one HubDB table found, for the job row its caller holds FOR UPDATE: the
-- table's stored live rows whose row id is among `missing ids` (those the
-- worker found missing from every row HubSpot lists in it, by
-- stored_hubdb_row_ids: decision 0057) become tombstones (tombstone_items);
-- other ids are skipped, and no other row is written. Adds them to the job's
-- 'deleted'. Called by save_fetched_page_raw (after saving the sweep's changed
-- rows) in an incremental HubDB rows job's sweep phase; owner only.
create function private.save_swept_table(p_job public.jobs, p_table_id text, p_missing_ids text[]) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  v_deleted := private.tombstone_items(p_job, array(select p_table_id || ':' || m.row_id from unnest(p_missing_ids) m(row_id)));
  if v_deleted > 0 then
    update public.jobs j
       set result = coalesce(j.result, '{}'::jsonb)
                    || jsonb_build_object('deleted', coalesce((j.result ->> 'deleted')::integer, 0) + v_deleted)
     where j.id = p_job.id;
  end if;
  return jsonb_build_object('deleted', v_deleted);
end;
$$;
