-- public.record_hubspot_request(portal): counts an already-made HubSpot request
-- in the portal's shared budget, even past the limit (connect_portal learns the
-- portal id only from the answer), and in its 10-s window. Upserts the budget
-- row. The service role only (the orchestrator).
create function public.record_hubspot_request(p_hubspot_portal_id bigint) returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 then
    raise exception 'record_hubspot_request: a positive HubSpot portal id is required' using errcode = '22023';
  end if;
  insert into private.hubspot_request_budgets as b (hubspot_portal_id, granted_at, updated_at)
  values (p_hubspot_portal_id, array[clock_timestamp()], clock_timestamp())
  on conflict (hubspot_portal_id) do update
     set granted_at = array(select t from unnest(b.granted_at) t where t > clock_timestamp() - interval '1 minute' order by t)
                      || clock_timestamp(),
         updated_at = clock_timestamp();
  perform private.count_hubspot_request(p_hubspot_portal_id, clock_timestamp());
end;
$$;
comment on function public.record_hubspot_request(bigint) is
  'Records an already-made HubSpot request in the portal''s shared request budget.';
