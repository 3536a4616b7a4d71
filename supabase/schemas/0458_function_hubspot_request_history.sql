-- public.hubspot_request_history(portals, since, until): the portals' HubSpot
-- requests per 10-second window in [since, until) (windows without a request
-- are absent), from private.hubspot_request_counts: at most the last 24 hours,
-- at most 20 portals. Reads only. For the service role only (the requests
-- chart and the operator's budget history).
create function public.hubspot_request_history(
  p_hubspot_portal_ids bigint[], p_since timestamptz, p_until timestamptz default null
) returns table (hubspot_portal_id bigint, window_start timestamptz, requests integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_hubspot_portal_ids is null or cardinality(p_hubspot_portal_ids) not between 1 and 20 or p_since is null then
    raise exception 'hubspot_request_history: 1-20 HubSpot portal ids and a start are required' using errcode = '22023';
  end if;
  return query
  select c.hubspot_portal_id, c.window_start, c.requests
    from private.hubspot_request_counts c
   where c.hubspot_portal_id = any (p_hubspot_portal_ids)
     -- the window holding p_since counts (its requests may all be after p_since)
     and c.window_start > greatest(p_since, now() - interval '24 hours') - interval '10 seconds'
     and (p_until is null or c.window_start < p_until)
   order by c.hubspot_portal_id, c.window_start;
end;
$$;
