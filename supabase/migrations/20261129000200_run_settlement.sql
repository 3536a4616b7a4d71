-- Run settlement: a run's status follows its jobs. Every terminal job
-- transition settles its run in the same transaction; reconcile_stuck_runs is
-- the safety net.
--
-- Lock order, everywhere: a run row before any of its job rows. Code that
-- already holds a job row (a claim) touches its run only with SKIP LOCKED.

-- Notification text for a settled run. (plpgsql, not SQL: a SQL function with
-- SET cannot be inlined and would be planned again on every call.)
create function private.run_notification_message(
  p_kind text, p_status text, p_total integer, p_completed integer, p_failed integer, p_stopped integer, p_first_error text
) returns text
language plpgsql immutable
set search_path = ''
as $$
begin
  return case p_status
    when 'completed' then format('%s run completed: all %s jobs succeeded.', initcap(p_kind), p_total)
    when 'partially_failed' then format('%s run partially failed: %s of %s jobs completed, %s failed.%s',
      initcap(p_kind), p_completed, p_total, p_failed, coalesce(' First error: ' || left(p_first_error, 500), ''))
    when 'failed' then format('%s run failed: all %s jobs failed.%s',
      initcap(p_kind), p_total, coalesce(' First error: ' || left(p_first_error, 500), ''))
    else format('%s run stopped: %s of %s jobs had completed, %s stopped.', initcap(p_kind), p_completed, p_total, p_stopped)
  end;
end;
$$;

-- Recounts a run's jobs and, when all are terminal, finishes it and notifies its owner once.
-- The caller holds the run's row lock. Returns true when this call finished the run.
create function private.settle_run(p_run_id uuid) returns boolean
language plpgsql
set search_path = ''
as $$
declare
  v_total integer;
  v_completed integer;
  v_failed integer;
  v_stopped integer;
  v_active integer;
  v_started integer;
  v_first_error text;
  v_status text;
  v_run public.runs;
begin
  select count(*),
         count(*) filter (where j.status = 'completed'),
         count(*) filter (where j.status = 'failed'),
         count(*) filter (where j.status = 'stopped'),
         count(*) filter (where j.status in ('pending', 'running')),
         count(*) filter (where j.started_at is not null),
         (array_agg(j.last_error order by j.finished_at) filter (where j.status = 'failed'))[1]
    into v_total, v_completed, v_failed, v_stopped, v_active, v_started, v_first_error
    from public.jobs j
   where j.run_id = p_run_id;

  if v_total = 0 then
    return false;
  end if;

  if v_active > 0 then
    update public.runs r
       set jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped,
           status = case when r.status = 'pending' and v_started > 0 then 'running' else r.status end,
           started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end
     where r.id = p_run_id and r.finished_at is null;
    return false;
  end if;

  v_status := case
    when v_stopped > 0 then 'stopped'
    when v_failed = 0 then 'completed'
    when v_completed = 0 then 'failed'
    else 'partially_failed'
  end;

  update public.runs r
     set status = v_status, finished_at = now(),
         started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end,
         jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped
   where r.id = p_run_id and r.finished_at is null
  returning r.* into v_run;
  if not found then
    return false;
  end if;

  insert into public.notifications (user_id, run_id, kind, message)
  values (v_run.owner_id, v_run.id, 'run_' || v_status,
          private.run_notification_message(v_run.kind, v_status, v_total, v_completed, v_failed, v_stopped, v_first_error))
  on conflict (run_id) do nothing;
  return true;
end;
$$;

-- Fails running jobs whose lease expired after their last allowed attempt, and settles their runs.
-- Returns how many runs that finished. Bounded per call.
-- Its callers may already hold a run and a job row (complete_job_and_claim_next,
-- and this loop itself after its first job), so by the lock order above it takes
-- run locks only with SKIP LOCKED: a job whose run is busy is left for the next
-- call (claim or reconcile) instead of risking a deadlock.
create function private.fail_exhausted_jobs(p_limit integer default 50) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_job record;
  v_finished integer := 0;
begin
  for v_job in
    select j.id, j.run_id
      from public.jobs j
     where j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts
     order by j.lease_expires_at
     limit p_limit
  loop
    perform 1 from public.runs r where r.id = v_job.run_id for update skip locked;
    if not found then
      continue;
    end if;
    update public.jobs j
       set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           last_error = format('Lease expired on attempt %s of %s; the worker stopped responding (%s).',
                               j.attempts, j.max_attempts, coalesce(left(j.last_error, 200), 'no error recorded'))
     where j.id = v_job.id and j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts;
    if found and private.settle_run(v_job.run_id) then
      v_finished := v_finished + 1;
    end if;
  end loop;
  return v_finished;
end;
$$;

-- Safety net run at the start of every worker invocation: fails jobs whose
-- last lease expired, then settles runs still pending/running whose jobs are
-- all terminal. Returns how many runs it settled (both ways).
create function public.reconcile_stuck_runs() returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_fixed integer := 0;
begin
  v_fixed := private.fail_exhausted_jobs(1000);
  for v_run_id in
    select r.id
      from public.runs r
      join lateral (
        select count(*) as total,
               count(*) filter (where j.status in ('pending', 'running')) as active
          from public.jobs j
         where j.run_id = r.id
      ) c on true
     where r.finished_at is null and c.total > 0 and c.active = 0
     order by r.created_at
     limit 1000
       for update of r skip locked
  loop
    if private.settle_run(v_run_id) then
      v_fixed := v_fixed + 1;
    end if;
  end loop;
  return v_fixed;
end;
$$;
comment on function public.reconcile_stuck_runs() is
  'Settles runs left pending/running after all their jobs ended (and fails jobs whose last lease expired). Returns runs settled.';

-- Creates a run with one job per content type that has no active job for the
-- portal + kind yet. Race-free: the unique partial index over active jobs and
-- ON CONFLICT DO NOTHING decide. When every type is a duplicate no run is left.
create function public.create_run(
  p_portal_id uuid,
  p_requested_by uuid,
  p_kind text,
  p_content_types text[],
  p_totals integer[] default null,
  p_max_attempts integer default null,
  p_lease_seconds integer default null
) returns table (run_id uuid, created_types text[], duplicate_types text[])
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_run uuid;
  v_created text[];
  v_kind private.job_kinds;
begin
  if p_portal_id is null or p_requested_by is null or p_kind is null or p_content_types is null then
    raise exception 'create_run: portal, requester, kind and content types are required' using errcode = '22004';
  end if;
  select * into v_kind from private.job_kinds k where k.kind = p_kind;
  if not found then
    raise exception 'create_run: unknown job kind "%"', p_kind using errcode = '22023';
  end if;
  if not private.are_known_content_types(p_content_types) then
    raise exception 'create_run: content types must be 1-8 distinct known types, got %', p_content_types using errcode = '22023';
  end if;
  if p_totals is not null and (cardinality(p_totals) <> cardinality(p_content_types)
      or exists (select 1 from unnest(p_totals) t where t < 0)) then
    raise exception 'create_run: totals must be non-negative and one per content type' using errcode = '22023';
  end if;
  if p_max_attempts is not null and p_max_attempts not between 1 and 100 then
    raise exception 'create_run: max_attempts must be between 1 and 100' using errcode = '22023';
  end if;
  if p_lease_seconds is not null and p_lease_seconds not between 1 and 3600 then
    raise exception 'create_run: lease_seconds must be between 1 and 3600' using errcode = '22023';
  end if;

  select p.owner_id into v_owner from public.portals p where p.id = p_portal_id;
  if not found then
    raise exception 'create_run: portal % not found', p_portal_id using errcode = 'P0002';
  end if;

  insert into public.runs (portal_id, owner_id, requested_by, kind, content_types)
  values (p_portal_id, v_owner, p_requested_by, p_kind, p_content_types)
  returning id into v_run;

  with inserted as (
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, progress_total, max_attempts, lease_seconds)
    select v_run, p_portal_id, v_owner, p_kind, t.content_type,
           case when p_totals is not null then t.total
                when p_kind = 'export' then (select count(*)::integer from public.hubspot_content c
                                             where c.portal_id = p_portal_id and c.content_type = t.content_type
                                               and c.deleted_at is null)
           end,
           coalesce(p_max_attempts, v_kind.default_max_attempts), p_lease_seconds
      from unnest(p_content_types, p_totals) with ordinality as t(content_type, total, ord)
     where t.content_type is not null
     -- One global insert order, not the caller's: two calls listing the same
     -- types in different orders would each wait on the other's uncommitted
     -- job (ON CONFLICT waits for an in-progress insert) and deadlock.
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing
    returning content_type
  )
  select array_agg(t.content_type order by t.ord) into v_created
    from unnest(p_content_types) with ordinality as t(content_type, ord)
   where t.content_type in (select i.content_type from inserted i);

  if v_created is null then
    delete from public.runs r where r.id = v_run;
    return query select null::uuid, '{}'::text[], p_content_types;
    return;
  end if;

  update public.runs r set content_types = v_created, jobs_total = cardinality(v_created) where r.id = v_run;
  return query select v_run, v_created,
    coalesce((select array_agg(t) from unnest(p_content_types) t where t <> all (v_created)), '{}'::text[]);
end;
$$;

-- Stops a run: pending and running jobs become stopped at once (running
-- holders find out on their next heartbeat or write). Returns false when the run
-- was already finished or does not exist.
create function public.stop_run(p_run_id uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform 1 from public.runs r where r.id = p_run_id and r.finished_at is null for update;
  if not found then
    return false;
  end if;
  update public.jobs j
     set status = 'stopped', finished_at = now(), lease_expires_at = null, updated_at = now()
   where j.run_id = p_run_id and j.status in ('pending', 'running');
  perform private.settle_run(p_run_id);
  return true;
end;
$$;
