-- private.count_hubspot_request(portal, at, requests): adds the requests (one
-- unless given) to the portal's 10-second window of `at`. Windows older than 24
-- hours are deleted by retention (prune_queue_history), not here: a delete on
-- every window's first request cost a fleet's grants ~0.2 ms each (decision 0054).
-- The caller holds the portal's budget row (one writer per portal at a time).
-- Owner only (acquire_hubspot_requests, record_hubspot_request).
create function private.count_hubspot_request(p_hubspot_portal_id bigint, p_at timestamptz, p_requests integer default 1) returns void
language plpgsql
set search_path = ''
as $$
begin
  insert into private.hubspot_request_counts as c (hubspot_portal_id, window_start, requests)
  values (p_hubspot_portal_id, to_timestamp(floor(extract(epoch from p_at) / 10) * 10), p_requests)
  on conflict (hubspot_portal_id, window_start) do update set requests = c.requests + excluded.requests;
end;
$$;
