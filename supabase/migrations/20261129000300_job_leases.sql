-- The job state machine: claim under a lease, heartbeat, release, complete,
-- fail with backoff. Every holder operation is fenced: it succeeds only for the
-- current fencing token while the lease is unexpired and the job is running.

-- Marks a pending run as running once one of its jobs reports work. Callers
-- hold a job row, so a busy run row is skipped (never waited for); the next
-- report or the run's settlement catches up.
create function private.mark_run_started(p_run_id uuid) returns void
language plpgsql
set search_path = ''
as $$
begin
  if exists (select 1 from public.runs r where r.id = p_run_id and r.status = 'pending') then
    update public.runs r set status = 'running', started_at = coalesce(r.started_at, now())
     where r.id in (select rr.id from public.runs rr where rr.id = p_run_id and rr.status = 'pending' for update skip locked);
  end if;
end;
$$;

-- Claims up to p_max_jobs jobs: running jobs whose lease expired first (rescue),
-- then due pending jobs, oldest first. Each gets a new fencing token, a lease
-- from its kind (or its own override) and one more attempt. This is the hot
-- path: plain statements, no helper calls unless there is work for them.
create function public.claim_jobs(p_worker_id text, p_max_jobs integer, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_ids bigint[];
  v_more bigint[];
begin
  if p_worker_id is null or char_length(p_worker_id) not between 1 and 200 then
    raise exception 'worker_id must be 1-200 characters' using errcode = '22023';
  end if;
  if p_max_jobs is null or p_max_jobs not between 1 and 1000 then
    raise exception 'max_jobs must be between 1 and 1000, got %', p_max_jobs using errcode = '22023';
  end if;
  if p_kinds is not null and exists (
      select 1 from unnest(p_kinds) k where k is null or not exists (select 1 from private.job_kinds jk where jk.kind = k)) then
    raise exception 'unknown job kind in %', p_kinds using errcode = '22023';
  end if;

  -- Jobs whose last lease expired become failed, not claimed.
  if exists (select 1 from public.jobs j
              where j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts) then
    perform private.fail_exhausted_jobs(50);
  end if;

  select array_agg(j.id) into v_ids from (
    select j.id from public.jobs j
     where j.status = 'running' and j.lease_expires_at <= now() and j.attempts < j.max_attempts
       and (p_kinds is null or j.kind = any (p_kinds))
     order by j.lease_expires_at
     limit p_max_jobs
       for update skip locked
  ) j;

  if coalesce(cardinality(v_ids), 0) < p_max_jobs then
    select array_agg(j.id) into v_more from (
      select j.id from public.jobs j
       where j.status = 'pending' and j.run_after <= now()
         and (p_kinds is null or j.kind = any (p_kinds))
       order by j.run_after, j.id
       limit p_max_jobs - coalesce(cardinality(v_ids), 0)
         for update skip locked
    ) j;
    v_ids := coalesce(v_ids, '{}') || coalesce(v_more, '{}');
  end if;

  if cardinality(v_ids) = 0 then
    return;
  end if;

  -- The run is marked running by the job's first heartbeat or saved page (or
  -- its settlement), not here: a claim writes nothing but the claimed rows.
  return query
  update public.jobs j
     set status = 'running',
         attempts = j.attempts + 1,
         worker_id = p_worker_id,
         fencing_token = nextval('private.fencing_token_seq'),
         lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         started_at = coalesce(j.started_at, now()),
         updated_at = now()
    from private.job_kinds k
   where j.id = any (v_ids) and k.kind = j.kind
  returning j.*;
end;
$$;
comment on function public.claim_jobs(text, integer, text[]) is
  'Claims up to N jobs (expired leases first, then due pending) with FOR UPDATE SKIP LOCKED; each gets a new fencing token.';

-- Claims one job, or none. (plpgsql, not SQL: a SQL function with SET is re-planned on every call.)
create function public.claim_next_job(p_worker_id text, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
as $$
begin
  return query select * from public.claim_jobs(p_worker_id, 1, p_kinds);
end;
$$;
comment on function public.claim_next_job(text, text[]) is 'Claims the oldest claimable job (or none). See claim_jobs.';

-- Extends the holder's lease and records progress. False when the caller no
-- longer holds the job (lease expired, reclaimed, stopped): the worker must stop.
create function public.heartbeat_job(
  p_job_id bigint, p_token bigint,
  p_progress_done integer default null, p_progress_total integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
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
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running'
     and j.lease_expires_at > now() and k.kind = j.kind
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  perform private.mark_run_started(v_run_id);
  return true;
end;
$$;

-- Hands a job back without using up an attempt: pending, due now, checkpoint and
-- progress kept (optionally updated). For a worker whose time budget ran out.
create function public.release_job(
  p_job_id bigint, p_token bigint, p_progress_done integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
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

-- Locks the job's run (lock order: run, then job). Returns the run id, or null for an unknown job.
create function private.lock_run_of_job(p_job_id bigint) returns uuid
language plpgsql
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if v_run_id is not null then
    perform 1 from public.runs r where r.id = v_run_id for update;
  end if;
  return v_run_id;
end;
$$;

-- Completes the holder's job and settles its run. False (and no change) for anyone but the holder.
create function public.complete_job(p_job_id bigint, p_token bigint, p_result jsonb default null) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  -- Lock order: the run, then the job (inline: this is the hot path).
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if not found then
    return false;
  end if;
  perform 1 from public.runs r where r.id = v_run_id for update;
  update public.jobs j
     set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now(),
         result = case when p_result is null then j.result else coalesce(j.result, '{}'::jsonb) || p_result end
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now();
  if not found then
    return false;
  end if;
  perform private.settle_run(v_run_id);
  return true;
end;
$$;

-- Completes many held jobs at once (runs locked in a stable order). Returns how many completed.
create function public.complete_jobs(p_job_ids bigint[], p_tokens bigint[]) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
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
  )
  select count(*) into v_count from done;
  for v_run_id in
    select distinct j.run_id from public.jobs j where j.id = any (p_job_ids) order by 1
  loop
    perform private.settle_run(v_run_id);
  end loop;
  return v_count;
end;
$$;

-- Completes the holder's job and claims the caller's next one in the same
-- transaction: one round trip per job instead of two. Always one row:
-- `completed` says whether the finished job was still the caller's; `id` is
-- null when nothing was claimed.
create function public.complete_job_and_claim_next(
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
  v_completed boolean := public.complete_job(p_job_id, p_token, p_result);
  v_next public.jobs;
begin
  select * into v_next from public.claim_jobs(p_worker_id, 1, p_kinds) c limit 1;
  return query select v_completed, v_next.id, v_next.run_id, v_next.portal_id, v_next.kind, v_next.content_type,
    v_next.attempts, v_next.max_attempts, v_next.fencing_token, v_next.lease_expires_at,
    v_next.checkpoint, v_next.progress_done, v_next.progress_total;
end;
$$;

-- Records a failure by the holder. Retryable failures go back to pending after
-- exponential backoff with jitter until max attempts; then (or at once when not
-- retryable) the job fails and its run is settled.
create function public.fail_job(p_job_id bigint, p_token bigint, p_error text, p_retryable boolean default true)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid := private.lock_run_of_job(p_job_id);
  v_status text;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  if v_run_id is null then
    return false;
  end if;
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
  returning j.status into v_status;
  if not found then
    return false;
  end if;
  if v_status = 'failed' then
    perform private.settle_run(v_run_id);
  end if;
  return true;
end;
$$;
