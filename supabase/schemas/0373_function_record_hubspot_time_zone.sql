-- public.record_hubspot_time_zone(portal, time_zone): the account's time zone
-- (GET /account-info/v3/details), where its daily limit resets at midnight; a
-- name Postgres does not know is stored as null (UTC). Upserts the portal's
-- budget row. For the service role only (the orchestrator and the worker).
create function public.record_hubspot_time_zone(p_hubspot_portal_id bigint, p_time_zone text) returns void
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_tz text;
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 then
    raise exception 'record_hubspot_time_zone: a positive HubSpot portal id is required' using errcode = '22023';
  end if;
  select n.name into v_tz from pg_catalog.pg_timezone_names n where n.name = p_time_zone and char_length(p_time_zone) <= 64;
  insert into private.hubspot_request_budgets as b (hubspot_portal_id, time_zone, time_zone_learned_at)
  values (p_hubspot_portal_id, v_tz, clock_timestamp())
  on conflict (hubspot_portal_id) do update
     set time_zone = excluded.time_zone, time_zone_learned_at = excluded.time_zone_learned_at;
end;
$$;
comment on function public.record_hubspot_time_zone(bigint, text) is
  'Stores the HubSpot account''s time zone, where its daily request limit resets.';
