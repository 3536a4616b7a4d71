-- The holder's job is found by its primary key. Every function that acts for
-- the lease holder (complete_job, complete_jobs, fail_job, release_job,
-- heartbeat_job, park_job) updated
--   where j.id = $1 and j.fencing_token = $2 and j.status = 'running' and …
-- and Postgres planned that as a full scan of a partial index of running jobs
-- (jobs_running_portal_idx, "where status = 'running'") filtered by id: that
-- small index costs 0.125 less than a descent of jobs_pkey, whatever the
-- statistics, so every completion read every running job (and, under churn,
-- their dead index entries), and complete_jobs joined each of its ids with
-- every running job (a nested loop, batch × running). The plans are
-- otherwise unchanged: each function compares the status with a constant
-- variable (v_running), which a generic plan keeps as a parameter, so no
-- partial index on status = 'running' can serve the statement and the row is
-- reached through jobs_pkey (complete_jobs: one probe per id). heartbeat_job
-- and park_job now also use generic plans (a custom plan would fold the
-- variable back into a constant).
--
-- Measured (scenario 1's loop, 8 workers, 8,000 jobs, A/B interleaved, 4
-- repetitions): (a) claim + complete Postgres CPU per job ×0.92, jobs/s ×1.06
-- (median; 0.99-1.22); (c) batch 50: Postgres CPU ×0.89, jobs/s ×1.13.
-- Bodies are otherwise those of 20261130001400 / 20261130004200 /
-- 20261129000300 / 20261130001200 (create or replace keeps grants and comments).

create or replace function public.complete_job(p_job_id bigint, p_token bigint, p_result jsonb default null)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_done boolean;
begin
  -- Lock order: the run, then the job.
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return false;
  end if;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           result = case when p_result is null then j.result else coalesce(j.result, '{}'::jsonb) || p_result end
     where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  ), counted as (
    update public.runs r
       set jobs_completed = r.jobs_completed + 1,
           status = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_failed = 0 then 'completed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + 1 + r.jobs_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from done d
     where r.id = d.run_id and r.finished_at is null
    returning r.id, r.owner_id, r.kind, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped
  ), notified as (
    insert into public.notifications (user_id, run_id, kind, message)
    select c.owner_id, c.id, 'run_' || c.status,
           private.run_notification_message(c.kind, c.status, c.jobs_total, c.jobs_completed, c.jobs_failed, c.jobs_stopped,
             (select f.last_error from public.jobs f
               where f.run_id = c.id and f.status = 'failed' order by f.finished_at limit 1))
      from counted c
     where c.finished_at is not null
    on conflict (run_id) do nothing
  )
  select exists (select 1 from done) into v_done;
  return v_done;
end;
$$;

create or replace function public.complete_jobs(p_job_ids bigint[], p_tokens bigint[])
returns integer
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_count integer;
begin
  if p_job_ids is null or p_tokens is null or cardinality(p_job_ids) <> cardinality(p_tokens) then
    raise exception 'complete_jobs: job ids and tokens must be arrays of the same length' using errcode = '22023';
  end if;
  perform 1 from public.runs r
   where r.id in (select j.run_id from public.jobs j where j.id = any (p_job_ids))
   order by r.id
     for update;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now()
      from unnest(p_job_ids, p_tokens) as t(id, token)
     where j.id = t.id and j.fencing_token = t.token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  ), per_run as (
    select d.run_id, count(*)::integer as n from done d group by d.run_id
  ), counted as (
    update public.runs r
       set jobs_completed = r.jobs_completed + p.n,
           status = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_failed = 0 then 'completed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + p.n + r.jobs_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from per_run p
     where r.id = p.run_id and r.finished_at is null
    returning r.id, r.owner_id, r.kind, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped
  ), notified as (
    insert into public.notifications (user_id, run_id, kind, message)
    select c.owner_id, c.id, 'run_' || c.status,
           private.run_notification_message(c.kind, c.status, c.jobs_total, c.jobs_completed, c.jobs_failed, c.jobs_stopped,
             (select f.last_error from public.jobs f
               where f.run_id = c.id and f.status = 'failed' order by f.finished_at limit 1))
      from counted c
     where c.finished_at is not null
    on conflict (run_id) do nothing
  )
  select count(*)::integer into v_count from done;
  return v_count;
end;
$$;

create or replace function public.fail_job(p_job_id bigint, p_token bigint, p_error text, p_retryable boolean default true)
returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_status text;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return null;
  end if;
  with done as (
    update public.jobs j
       set status = case when p_retryable and j.attempts < j.max_attempts then 'pending' else 'failed' end,
           run_after = case when p_retryable and j.attempts < j.max_attempts
                            then now() + make_interval(secs => least(k.backoff_max_seconds,
                                   k.backoff_base_seconds * power(2, j.attempts - 1)) * (0.5 + random() / 2))
                            else j.run_after end,
           finished_at = case when p_retryable and j.attempts < j.max_attempts then null else now() end,
           lease_expires_at = null,
           last_error = left(p_error, 4000),
           updated_at = now()
      from private.job_kinds k
     where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now()
       and k.kind = j.kind
    returning j.run_id, j.status, j.last_error
  ), counted as (
    update public.runs r
       set jobs_failed = r.jobs_failed + 1,
           status = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then 'running'
                         when r.jobs_stopped > 0 then 'stopped'
                         when r.jobs_completed = 0 then 'failed'
                         else 'partially_failed' end,
           finished_at = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then null else now() end,
           started_at = coalesce(r.started_at, now()),
           waiting_reason = case when r.jobs_completed + r.jobs_failed + 1 + r.jobs_stopped < r.jobs_total then r.waiting_reason end
      from done d
     where d.status = 'failed' and r.id = d.run_id and r.finished_at is null
    returning r.id, r.owner_id, r.kind, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
              d.last_error
  ), notified as (
    -- The first error is the earliest failed job's: an earlier one if there is
    -- one (this statement's own update is not visible to its subqueries), else this one.
    insert into public.notifications (user_id, run_id, kind, message)
    select c.owner_id, c.id, 'run_' || c.status,
           private.run_notification_message(c.kind, c.status, c.jobs_total, c.jobs_completed, c.jobs_failed, c.jobs_stopped,
             coalesce((select f.last_error from public.jobs f
                        where f.run_id = c.id and f.status = 'failed' order by f.finished_at limit 1), c.last_error))
      from counted c
     where c.finished_at is not null
    on conflict (run_id) do nothing
  )
  select d.status into v_status from done d;
  return v_status;
end;
$$;

create or replace function public.release_job(
  p_job_id bigint, p_token bigint, p_progress_done integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
begin
  if p_progress_done < 0 then
    raise exception 'progress must be non-negative' using errcode = '22023';
  end if;
  update public.jobs j
     set status = 'pending', run_after = now(), lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         progress_done = coalesce(p_progress_done, j.progress_done),
         checkpoint = coalesce(p_checkpoint, j.checkpoint),
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now();
  return found;
end;
$$;

create or replace function public.heartbeat_job(
  p_job_id bigint, p_token bigint,
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
   where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running
     and j.lease_expires_at > now() and k.kind = j.kind
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  perform private.mark_run_started(v_run_id);
  return true;
end;
$$;

create or replace function public.park_job(p_job_id bigint, p_token bigint, p_until timestamptz, p_reason text)
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
   where j.id = p_job_id and j.fencing_token = p_token and j.status = v_running and j.lease_expires_at > now()
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  update public.runs r set waiting_reason = p_reason where r.id = v_run_id and r.finished_at is null;
  return true;
end;
$$;
