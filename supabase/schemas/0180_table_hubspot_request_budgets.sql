-- private.hubspot_request_budgets: the HubSpot request budget every worker
-- shares per HubSpot portal: a rolling-window log of grant times, and the
-- portal's limits as last learned (HubSpot's X-HubSpot-RateLimit-* headers, else
-- the auth kind's documented limit), what other apps spent of the current
-- interval, the day's remaining quota and the account's time zone. Written only
-- by acquire_hubspot_requests, record_hubspot_request,
-- record_hubspot_rate_headers and record_hubspot_time_zone, which serialise on
-- the portal's row (FOR UPDATE / ON CONFLICT).
create table private.hubspot_request_budgets (
  hubspot_portal_id bigint primary key,
  granted_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now(),
  max_per_interval integer check (max_per_interval > 0),
  interval_ms integer check (interval_ms > 0),
  limit_source text check (limit_source in ('headers', 'auth_kind')),
  limit_learned_at timestamptz,
  configured_max integer check (configured_max > 0),
  other_apps_requests integer not null default 0 check (other_apps_requests >= 0),
  other_apps_until timestamptz,
  daily_limit integer check (daily_limit > 0),
  daily_remaining integer check (daily_remaining >= 0),
  daily_seen_at timestamptz,
  time_zone text check (char_length(time_zone) <= 64),
  time_zone_learned_at timestamptz,
  constraint hubspot_request_budgets_limit_complete check ((max_per_interval is null) = (interval_ms is null) and (max_per_interval is null) = (limit_source is null))
);
comment on table private.hubspot_request_budgets is 'Grant times of recent HubSpot requests per portal (rolling window) and the portal''s learned limits, shared by all workers.';
comment on column private.hubspot_request_budgets.max_per_interval is 'HubSpot''s limit per interval for this portal: X-HubSpot-RateLimit-Max, or the auth kind''s documented limit until HubSpot has answered.';
comment on column private.hubspot_request_budgets.limit_source is 'Where max_per_interval comes from: HubSpot''s headers, or the auth kind (private app 100, OAuth 110 per 10 s).';
comment on column private.hubspot_request_budgets.configured_max is 'HUBSPOT_RATE_LIMIT_PER_10S as the last grant saw it (a ceiling over the learned limit); null: none.';
comment on column private.hubspot_request_budgets.other_apps_requests is 'Requests of other apps in HubSpot''s current interval, estimated from X-HubSpot-RateLimit-Remaining; counted until other_apps_until.';
comment on column private.hubspot_request_budgets.daily_remaining is 'X-HubSpot-RateLimit-Daily-Remaining as last seen, less our grants since (private apps only; OAuth apps have no daily limit).';
comment on column private.hubspot_request_budgets.time_zone is 'The account''s time zone (GET /account-info/v3/details timeZone): its daily limit resets at midnight there.';
alter table private.hubspot_request_budgets enable row level security;
