-- public.hubspot_daily_reset_at(portal_id, now): the next midnight after now
-- in the time zone of the portal's HubSpot account (UTC while unknown), when
-- HubSpot's daily limit resets. Reads only. For the service role (the worker).
create function public.hubspot_daily_reset_at(p_portal_id uuid, p_now timestamptz default now()) returns timestamptz
language sql
stable
security definer
set search_path = ''
as $$
  select ((date_trunc('day', p_now at time zone tz.name) + interval '1 day') at time zone tz.name)
    from (select coalesce((select b.time_zone from public.portals p
                             join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
                            where p.id = p_portal_id), 'UTC') as name) tz;
$$;
comment on function public.hubspot_daily_reset_at(uuid, timestamptz) is
  'When HubSpot''s daily limit of the portal''s account resets: the next midnight in the account''s time zone.';
