-- public.portals: a HubSpot portal connected by a user (its credentials are in
-- private.portal_credentials). Owners read their own rows (policy in 0800);
-- only the service role writes, through connect_portal_with_tokens and
-- disconnect_portal.
create table public.portals (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  hubspot_portal_id bigint not null check (hubspot_portal_id > 0),
  name text not null check (char_length(name) between 1 and 200),
  -- No control characters and no invisible format characters (the API's rule;
  -- joiners U+200C/U+200D stay allowed, as inside emoji and joining scripts).
  constraint portals_name_visible
    check (name !~ '[\x01-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]'),
  created_at timestamptz not null default now(),
  auth_kind text not null default 'private_app',
  disconnected_at timestamptz,
  disconnected_reason text,
  constraint portals_one_per_owner_and_hubspot_portal unique (owner_id, hubspot_portal_id),
  -- target of the (portal_id, owner_id) foreign keys of runs, jobs and
  -- hubspot_content, which keep denormalised owners consistent with their portal
  constraint portals_id_owner_key unique (id, owner_id),
  constraint portals_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  constraint portals_disconnected_has_reason check ((disconnected_at is null) = (disconnected_reason is null)),
  constraint portals_disconnected_reason_length check (char_length(disconnected_reason) <= 500)
);
comment on table public.portals is 'A HubSpot portal connected by a user. The access token is in private.portal_credentials.';
comment on column public.portals.auth_kind is 'How the portal was connected: a private-app token or the OAuth app.';
comment on column public.portals.disconnected_at is 'Set when HubSpot access was removed (app uninstalled, refresh refused): reconnect the portal.';
comment on column public.portals.disconnected_reason is 'Why the portal is disconnected (shown to its owner).';
alter table public.portals enable row level security;
