-- private.tombstone_rows_of_gone_tables(job): a HubDB tables fetch job that has
-- just tombstoned tables (complete_fetch_job, its holder, in the same
-- transaction) takes their rows with them: the portal's live HubDB rows whose
-- table (the `<tableId>` of `<tableId>:<rowId>`) is one this job tombstoned
-- (deleted_at set, last_seen_job_id the job) become tombstones (deleted_at
-- now, seen by the job, a new change_seq, data kept), as a sweep does for the
-- rows of a table no longer live. So they go in the cycle that tombstones the
-- table, whether or not a HubDB rows job runs in it, at no HubSpot request.
-- Their change_seq follows the rows' commit order as every rows writer's
-- does: the portal's claim lock (claim_jobs' advisory lock) is taken first,
-- so no job of the portal is claimed (no rows job starts writing) until this
-- transaction ends; then the portal's running HubDB rows fetch job, if any,
-- is locked FOR UPDATE (a page of it being saved commits first, its next
-- waits). Neither wait can deadlock: a claim holding the claim lock only
-- tries locks and skips locked rows, and no transaction waits for a run row
-- while it holds a job row (decision 0068). Returns how many rows. Called
-- only when the job tombstoned a table: no statement otherwise. Owner only.
create function private.tombstone_rows_of_gone_tables(p_job public.jobs) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  perform pg_advisory_xact_lock(1903520117, hashtext(p_job.portal_id::text));
  perform 1 from public.jobs r
   where r.portal_id = p_job.portal_id and r.kind = 'fetch' and r.content_type = 'hubdb_rows'
     and r.status = 'running'
     for update;
  update public.hubspot_content c
     set deleted_at = now(), last_seen_job_id = p_job.id, change_seq = nextval('private.content_change_seq')
   where c.portal_id = p_job.portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
     and split_part(c.hubspot_id, ':', 1) = any (array(
           select t.hubspot_id from public.hubspot_content t
            where t.portal_id = p_job.portal_id and t.content_type = 'hubdb_tables'
              and t.last_seen_job_id = p_job.id and t.deleted_at is not null));
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;
