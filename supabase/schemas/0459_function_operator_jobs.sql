-- public.operator_jobs(status, portal, kind, since, until, limit, before_id):
-- jobs of every user for the Operator view, newest first, filtered by status,
-- portal, kind and creation time, with their portal (name, HubSpot id, paused)
-- and run (status, trigger, fetch mode); keyset pages by id (before_id).
-- Planned anew for each call's filters (a generic plan reads all history for a
-- narrow one: failed jobs, a portal's). Indexes: jobs_failed_or_stopped_idx,
-- jobs_portal_idx, jobs_created_idx (tests/queue-plans.test.ts).
-- Reads only. For the service role only (the orchestrator, for operators).
create function public.operator_jobs(
  p_status text default null, p_portal_id uuid default null, p_kind text default null,
  p_since timestamptz default null, p_until timestamptz default null, p_limit integer default 50,
  p_before_id bigint default null
) returns table (
  id bigint, run_id uuid, portal_id uuid, portal_name text, hubspot_portal_id bigint, portal_paused boolean,
  kind text, content_type text, status text, attempts integer, max_attempts integer, progress_done integer,
  progress_total integer, last_error text, waiting_reason text, run_after timestamptz, created_at timestamptz,
  started_at timestamptz, finished_at timestamptz, updated_at timestamptz, run_status text, run_trigger text,
  run_fetch_mode text
)
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_custom_plan
as $$
declare
  v_window boolean := false;
begin
  if p_status is not null and p_status not in ('pending', 'running', 'completed', 'failed', 'stopped') then
    raise exception 'operator_jobs: status must be pending, running, completed, failed or stopped' using errcode = '22023';
  end if;
  if p_kind is not null and not exists (select 1 from private.job_kinds k where k.kind = p_kind) then
    raise exception 'operator_jobs: unknown job kind "%"', p_kind using errcode = '22023';
  end if;
  -- A sanity bound, not the API's page size (200): a caller asks for one row more than its
  -- page to learn whether another page follows.
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception 'operator_jobs: limit must be between 1 and 1000' using errcode = '22023';
  end if;
  -- A window with an end holding fewer than 5,000 jobs is read by jobs_created_idx and
  -- sorted (ordered by id + 0): the planner, not knowing that ids follow creation times,
  -- would walk jobs_pkey down through all the newer history to reach it.
  if p_until is not null then
    select count(*) < 5000 into v_window
      from (select 1 from public.jobs j where j.created_at < p_until and (p_since is null or j.created_at >= p_since)
             limit 5000) w;
  end if;
  return query
  select j.id, j.run_id, j.portal_id, p.name, p.hubspot_portal_id,
         exists (select 1 from private.portal_pauses pp where pp.portal_id = j.portal_id),
         j.kind, j.content_type, j.status, j.attempts, j.max_attempts, j.progress_done, j.progress_total,
         j.last_error, j.waiting_reason, j.run_after, j.created_at, j.started_at, j.finished_at, j.updated_at,
         r.status, r.trigger, r.fetch_mode
    from public.jobs j
    join public.portals p on p.id = j.portal_id
    join public.runs r on r.id = j.run_id
   where (p_status is null or j.status = p_status)
     and (p_portal_id is null or j.portal_id = p_portal_id)
     and (p_kind is null or j.kind = p_kind)
     and (p_since is null or j.created_at >= p_since)
     and (p_until is null or j.created_at < p_until)
     and (p_before_id is null or j.id < p_before_id)
   order by case when v_window then j.id + 0 else j.id end desc
   limit p_limit;
end;
$$;
