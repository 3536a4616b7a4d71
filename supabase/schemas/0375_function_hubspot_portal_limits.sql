-- public.hubspot_portal_limits(hubspot_portal_ids): each portal's HubSpot limits
-- as learned (per interval, source, when), the configured ceiling, and what
-- remains of the day (a quota seen on an earlier day counts as reset) with
-- when it resets, and the account's time zone with when it was learned. Reads only. For the service role (the orchestrator's views).
create function public.hubspot_portal_limits(p_hubspot_portal_ids bigint[])
returns table (
  hubspot_portal_id bigint, max_per_interval integer, interval_ms integer, limit_source text, limit_learned_at timestamptz,
  configured_max integer, daily_limit integer, daily_remaining integer, daily_resets_at timestamptz, time_zone text,
  time_zone_learned_at timestamptz
)
language sql
stable
security definer
set search_path = ''
as $$
  select b.hubspot_portal_id, b.max_per_interval, b.interval_ms, b.limit_source, b.limit_learned_at, b.configured_max,
         b.daily_limit,
         case when b.daily_limit is null then null
              when (b.daily_seen_at at time zone tz.name)::date = (now() at time zone tz.name)::date then b.daily_remaining
              else b.daily_limit end,
         case when b.daily_limit is null then null
              else (date_trunc('day', now() at time zone tz.name) + interval '1 day') at time zone tz.name end,
         b.time_zone, b.time_zone_learned_at
    from private.hubspot_request_budgets b
   cross join lateral (select coalesce(b.time_zone, 'UTC') as name) tz
   where b.hubspot_portal_id = any (p_hubspot_portal_ids);
$$;
comment on function public.hubspot_portal_limits(bigint[]) is
  'The portals'' learned HubSpot limits and what remains of their day.';
