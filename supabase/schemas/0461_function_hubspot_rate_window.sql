-- public.hubspot_rate_window(portals): each portal's rolling HubSpot window as
-- acquire_hubspot_requests sees it with its learned limit: requests granted in
-- it, how many it allows (the limit under the last ceiling, less headroom and
-- other apps' use), and while it is full, when the next grant can come (the
-- page's "waiting for HubSpot's 10-s window until …"). Reads only. The service role only.
create function public.hubspot_rate_window(p_hubspot_portal_ids bigint[])
returns table (hubspot_portal_id bigint, requests integer, allowed integer, full_until timestamptz)
language sql
stable
security definer
set search_path = ''
as $$
  select b.hubspot_portal_id, g.n, a.allowed,
         case when g.n >= a.allowed then g.times[g.n - a.allowed + 1] + w.span end
    from private.hubspot_request_budgets b
   cross join lateral (select make_interval(secs => greatest(b.interval_ms * 1.015, b.interval_ms + 150) / 1000.0) as span) w
   cross join lateral (select array(select t from unnest(b.granted_at) t where t > now() - w.span order by t) as times) gt
   cross join lateral (select cardinality(gt.times) as n, gt.times) g
   cross join lateral (select case when b.configured_max is null then b.max_per_interval
                                   else least(b.max_per_interval, greatest(1, floor(b.configured_max * b.interval_ms / 10000.0)::integer)) end as lim) l
   cross join lateral (select greatest(1, l.lim - greatest(2, ceil(l.lim * 0.02)::integer)
                                          - case when b.other_apps_until > now() then b.other_apps_requests else 0 end) as allowed) a
   where b.hubspot_portal_id = any (p_hubspot_portal_ids) and b.max_per_interval is not null;
$$;
