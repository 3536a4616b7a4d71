-- private.advance_publish_job(job, done): a recorded batch's effect on the
-- plan, publish or restore job row its caller holds FOR UPDATE: progress_done
-- plus the items it settled, the job lease extended once half of it is spent
-- (as advance_fetch_job), the run marked started. Owner only.
create function private.advance_publish_job(p_job public.jobs, p_done integer) returns void
language plpgsql
set search_path = ''
as $$
begin
  update public.jobs j
     set progress_done = j.progress_done + p_done,
         lease_expires_at = case when j.lease_expires_at < now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds) / 2.0)
                                 then now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds))
                                 else j.lease_expires_at end,
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
end;
$$;
