-- private.advance_fetch_job(job, counts, checkpoint, total): a saved page's
-- effect on the job row its caller holds FOR UPDATE: the checkpoint, progress
-- and result counts ({fetched, added, updated, unchanged} of the page, and one
-- more page), the job lease extended once half of it is spent; the run marked started. Called by
-- save_page and by save_fetched_page_raw for a page re-read unparsed; owner only.
create function private.advance_fetch_job(p_job public.jobs, p_counts jsonb, p_checkpoint jsonb, p_progress_total integer)
returns void
language plpgsql
set search_path = ''
as $$
begin
  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + (p_counts ->> 'fetched')::integer,
         progress_total = coalesce(p_progress_total, j.progress_total),
         result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'fetched', coalesce((j.result ->> 'fetched')::integer, 0) + (p_counts ->> 'fetched')::integer,
           'added', coalesce((j.result ->> 'added')::integer, 0) + (p_counts ->> 'added')::integer,
           'updated', coalesce((j.result ->> 'updated')::integer, 0) + (p_counts ->> 'updated')::integer,
           'unchanged', coalesce((j.result ->> 'unchanged')::integer, 0) + (p_counts ->> 'unchanged')::integer,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         -- Extended once half the job lease is spent: a job lease left as it was lets the row be updated in place (HOT, no index entries).
         lease_expires_at = case when j.lease_expires_at < now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds) / 2.0)
                                 then now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds))
                                 else j.lease_expires_at end,
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
end;
$$;
