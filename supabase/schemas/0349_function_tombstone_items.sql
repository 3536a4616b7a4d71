-- private.tombstone_items(job, ids): the job's portal and type's live items
-- among `ids` become tombstones (deleted_at now, seen by the job, a new
-- change_seq, data kept); unknown and already deleted ids are skipped.
-- Returns how many. For the job's holder, which its caller has checked
-- (save_archived_page, save_swept_table); owner only.
create function private.tombstone_items(p_job public.jobs, p_ids text[]) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  update public.hubspot_content c
     set deleted_at = now(), last_seen_job_id = p_job.id, change_seq = nextval('private.content_change_seq')
   where c.portal_id = p_job.portal_id and c.content_type = p_job.content_type
     and c.hubspot_id = any (p_ids) and c.deleted_at is null;
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;
