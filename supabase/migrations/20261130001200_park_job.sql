-- Parking: a holder puts its job back to pending until a given time without
-- using an attempt, with the reason on the job and on its run. The worker parks
-- a fetch when HubSpot answers 429 for the portal's DAILY limit: retrying would
-- use up the attempts long before the quota resets (ten-second 429s keep using
-- the shared request budget instead).

-- Why a pending job waits for something other than its turn, and why its run
-- waits. Set by park_job; the job's is cleared when it is claimed again, the
-- run's when one of its jobs reports work again or the run ends.
alter table public.jobs add column waiting_reason text;
comment on column public.jobs.waiting_reason is
  'Why this pending job waits until run_after (e.g. HubSpot''s daily limit); null otherwise.';
alter table public.runs add column waiting_reason text;
comment on column public.runs.waiting_reason is
  'Why the run is waiting (one of its jobs was parked); null once its jobs report work again or it ends.';

-- Marks a pending run as running once one of its jobs reports work, and clears
-- the run's waiting reason (its jobs are working again). Callers hold a job
-- row, so a busy run row is skipped (never waited for); the next report or the
-- run's settlement catches up.
create or replace function private.mark_run_started(p_run_id uuid) returns void
language plpgsql
set search_path = ''
as $$
begin
  if exists (select 1 from public.runs r
              where r.id = p_run_id and r.finished_at is null and (r.status = 'pending' or r.waiting_reason is not null)) then
    update public.runs r
       set status = 'running', started_at = coalesce(r.started_at, now()), waiting_reason = null
     where r.id in (select rr.id from public.runs rr
                     where rr.id = p_run_id and rr.finished_at is null and (rr.status = 'pending' or rr.waiting_reason is not null)
                       for update skip locked);
  end if;
end;
$$;

-- Parks the holder's job: pending again, due at p_until, its attempt given
-- back (attempts as before the claim), lease dropped, checkpoint and progress
-- kept, p_reason in jobs.waiting_reason and runs.waiting_reason (both cleared
-- when the job is claimed again and reports work). False (and no change) for
-- anyone but the holder. p_until must lie in the future, at most 7 days ahead;
-- p_reason is 1-500 characters, e.g. 'waiting for HubSpot''s daily limit until
-- 2026-12-01T00:00:00Z'.
create function public.park_job(p_job_id bigint, p_token bigint, p_until timestamptz, p_reason text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
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
  -- Lock order: the run, then the job.
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return false;
  end if;
  update public.jobs j
     set status = 'pending', run_after = p_until, lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         waiting_reason = p_reason,
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
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

revoke all on function public.park_job(bigint, bigint, timestamptz, text) from public, anon, authenticated;
grant execute on function public.park_job(bigint, bigint, timestamptz, text) to service_role;
