-- private.portal_credentials: one portal's HubSpot credentials, sealed by the
-- functions (AES-GCM; the keys are a function secret, never in the database),
-- with the refresh lease (refresh_holder, refresh_lease_expires_at). Service
-- role only, through the credential functions (0380-0390), which lock the row
-- FOR UPDATE. The trigger refusing plaintext tokens is in 0380. Rationale: docs/decisions/0007-credentials-and-oauth.md.
create table private.portal_credentials (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  access_token text check (char_length(access_token) between 1 and 4096),
  updated_at timestamptz not null default now(),
  auth_kind text not null default 'private_app',
  key_id text,
  access_token_enc text,
  refresh_token_enc text,
  access_token_hash text,
  access_expires_at timestamptz,
  refresh_after timestamptz,
  scopes text[],
  token_version bigint not null default 1,
  refresh_holder text,
  refresh_lease_expires_at timestamptz,
  refresh_started_at timestamptz,
  rotation_attempted_at timestamptz,
  constraint portal_credentials_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  constraint portal_credentials_has_a_token check (access_token is not null or access_token_enc is not null),
  constraint portal_credentials_sealed_with_a_key check ((access_token_enc is null) = (key_id is null)),
  constraint portal_credentials_sealed_form check (
    (access_token_enc like 'v1.%' or access_token_enc like 'v2.%') and char_length(access_token_enc) <= 8192
    and (refresh_token_enc is null
         or ((refresh_token_enc like 'v1.%' or refresh_token_enc like 'v2.%') and char_length(refresh_token_enc) <= 8192))),
  constraint portal_credentials_oauth_complete check (
    auth_kind <> 'oauth' or (access_token_enc is not null and refresh_token_enc is not null
                             and access_expires_at is not null and refresh_after is not null)),
  constraint portal_credentials_refresh_lease_pairs check ((refresh_holder is null) = (refresh_lease_expires_at is null)),
  constraint portal_credentials_key_id_form check (key_id ~ '^[A-Za-z0-9_-]{1,32}$'),
  constraint portal_credentials_holder_length check (char_length(refresh_holder) <= 200)
);
comment on table private.portal_credentials is
  'HubSpot credentials, sealed by the functions (AES-GCM, keys in the HUBSPOT_TOKEN_KEYS secret). Service role only.';
comment on column private.portal_credentials.access_token is
  'LEGACY plaintext token of rows from before encryption, never written any more (trigger portal_credentials_no_plaintext); '
  'the rotation step seals it and sets this to null. Dropped once no row has one.';
comment on column private.portal_credentials.access_token_hash is
  'HMAC of the access token under a key derived from key_id ("<keyId>.<mac>"), for "same token" lookups.';
comment on column private.portal_credentials.token_version is
  'Increases with every new access token (connect, refresh); a 401 refreshes only if the caller''s version is current.';
comment on column private.portal_credentials.refresh_after is
  'When the OAuth access token is due for refresh (its expiry minus a margin).';
create index portal_credentials_rotation_idx on private.portal_credentials (rotation_attempted_at nulls first, portal_id);
create index portal_credentials_token_hash_idx on private.portal_credentials (access_token_hash) where access_token_hash is not null;
alter table private.portal_credentials enable row level security;
