-- private.hubspot_request_budgets: the HubSpot request budget every worker
-- shares, a rolling-window log of grant times per HubSpot portal. Written only
-- by acquire_hubspot_request and record_hubspot_request, which serialise on the
-- portal's row (FOR UPDATE / ON CONFLICT).
create table private.hubspot_request_budgets (
  hubspot_portal_id bigint primary key,
  granted_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table private.hubspot_request_budgets is 'Grant times of recent HubSpot requests per portal (rolling window), shared by all workers.';
alter table private.hubspot_request_budgets enable row level security;
