-- public.acquire_hubspot_request(portal, max, window_ms): the shared HubSpot
-- budget grants one request when fewer than max were granted in the rolling
-- window: 0 = go, else ms to wait. Locks the portal's budget row FOR UPDATE.
-- For the service role only (the worker).
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
