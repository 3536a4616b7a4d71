-- public.release_job(job, fencing_token, progress, checkpoint): the holder hands the
-- job back (pending, due now) without using an attempt; 'released', 'failed'
-- when it was the kind's max_stalled_releases-th release in a row without
-- progress (failed for good via fail_job: run, then job), null when not the
-- holder. Locks the held job row. For the service role only (the worker).
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.release_job(
  p_job_id bigint, p_fencing_token bigint, p_progress_done integer default null, p_checkpoint jsonb default null
) returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running';
  v_done integer;
  v_stalled integer;
  v_limit integer;
  v_kind text;
begin
  if p_progress_done < 0 then
    raise exception 'progress must be non-negative' using errcode = '22023';
  end if;
  select coalesce(p_progress_done, j.progress_done),
         case when coalesce(p_progress_done, j.progress_done) > coalesce(j.released_progress, -1) then 0
              else j.stalled_releases + 1 end,
         k.max_stalled_releases, j.kind
    into v_done, v_stalled, v_limit, v_kind
    from public.jobs j join private.job_kinds k on k.kind = j.kind
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now();
  if not found then
    return null;
  end if;
  if v_stalled >= v_limit then
    -- fail_job locks the run before the job, as every settling path does.
    if public.fail_job(p_job_id, p_fencing_token,
         format('Released %s times in a row without progress: one unit of work of this %s job (a page, an export '
                'chunk) needs more CPU or wall clock than a worker invocation has. Raise the worker''s budget '
                '(WORKER_CPU_BUDGET_MS, the edge runtime''s limits) or lower the unit''s size, then run it again.',
                v_stalled, v_kind),
         false) is null then
      return null;
    end if;
    update public.jobs j set stalled_releases = v_stalled where j.id = p_job_id;
    return 'failed';
  end if;
  update public.jobs j
     set status = 'pending', run_after = now(), lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         progress_done = v_done,
         checkpoint = coalesce(p_checkpoint, j.checkpoint),
         stalled_releases = v_stalled,
         released_progress = v_done,
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now();
  return case when found then 'released' end;
end;
$$;
