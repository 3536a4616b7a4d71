-- Fetched content, portal credentials and the shared HubSpot request budget.

-- Writes one fetched page in one transaction, only for the current lease holder:
-- upserts the items (idempotent on portal + type + HubSpot id), saves the
-- checkpoint, adds to progress and extends the lease. Returns the page's counts
-- {fetched, added, updated, unchanged}, or null when the caller was fenced off
-- (nothing written).
-- p_items: [{"id": text, "updatedAt": timestamptz|null, "data": object}, ...]
create function public.save_fetched_page(
  p_job_id bigint, p_token bigint, p_items jsonb, p_checkpoint jsonb, p_progress_total integer default null
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_counts jsonb;
begin
  if p_items is null or jsonb_typeof(p_items) <> 'array' then
    raise exception 'save_fetched_page: items must be a JSON array' using errcode = '22023';
  end if;
  if p_progress_total < 0 then
    raise exception 'save_fetched_page: progress_total must be non-negative' using errcode = '22023';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     for update;
  if not found then
    return null;
  end if;
  if v_job.kind <> 'fetch' then
    raise exception 'save_fetched_page: job % is a % job, not a fetch job', p_job_id, v_job.kind using errcode = '22023';
  end if;
  -- coalesce: a missing key gives a NULL type, which must fail the check too.
  if exists (select 1 from jsonb_array_elements(p_items) e
              where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') <> 'string'
                 or char_length(e ->> 'id') not between 1 and 200
                 or coalesce(jsonb_typeof(e -> 'data'), '') <> 'object') then
    raise exception 'save_fetched_page: every item needs a string id (1-200 characters) and an object data' using errcode = '22023';
  end if;

  with incoming as (
    select distinct on (x.id) x.id, x."updatedAt" as updated_at, x.data
      from jsonb_to_recordset(p_items) as x(id text, "updatedAt" timestamptz, data jsonb)
     order by x.id
  ), classified as (
    select i.*, c.hubspot_id is null as is_new,
           (c.hubspot_id is not null and (c.deleted_at is not null
              or c.hubspot_updated_at is distinct from i.updated_at or c.data is distinct from i.data)) as is_changed
      from incoming i
      left join public.hubspot_content c
        on c.portal_id = v_job.portal_id and c.content_type = v_job.content_type and c.hubspot_id = i.id
  ), upserted as (
    insert into public.hubspot_content as c
           (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, fetched_at, last_seen_job_id, deleted_at)
    select v_job.portal_id, v_job.owner_id, v_job.content_type, i.id, i.data, i.updated_at, now(), p_job_id, null
      from incoming i
    on conflict (portal_id, content_type, hubspot_id) do update
       set data = excluded.data, hubspot_updated_at = excluded.hubspot_updated_at, fetched_at = excluded.fetched_at,
           last_seen_job_id = excluded.last_seen_job_id, deleted_at = null
    returning 1
  )
  select jsonb_build_object(
           'fetched', (select count(*) from upserted),
           'added', count(*) filter (where is_new),
           'updated', count(*) filter (where is_changed),
           'unchanged', count(*) filter (where not is_new and not is_changed))
    into v_counts
    from classified;

  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + (v_counts ->> 'fetched')::integer,
         progress_total = coalesce(p_progress_total, j.progress_total),
         result = jsonb_build_object(
           'fetched', coalesce((j.result ->> 'fetched')::integer, 0) + (v_counts ->> 'fetched')::integer,
           'added', coalesce((j.result ->> 'added')::integer, 0) + (v_counts ->> 'added')::integer,
           'updated', coalesce((j.result ->> 'updated')::integer, 0) + (v_counts ->> 'updated')::integer,
           'unchanged', coalesce((j.result ->> 'unchanged')::integer, 0) + (v_counts ->> 'unchanged')::integer,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job_id and k.kind = j.kind;
  perform private.mark_run_started(v_job.run_id);
  return v_counts;
end;
$$;

-- Completes a fetch job: items of its type that this job never saw are marked
-- deleted (kept, not lost), the counts go into the result, the run is settled.
-- False (and no change) for anyone but the holder.
create function public.complete_fetch_job(p_job_id bigint, p_token bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_deleted integer;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'fetch'
     for update;
  if not found then
    return false;
  end if;
  update public.hubspot_content c
     set deleted_at = now()
   where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
     and c.deleted_at is null and c.last_seen_job_id is distinct from p_job_id;
  get diagnostics v_deleted = row_count;
  return public.complete_job(p_job_id, p_token,
    jsonb_build_object('deleted', v_deleted, 'fetched', coalesce((v_job.result ->> 'fetched')::integer, 0)));
end;
$$;

-- Connects (or reconnects) a HubSpot portal for a user and stores its token
-- where only the service role can read it. Returns the portal id.
create function public.connect_portal(p_owner_id uuid, p_hubspot_portal_id bigint, p_name text, p_access_token text)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal_id uuid;
begin
  if p_owner_id is null or p_hubspot_portal_id is null or p_name is null or p_access_token is null then
    raise exception 'connect_portal: owner, HubSpot portal id, name and token are required' using errcode = '22004';
  end if;
  insert into public.portals as p (owner_id, hubspot_portal_id, name)
  values (p_owner_id, p_hubspot_portal_id, p_name)
  on conflict (owner_id, hubspot_portal_id) do update set name = excluded.name
  returning p.id into v_portal_id;
  insert into private.portal_credentials as c (portal_id, access_token)
  values (v_portal_id, p_access_token)
  on conflict (portal_id) do update set access_token = excluded.access_token, updated_at = now();
  return v_portal_id;
end;
$$;

-- The portal's HubSpot access token and HubSpot portal id (service role only).
create function public.portal_credentials(p_portal_id uuid)
returns table (hubspot_portal_id bigint, access_token text)
language sql
stable
security definer
set search_path = ''
as $$
  select p.hubspot_portal_id, c.access_token
    from public.portals p
    join private.portal_credentials c on c.portal_id = p.id
   where p.id = p_portal_id
$$;

-- Shared HubSpot request budget: grants one request for the portal when fewer
-- than p_max_requests were granted in the last p_window_ms (a rolling window,
-- as HubSpot counts). Returns 0 when granted, else how many ms to wait.
create function public.acquire_hubspot_request(
  p_hubspot_portal_id bigint, p_max_requests integer default 190, p_window_ms integer default 10000
) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz;
  v_window interval := make_interval(secs => p_window_ms / 1000.0);
  v_granted timestamptz[];
begin
  if p_hubspot_portal_id is null or p_max_requests is null or p_max_requests < 1 or p_window_ms is null or p_window_ms < 1 then
    raise exception 'acquire_hubspot_request: portal id, a positive max and window are required' using errcode = '22023';
  end if;
  select b.granted_at into v_granted from private.hubspot_request_budgets b
   where b.hubspot_portal_id = p_hubspot_portal_id for update;
  if not found then
    insert into private.hubspot_request_budgets (hubspot_portal_id) values (p_hubspot_portal_id)
    on conflict (hubspot_portal_id) do nothing;
    select b.granted_at into v_granted from private.hubspot_request_budgets b
     where b.hubspot_portal_id = p_hubspot_portal_id for update;
  end if;
  v_now := clock_timestamp();
  v_granted := array(select t from unnest(v_granted) t where t > v_now - v_window order by t);
  if cardinality(v_granted) < p_max_requests then
    update private.hubspot_request_budgets b
       set granted_at = v_granted || v_now, updated_at = v_now
     where b.hubspot_portal_id = p_hubspot_portal_id;
    return 0;
  end if;
  update private.hubspot_request_budgets b set granted_at = v_granted, updated_at = v_now
   where b.hubspot_portal_id = p_hubspot_portal_id;
  return greatest(1, ceil(extract(epoch from (v_granted[cardinality(v_granted) - p_max_requests + 1] + v_window - v_now)) * 1000)::integer);
end;
$$;
