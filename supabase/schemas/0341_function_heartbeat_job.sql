-- public.heartbeat_job(job, fencing_token, ...): the holder extends its job lease and
-- records progress; false when it no longer holds the job (stop working). Locks
-- the held job row (by jobs_pkey: v_running is compared as a constant, see
-- docs/decisions/0003); the run only SKIP LOCKED. The service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.heartbeat_job(
  p_job_id bigint, p_fencing_token bigint,
  p_progress_done integer default null, p_progress_total integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if p_progress_done < 0 or p_progress_total < 0 then
    raise exception 'progress must be non-negative' using errcode = '22023';
  end if;
  update public.jobs j
     set lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         progress_done = coalesce(p_progress_done, j.progress_done),
         progress_total = coalesce(p_progress_total, j.progress_total),
         checkpoint = coalesce(p_checkpoint, j.checkpoint),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running
     and j.lease_expires_at > now() and k.kind = j.kind
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  perform private.mark_run_started(v_run_id);
  return true;
end;
$$;
