-- public.park_job(job, fencing_token, until, reason): the holder puts its job back to
-- pending until `until` (at most 7 days) without using an attempt, the reason
-- on the job and its run (HubSpot's daily limit). Locks the run FOR UPDATE,
-- then the job (v_running: see docs/decisions/0003). The service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.park_job(p_job_id bigint, p_fencing_token bigint, p_until timestamptz, p_reason text)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if p_until is null or p_reason is null then
    raise exception 'park_job: until and reason are required' using errcode = '22004';
  end if;
  if p_until <= now() or p_until > now() + interval '7 days' then
    raise exception 'park_job: until must be in the future and at most 7 days ahead, got %', p_until using errcode = '22023';
  end if;
  if char_length(p_reason) not between 1 and 500 then
    raise exception 'park_job: reason must be 1-500 characters' using errcode = '22023';
  end if;
  if private.lock_run_of_job(p_job_id) is null then
    return false;
  end if;
  update public.jobs j
     set status = 'pending', run_after = p_until, lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         waiting_reason = p_reason,
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  update public.runs r set waiting_reason = p_reason where r.id = v_run_id and r.finished_at is null;
  return true;
end;
$$;
comment on function public.park_job(bigint, bigint, timestamptz, text) is
  'Holder only: back to pending until p_until without using an attempt; the reason goes on the job and its run.';
