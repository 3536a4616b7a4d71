-- private.save_swept_table(job, table, row ids): the deletions a sweep of one
-- HubDB table finds, for the job row its caller holds FOR UPDATE: the
-- table's stored live rows (`<tableId>:<rowId>`) whose row id is not among
-- `row ids` (every row HubSpot lists in it) become tombstones
-- (tombstone_items); no other row is written. Adds them to the job's 'deleted'.
-- Called by save_fetched_page_raw (after saving the sweep's changed rows) in
-- an incremental HubDB rows job's sweep phase; owner only.
create function private.save_swept_table(p_job public.jobs, p_table_id text, p_row_ids text[]) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  -- EXCEPT (hashed or sorted) rather than `<> all (p_row_ids)`, which compares every pair;
  -- on row ids, so only the few missing ones are prefixed again.
  v_deleted := private.tombstone_items(p_job, array(
    select p_table_id || ':' || g.row_id
      from (select substr(s.hubspot_id, char_length(p_table_id) + 2) as row_id
              from public.hubspot_content s
             where s.portal_id = p_job.portal_id and s.content_type = 'hubdb_rows' and s.deleted_at is null
               and split_part(s.hubspot_id, ':', 1) = p_table_id
            except
            select unnest(p_row_ids)) g));
  update public.jobs j
     set result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'deleted', coalesce((j.result ->> 'deleted')::integer, 0) + v_deleted,
           'swept', coalesce((j.result ->> 'swept')::integer, 0) + cardinality(p_row_ids))
   where j.id = p_job.id;
  return jsonb_build_object('deleted', v_deleted);
end;
$$;
