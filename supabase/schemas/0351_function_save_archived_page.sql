-- private.save_archived_page(job, ids, checkpoint): stores a page of items
-- HubSpot lists as archived (deleted) for the job row its caller holds FOR
-- UPDATE: the portal's live rows among them become tombstones
-- (tombstone_items); unknown ids are skipped. Checkpoint,
-- progress, counts ('deleted'), job lease; the run marked started. Called by
-- save_fetched_page_raw in an incremental job's archived phase; owner only.
create function private.save_archived_page(p_job public.jobs, p_ids text[], p_checkpoint jsonb) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  v_deleted := private.tombstone_items(p_job, p_ids);

  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + cardinality(p_ids),
         result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'deleted', coalesce((j.result ->> 'deleted')::integer, 0) + v_deleted,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
  return jsonb_build_object('fetched', 0, 'added', 0, 'updated', 0, 'unchanged', 0, 'deleted', v_deleted);
end;
$$;
