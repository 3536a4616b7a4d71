-- private.hubspot_request_counts: HubSpot requests per HubSpot portal per
-- 10-second window (aligned to the epoch): one row per window that had a
-- request, never one per request. Written only by count_hubspot_request (from
-- acquire_hubspot_requests and record_hubspot_request, which hold the portal's
-- budget row); past 24 hours deleted by retention (prune_queue_history). Read by hubspot_request_history.
create table private.hubspot_request_counts (
  hubspot_portal_id bigint not null,
  window_start timestamptz not null,
  requests integer not null constraint hubspot_request_counts_positive check (requests > 0),
  primary key (hubspot_portal_id, window_start),
  constraint hubspot_request_counts_aligned check (extract(epoch from window_start) % 10 = 0)
);
comment on table private.hubspot_request_counts is
  'HubSpot requests granted or recorded per portal per 10-second window (the requests chart), kept 24 hours.';
-- Retention finds the oldest windows of every portal.
create index hubspot_request_counts_window_idx on private.hubspot_request_counts (window_start);
alter table private.hubspot_request_counts enable row level security;
