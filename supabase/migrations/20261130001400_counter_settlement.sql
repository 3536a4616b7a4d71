-- Settlement by counters. The statement that finishes a job also adds it to
-- its run's counters and, when that was the run's last job, finishes the run
-- and writes its one notification — instead of recounting the run's jobs.
-- Exactly once still holds: the job changes only while it is running with the
-- caller's token (so it is counted once), the run only while finished_at is
-- null, and notifications are unique per run. Each function locks the run row
-- before the job (the lock order everywhere), so concurrent completions of one
-- run queue on the run and each sees the counters of the one before.
-- private.settle_run (a recount) stays for stop_run and fail_exhausted_jobs,
-- and reconcile_stuck_runs stays the recount safety net.

-- Completes the holder's job and settles its run. False (and no change) for anyone but the holder.
create or replace function public.complete_job(p_job_id bigint, p_token bigint, p_result jsonb default null)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
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
     where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
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

-- Completes many held jobs at once (runs locked in a stable order) and settles
-- their runs by counters in the same statement. Returns how many completed.
create or replace function public.complete_jobs(p_job_ids bigint[], p_tokens bigint[])
returns integer
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
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
     where j.id = t.id and j.fencing_token = t.token and j.status = 'running' and j.lease_expires_at > now()
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

-- Records a failure by the holder. Retryable failures go back to pending after
-- exponential backoff with jitter until max attempts; then (or at once when not
-- retryable) the job fails and its run is settled by counters.
create or replace function public.fail_job(p_job_id bigint, p_token bigint, p_error text, p_retryable boolean default true)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_done boolean;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  perform 1 from public.runs r
   where r.id = (select j.run_id from public.jobs j where j.id = p_job_id)
     for update;
  if not found then
    return false;
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
     where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
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
  select exists (select 1 from done) into v_done;
  return v_done;
end;
$$;

-- Hands a job back without using up an attempt: pending, due now, checkpoint and
-- progress kept (optionally updated). For a worker whose time budget ran out.
create or replace function public.release_job(
  p_job_id bigint, p_token bigint, p_progress_done integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
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
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now();
  return found;
end;
$$;

-- Completes the holder's job and, only when that succeeded, claims the
-- caller's next one in the same transaction: one round trip per job. A caller
-- whose completion was fenced off (lease expired, reclaimed, stopped) gets no
-- new work: it may be a frozen process, and a job it would drop costs a lease
-- and an attempt. Always one row: `completed` says whether the finished job
-- was still the caller's; `id` is null when nothing was claimed.
create or replace function public.complete_job_and_claim_next(
  p_job_id bigint, p_token bigint, p_worker_id text, p_result jsonb default null, p_kinds text[] default null
) returns table (
  completed boolean, id bigint, run_id uuid, portal_id uuid, kind text, content_type text,
  attempts integer, max_attempts integer, fencing_token bigint, lease_expires_at timestamptz,
  checkpoint jsonb, progress_done integer, progress_total integer
)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_completed boolean;
  v_next public.jobs;
begin
  if p_worker_id is null or char_length(p_worker_id) not between 1 and 200 then
    raise exception 'worker_id must be 1-200 characters' using errcode = '22023';
  end if;
  v_completed := public.complete_job(p_job_id, p_token, p_result);
  if v_completed then
    select * into v_next from public.claim_jobs(p_worker_id, 1, p_kinds) c limit 1;
  end if;
  return query select v_completed, v_next.id, v_next.run_id, v_next.portal_id, v_next.kind, v_next.content_type,
    v_next.attempts, v_next.max_attempts, v_next.fencing_token, v_next.lease_expires_at,
    v_next.checkpoint, v_next.progress_done, v_next.progress_total;
end;
$$;
