-- private.count_hubspot_request(portal, at, requests): adds the requests (one
-- unless given) to the portal's 10-second window of `at`; a window's first request also deletes at most 8
-- windows (any portal's) older than 24 hours, so the table stays bounded
-- without a cron job. The caller holds the portal's budget row (one writer per
-- portal at a time). Owner only (acquire_hubspot_requests, record_hubspot_request).
create function private.count_hubspot_request(p_hubspot_portal_id bigint, p_at timestamptz, p_requests integer default 1) returns void
language plpgsql
set search_path = ''
as $$
declare
  v_window timestamptz := to_timestamp(floor(extract(epoch from p_at) / 10) * 10);
  v_first boolean;
begin
  insert into private.hubspot_request_counts as c (hubspot_portal_id, window_start, requests)
  values (p_hubspot_portal_id, v_window, p_requests)
  on conflict (hubspot_portal_id, window_start) do update set requests = c.requests + excluded.requests
  returning c.xmax = 0 into v_first;
  if v_first then
    delete from private.hubspot_request_counts c
     where (c.hubspot_portal_id, c.window_start) in (
           select o.hubspot_portal_id, o.window_start from private.hubspot_request_counts o
            where o.window_start < v_window - interval '24 hours'
            order by o.window_start
            limit 8);
  end if;
end;
$$;
