-- public.record_hubspot_rate_headers(portal, max, interval_ms, remaining, daily,
-- daily_remaining, sent_at, answered_at): what one HubSpot answer said of the portal's
-- limits (X-HubSpot-RateLimit-*) becomes its budget's limit; remaining below
-- what our own grants leave (those HubSpot surely counted: from one interval
-- before answered_at to sent_at) means other apps of the account spend the
-- difference, counted until the next answer (for one interval at most). daily null: the
-- app has no daily limit (OAuth). An answer that says nothing new (the same
-- limits, no use by other apps now or counted, the remaining of the day within
-- one interval of requests of the stored one) writes nothing (decision 0061).
-- Otherwise upserts and locks the portal's budget row.
-- For the service role only (the worker and the orchestrator).
create function public.record_hubspot_rate_headers(
  p_hubspot_portal_id bigint, p_max integer, p_interval_ms integer, p_remaining integer,
  p_daily integer, p_daily_remaining integer, p_sent_at timestamptz, p_answered_at timestamptz
) returns void
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_row private.hubspot_request_budgets;
  v_ours integer;
  v_other integer;
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 or p_max is null or p_max < 1 or p_interval_ms is null
     or p_interval_ms < 1 or p_remaining is null or p_remaining < 0 or p_sent_at is null or p_answered_at is null
     or (p_daily is null) <> (p_daily_remaining is null) or p_daily < 1 or p_daily_remaining < 0 then
    raise exception 'record_hubspot_rate_headers: a portal id, positive max and interval, remaining, sent_at and answered_at are required' using errcode = '22023';
  end if;
  -- Read first without a lock: most answers repeat what the row holds, and a row lock is a write.
  select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id;
  if found and v_row.limit_source = 'headers' and v_row.max_per_interval = p_max and v_row.interval_ms = p_interval_ms
     and (v_row.other_apps_until is null or v_row.other_apps_until <= v_now)
     and ((p_daily is null and v_row.daily_limit is null)
          or (v_row.daily_limit = p_daily and abs(v_row.daily_remaining - p_daily_remaining) <= p_max
              and (v_row.daily_seen_at at time zone coalesce(v_row.time_zone, 'UTC'))::date
                  = (v_now at time zone coalesce(v_row.time_zone, 'UTC'))::date))
     and p_max - p_remaining <= (select count(*) from unnest(v_row.granted_at) t
                                  where t > p_answered_at - make_interval(secs => p_interval_ms / 1000.0) and t <= p_sent_at) then
    return;
  end if;
  select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id for update;
  if not found then -- the first answer: the row is made (or another caller's waited for) once
    insert into private.hubspot_request_budgets (hubspot_portal_id) values (p_hubspot_portal_id)
    on conflict (hubspot_portal_id) do nothing;
    select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id for update;
  end if;
  select count(*)::integer into v_ours from unnest(v_row.granted_at) t
   where t > p_answered_at - make_interval(secs => p_interval_ms / 1000.0) and t <= p_sent_at;
  v_other := greatest(0, p_max - p_remaining - v_ours);
  -- Never below the truth (only requests HubSpot surely counted are ours): the latest answer wins, for one interval.
  v_row.other_apps_requests := v_other;
  v_row.other_apps_until := case when v_other > 0 then v_now + make_interval(secs => p_interval_ms / 1000.0) end;
  update private.hubspot_request_budgets b
     set max_per_interval = p_max, interval_ms = p_interval_ms, limit_source = 'headers', limit_learned_at = v_now,
         other_apps_requests = v_row.other_apps_requests, other_apps_until = v_row.other_apps_until,
         daily_limit = p_daily, daily_remaining = p_daily_remaining, daily_seen_at = case when p_daily is null then null else v_now end,
         updated_at = v_now
   where b.hubspot_portal_id = p_hubspot_portal_id;
end;
$$;
comment on function public.record_hubspot_rate_headers(bigint, integer, integer, integer, integer, integer, timestamptz, timestamptz) is
  'Learns the portal''s HubSpot limits from one answer''s X-HubSpot-RateLimit-* headers.';
