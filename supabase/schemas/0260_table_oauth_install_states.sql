-- private.oauth_install_states: open HubSpot OAuth installs, only sha256(state)
-- bound to the user who started it, single-use and expiring (the PKCE verifier
-- is derived, never stored). Written by the install-state functions (0430-0432)
-- only. Rationale: docs/decisions/0007-credentials-and-oauth.md.
create table private.oauth_install_states (
  state_hash bytea primary key
    constraint oauth_install_states_state_hash_is_sha256 check (octet_length(state_hash) = 32),
  user_id uuid not null references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  constraint oauth_install_states_expires_after_created check (expires_at > created_at)
);
comment on table private.oauth_install_states is
  'Open HubSpot OAuth installs: sha256(state) of each, the user it is bound to and when it expires. Consumed (deleted) by the one callback that presents it.';
create index oauth_install_states_user_idx on private.oauth_install_states (user_id, created_at);
create index oauth_install_states_expires_idx on private.oauth_install_states (expires_at);
alter table private.oauth_install_states enable row level security;
