-- public.acquire_hubspot_requests(portal, count, max, window_ms, auth_kind,
-- ceiling, daily_reserve_percent): the shared HubSpot budget grants up to
-- `count` requests at once (the concurrent requests of one client: a probe's
-- dozen take one call), as many as the portal's rolling window has room for:
-- (granted, wait_ms), wait_ms 0 when all were granted, else ms until the next
-- grant can come, -1 when the day's quota is down to the reserve (wait for the
-- account's midnight). With an auth kind the allowance is the portal's learned
-- limit (seeded from the auth kind; at most ceiling per 10 s when given) less
-- headroom and what other apps spend this interval; without one, max per
-- window_ms. Grants are counted in their 10-s window (count_hubspot_request).
-- Locks the portal's budget row FOR UPDATE. For the service role only (the
-- worker and the orchestrator).
create function public.acquire_hubspot_requests(
  p_hubspot_portal_id bigint, p_count integer default 1, p_max_requests integer default 190, p_window_ms integer default 10000,
  p_auth_kind text default null, p_ceiling integer default null, p_daily_reserve_percent numeric default 0
) returns table (granted integer, wait_ms integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz;
  v_row private.hubspot_request_budgets;
  v_max integer;
  v_limit integer;
  v_window interval;
  v_tz text;
  v_room integer;
begin
  if p_hubspot_portal_id is null or p_max_requests is null or p_max_requests < 1 or p_window_ms is null or p_window_ms < 1 then
    raise exception 'acquire_hubspot_requests: portal id, a positive max and window are required' using errcode = '22023';
  end if;
  if p_count is null or p_count not between 1 and 1000 then
    raise exception 'acquire_hubspot_requests: count must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_auth_kind is not null and p_auth_kind not in ('private_app', 'oauth') then
    raise exception 'acquire_hubspot_requests: auth kind must be private_app or oauth' using errcode = '22023';
  end if;
  if (p_ceiling is not null and p_ceiling < 1) or p_daily_reserve_percent is null
     or p_daily_reserve_percent < 0 or p_daily_reserve_percent >= 100 then
    raise exception 'acquire_hubspot_requests: a positive ceiling and a daily reserve in [0, 100) are required' using errcode = '22023';
  end if;
  select * into v_row from private.hubspot_request_budgets b
   where b.hubspot_portal_id = p_hubspot_portal_id for update;
  if not found then
    insert into private.hubspot_request_budgets (hubspot_portal_id) values (p_hubspot_portal_id)
    on conflict (hubspot_portal_id) do nothing;
    select * into v_row from private.hubspot_request_budgets b
     where b.hubspot_portal_id = p_hubspot_portal_id for update;
  end if;
  v_now := clock_timestamp();
  if p_auth_kind is null then
    v_max := p_max_requests;
    v_window := make_interval(secs => p_window_ms / 1000.0);
  else
    if v_row.max_per_interval is null then
      v_row.max_per_interval := case p_auth_kind when 'oauth' then 110 else 100 end;
      v_row.interval_ms := 10000;
      v_row.limit_source := 'auth_kind';
      v_row.limit_learned_at := v_now;
    end if;
    v_row.configured_max := p_ceiling;
    v_limit := v_row.max_per_interval;
    if p_ceiling is not null then
      v_limit := least(v_limit, greatest(1, floor(p_ceiling * v_row.interval_ms / 10000.0)::integer));
    end if;
    v_max := greatest(1, v_limit - greatest(2, ceil(v_limit * 0.02)::integer));
    if v_row.other_apps_until > v_now then
      v_max := greatest(1, v_max - v_row.other_apps_requests);
    end if;
    v_window := make_interval(secs => greatest(v_row.interval_ms * 1.015, v_row.interval_ms + 150) / 1000.0);
    v_tz := coalesce(v_row.time_zone, 'UTC');
    if v_row.daily_limit is not null and v_row.daily_remaining is not null
       and (v_row.daily_seen_at at time zone v_tz)::date = (v_now at time zone v_tz)::date then
      -- What the day's quota has left above the reserve caps the grant.
      v_room := v_row.daily_remaining - ceil(v_row.daily_limit * p_daily_reserve_percent / 100.0)::integer;
      if v_room <= 0 then
        update private.hubspot_request_budgets b
           set max_per_interval = v_row.max_per_interval, interval_ms = v_row.interval_ms, limit_source = v_row.limit_source,
               limit_learned_at = v_row.limit_learned_at, configured_max = v_row.configured_max, updated_at = v_now
         where b.hubspot_portal_id = p_hubspot_portal_id;
        return query select 0, -1;
        return;
      end if;
    end if;
  end if;
  v_row.granted_at := array(select t from unnest(v_row.granted_at) t where t > v_now - v_window order by t);
  granted := greatest(0, least(p_count, v_max - cardinality(v_row.granted_at), coalesce(v_room, p_count)));
  if granted > 0 then
    v_row.granted_at := v_row.granted_at || array_fill(v_now, array[granted]);
    v_row.daily_remaining := greatest(0, v_row.daily_remaining - granted);
    perform private.count_hubspot_request(p_hubspot_portal_id, v_now, granted);
  end if;
  update private.hubspot_request_budgets b
     set granted_at = v_row.granted_at, updated_at = v_now,
         max_per_interval = v_row.max_per_interval, interval_ms = v_row.interval_ms, limit_source = v_row.limit_source,
         limit_learned_at = v_row.limit_learned_at, configured_max = v_row.configured_max,
         daily_remaining = v_row.daily_remaining
   where b.hubspot_portal_id = p_hubspot_portal_id;
  if granted = p_count then
    wait_ms := 0;
  elsif v_room is not null and granted >= v_room then
    wait_ms := -1; -- the rest would dip into the reserve
  else
    -- Full: the next grant comes when the oldest request that keeps it full leaves the window.
    wait_ms := greatest(1, ceil(extract(epoch from (v_row.granted_at[cardinality(v_row.granted_at) - v_max + 1] + v_window - v_now)) * 1000)::integer);
  end if;
  return next;
end;
$$;
