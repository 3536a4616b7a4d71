-- HubSpot credentials encrypted at rest, OAuth tokens with a shared refresh,
-- and disconnected portals.
--
-- Tokens are sealed by the functions (AES-256-GCM, keys in the HUBSPOT_TOKEN_KEYS
-- secret, never in the database: see shared/token-crypto.ts); this schema stores
-- ciphertext and the id of the key that sealed it. The old plaintext column stays
-- for rows written before this migration (and by the legacy connect_portal): the
-- database cannot encrypt them, so the worker's rotation step does, batch by
-- batch, nulling the plaintext as it goes (credentials_to_rotate / rotate_credentials).
--
-- Shared refresh: claim_portal_token decides, in one call under the row lock,
-- whether a caller uses the stored access token, refreshes it (it then holds the
-- portal's refresh lease), or waits for the holder. At most one refresh is in
-- flight per portal; a crashed holder's lease expires. token_version increases
-- with every new access token, so a 401 triggers a refresh only when the token
-- the caller used is still the current one.

alter table public.portals
  add column auth_kind text not null default 'private_app',
  add column disconnected_at timestamptz,
  add column disconnected_reason text,
  add constraint portals_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  add constraint portals_disconnected_has_reason check ((disconnected_at is null) = (disconnected_reason is null)),
  add constraint portals_disconnected_reason_length check (char_length(disconnected_reason) <= 500);
comment on column public.portals.auth_kind is 'How the portal was connected: a private-app token or the OAuth app.';
comment on column public.portals.disconnected_at is 'Set when HubSpot access was removed (app uninstalled, refresh refused): reconnect the portal.';
comment on column public.portals.disconnected_reason is 'Why the portal is disconnected (shown to its owner).';

alter table private.portal_credentials
  alter column access_token drop not null,
  add column auth_kind text not null default 'private_app',
  add column key_id text,
  add column access_token_enc text,
  add column refresh_token_enc text,
  add column access_token_hash text,
  add column access_expires_at timestamptz,
  add column refresh_after timestamptz,
  add column scopes text[],
  add column token_version bigint not null default 1,
  add column refresh_holder text,
  add column refresh_lease_until timestamptz,
  add column refresh_started_at timestamptz,
  add column rotation_attempted_at timestamptz,
  add constraint portal_credentials_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  add constraint portal_credentials_has_a_token check (access_token is not null or access_token_enc is not null),
  add constraint portal_credentials_sealed_with_a_key check ((access_token_enc is null) = (key_id is null)),
  add constraint portal_credentials_sealed_form check (
    access_token_enc like 'v1.%' and char_length(access_token_enc) <= 8192
    and (refresh_token_enc is null or (refresh_token_enc like 'v1.%' and char_length(refresh_token_enc) <= 8192))),
  add constraint portal_credentials_oauth_complete check (
    auth_kind <> 'oauth' or (access_token_enc is not null and refresh_token_enc is not null
                             and access_expires_at is not null and refresh_after is not null)),
  add constraint portal_credentials_lease_pairs check ((refresh_holder is null) = (refresh_lease_until is null)),
  add constraint portal_credentials_key_id_form check (key_id ~ '^[A-Za-z0-9_-]{1,32}$'),
  add constraint portal_credentials_holder_length check (char_length(refresh_holder) <= 200);
comment on table private.portal_credentials is
  'HubSpot credentials, sealed by the functions (AES-GCM, keys in the HUBSPOT_TOKEN_KEYS secret). Service role only.';
comment on column private.portal_credentials.access_token is
  'LEGACY plaintext token (rows from before encryption); the rotation step seals it and sets this to null.';
comment on column private.portal_credentials.access_token_hash is
  'HMAC of the access token under a key derived from key_id ("<keyId>.<mac>"), for "same token" lookups.';
comment on column private.portal_credentials.token_version is
  'Increases with every new access token (connect, refresh); a 401 refreshes only if the caller''s version is current.';
comment on column private.portal_credentials.refresh_after is
  'When the OAuth access token is due for refresh (its expiry minus a margin).';
create index portal_credentials_rotation_idx on private.portal_credentials (rotation_attempted_at nulls first, portal_id);
create index portal_credentials_token_hash_idx on private.portal_credentials (access_token_hash) where access_token_hash is not null;

-- The legacy connect (plaintext token, kept for callers that cannot encrypt): now also clears
-- any sealed credentials and the disconnected state, so the row holds exactly this token.
create or replace function public.connect_portal(p_owner_id uuid, p_hubspot_portal_id bigint, p_name text, p_access_token text)
returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal_id uuid;
begin
  if p_owner_id is null or p_hubspot_portal_id is null or p_name is null or p_access_token is null then
    raise exception 'connect_portal: owner, HubSpot portal id, name and token are required' using errcode = '22004';
  end if;
  insert into public.portals as p (owner_id, hubspot_portal_id, name, auth_kind)
  values (p_owner_id, p_hubspot_portal_id, p_name, 'private_app')
  on conflict (owner_id, hubspot_portal_id) do update
     set name = excluded.name, auth_kind = 'private_app', disconnected_at = null, disconnected_reason = null
  returning p.id into v_portal_id;
  insert into private.portal_credentials as c (portal_id, access_token)
  values (v_portal_id, p_access_token)
  on conflict (portal_id) do update
     set access_token = excluded.access_token, auth_kind = 'private_app', key_id = null, access_token_enc = null,
         refresh_token_enc = null, access_token_hash = null, access_expires_at = null, refresh_after = null, scopes = null,
         token_version = c.token_version + 1, refresh_holder = null, refresh_lease_until = null, refresh_started_at = null,
         updated_at = now();
  return v_portal_id;
end;
$$;

-- How long before expiry an access token is refreshed: the configured margin, at most a quarter of its lifetime.
create function private.refresh_margin_seconds(p_lifetime_seconds integer, p_margin_seconds integer) returns double precision
language plpgsql immutable
set search_path = ''
as $$
begin
  return least(greatest(coalesce(p_margin_seconds, 300), 0), p_lifetime_seconds / 4.0);
end;
$$;

-- Connects (or reconnects) a portal with sealed credentials: a private-app token
-- (p_auth_kind 'private_app', no refresh token, no expiry) or an OAuth grant
-- ('oauth': access and refresh token, the access token's lifetime in seconds from
-- when it was issued). Clears the disconnected state and any refresh lease;
-- bumps the token version. Returns the portal id.
create function public.connect_portal_with_tokens(
  p_owner_id uuid, p_hubspot_portal_id bigint, p_name text, p_auth_kind text, p_key_id text,
  p_access_token_enc text, p_refresh_token_enc text, p_expires_in_seconds integer, p_refresh_margin_seconds integer,
  p_access_token_hash text, p_scopes text[]
) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal_id uuid;
  v_expires timestamptz;
  v_refresh_after timestamptz;
begin
  if p_owner_id is null or p_hubspot_portal_id is null or p_name is null or p_auth_kind is null
     or p_key_id is null or p_access_token_enc is null then
    raise exception 'connect_portal_with_tokens: owner, HubSpot portal id, name, kind, key id and sealed token are required'
      using errcode = '22004';
  end if;
  if p_auth_kind not in ('private_app', 'oauth') then
    raise exception 'connect_portal_with_tokens: kind must be private_app or oauth' using errcode = '22023';
  end if;
  if p_auth_kind = 'oauth' then
    if p_refresh_token_enc is null or p_expires_in_seconds is null or p_expires_in_seconds < 1 then
      raise exception 'connect_portal_with_tokens: an OAuth grant needs a sealed refresh token and a positive lifetime'
        using errcode = '22023';
    end if;
    v_expires := clock_timestamp() + make_interval(secs => p_expires_in_seconds);
    v_refresh_after := v_expires - make_interval(secs => private.refresh_margin_seconds(p_expires_in_seconds, p_refresh_margin_seconds));
  elsif p_refresh_token_enc is not null or p_expires_in_seconds is not null then
    raise exception 'connect_portal_with_tokens: a private-app token has no refresh token or lifetime' using errcode = '22023';
  end if;
  insert into public.portals as p (owner_id, hubspot_portal_id, name, auth_kind)
  values (p_owner_id, p_hubspot_portal_id, p_name, p_auth_kind)
  on conflict (owner_id, hubspot_portal_id) do update
     set name = excluded.name, auth_kind = excluded.auth_kind, disconnected_at = null, disconnected_reason = null
  returning p.id into v_portal_id;
  insert into private.portal_credentials as c (
    portal_id, access_token, auth_kind, key_id, access_token_enc, refresh_token_enc, access_token_hash,
    access_expires_at, refresh_after, scopes)
  values (v_portal_id, null, p_auth_kind, p_key_id, p_access_token_enc, p_refresh_token_enc, p_access_token_hash,
          v_expires, v_refresh_after, p_scopes)
  on conflict (portal_id) do update
     set access_token = null, auth_kind = excluded.auth_kind, key_id = excluded.key_id,
         access_token_enc = excluded.access_token_enc, refresh_token_enc = excluded.refresh_token_enc,
         access_token_hash = excluded.access_token_hash, access_expires_at = excluded.access_expires_at,
         refresh_after = excluded.refresh_after, scopes = excluded.scopes,
         token_version = c.token_version + 1, refresh_holder = null, refresh_lease_until = null,
         refresh_started_at = null, rotation_attempted_at = null, updated_at = now();
  return v_portal_id;
end;
$$;

-- What a caller needs to make HubSpot requests for a portal, and what it should do:
--   'use'          the token is fresh (or a newer one than p_used_version exists): use it;
--   'refresh'      the token is due (or p_used_version, still current, was refused by
--                  HubSpot): the caller now holds the portal's refresh lease for
--                  p_lease_seconds and must complete_token_refresh or abandon_token_refresh;
--   'wait'         another caller holds the lease and the stored token is not usable:
--                  call again after wait_ms;
--   'disconnected' HubSpot access was removed (disconnected_reason).
-- No row: the portal is unknown or has no credentials. One call, under the row's lock.
-- Times come back as ms from now (the caller's clock may differ from the database's).
create function public.claim_portal_token(
  p_portal_id uuid, p_holder text, p_used_version bigint default null,
  p_lease_seconds integer default 30, p_min_valid_seconds integer default 5
) returns table (
  decision text, hubspot_portal_id bigint, auth_kind text, access_token_enc text, access_token_legacy text,
  refresh_token_enc text, token_version bigint, refresh_in_ms bigint, expires_in_ms bigint,
  disconnected_reason text, wait_ms integer
)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_portal public.portals;
  v_cred private.portal_credentials;
  v_decision text;
  v_wait integer;
begin
  if p_holder is null or char_length(p_holder) not between 1 and 200 then
    raise exception 'claim_portal_token: a holder of 1-200 characters is required' using errcode = '22023';
  end if;
  if p_lease_seconds is null or p_lease_seconds not between 1 and 600 or p_min_valid_seconds is null or p_min_valid_seconds < 0 then
    raise exception 'claim_portal_token: lease of 1-600 s and a non-negative minimum validity are required' using errcode = '22023';
  end if;
  -- The credentials row's lock first, then the portal read in a statement after it: a
  -- disconnect_portal that committed while this call waited for the lock is seen.
  select * into v_cred from private.portal_credentials c where c.portal_id = p_portal_id for update;
  if not found then
    return;
  end if;
  select * into v_portal from public.portals p where p.id = p_portal_id;

  if v_portal.disconnected_at is not null then
    v_decision := 'disconnected';
  elsif p_used_version is not null and p_used_version < v_cred.token_version then
    v_decision := 'use'; -- a newer token than the one HubSpot refused
  elsif v_cred.auth_kind <> 'oauth' then
    v_decision := 'use'; -- nothing to refresh: a refused private-app token is the caller's error to report
  elsif p_used_version is null and v_now < v_cred.refresh_after then
    v_decision := 'use';
  elsif v_cred.refresh_holder is null or v_cred.refresh_holder = p_holder or v_cred.refresh_lease_until <= v_now then
    update private.portal_credentials c
       set refresh_holder = p_holder, refresh_lease_until = v_now + make_interval(secs => p_lease_seconds),
           refresh_started_at = v_now
     where c.portal_id = p_portal_id;
    v_decision := 'refresh';
  elsif p_used_version is null and v_cred.access_expires_at > v_now + make_interval(secs => p_min_valid_seconds) then
    v_decision := 'use'; -- being refreshed by another caller, still valid meanwhile
  else
    v_decision := 'wait';
    v_wait := greatest(20, least(250, ceil(extract(epoch from (v_cred.refresh_lease_until - v_now)) * 1000)::integer));
  end if;

  return query select v_decision, v_portal.hubspot_portal_id, v_cred.auth_kind,
    case when v_decision = 'use' then v_cred.access_token_enc end,
    case when v_decision = 'use' and v_cred.access_token_enc is null then v_cred.access_token end,
    case when v_decision = 'refresh' then v_cred.refresh_token_enc end,
    v_cred.token_version,
    case when v_cred.refresh_after is not null then floor(extract(epoch from (v_cred.refresh_after - v_now)) * 1000)::bigint end,
    case when v_cred.access_expires_at is not null then floor(extract(epoch from (v_cred.access_expires_at - v_now)) * 1000)::bigint end,
    v_portal.disconnected_reason, v_wait;
end;
$$;

-- Stores the result of the holder's refresh: the new sealed access token and
-- refresh token (the one HubSpot sent, or the old one sealed again under the
-- same key as the access token), the access token's
-- lifetime counted from when the lease was taken (before HubSpot issued it), and
-- releases the lease. Returns the new token version, or null when the caller no
-- longer held the lease (nothing written).
create function public.complete_token_refresh(
  p_portal_id uuid, p_holder text, p_key_id text, p_access_token_enc text, p_refresh_token_enc text,
  p_expires_in_seconds integer, p_refresh_margin_seconds integer, p_access_token_hash text
) returns bigint
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_version bigint;
begin
  if p_holder is null or p_key_id is null or p_access_token_enc is null or p_refresh_token_enc is null
     or p_expires_in_seconds is null or p_expires_in_seconds < 1 then
    raise exception 'complete_token_refresh: holder, key id, sealed tokens and a positive lifetime are required' using errcode = '22023';
  end if;
  update private.portal_credentials c
     set access_token = null, key_id = p_key_id, access_token_enc = p_access_token_enc,
         refresh_token_enc = p_refresh_token_enc,
         access_token_hash = p_access_token_hash,
         access_expires_at = c.refresh_started_at + make_interval(secs => p_expires_in_seconds),
         refresh_after = c.refresh_started_at + make_interval(secs => p_expires_in_seconds)
                         - make_interval(secs => private.refresh_margin_seconds(p_expires_in_seconds, p_refresh_margin_seconds)),
         token_version = c.token_version + 1,
         refresh_holder = null, refresh_lease_until = null, updated_at = now()
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder and c.auth_kind = 'oauth'
  returning c.token_version into v_version;
  return v_version;
end;
$$;

-- The holder gives its refresh lease back without a new token (HubSpot unreachable,
-- the caller's deadline): the next caller may refresh at once. False when not held.
create function public.abandon_token_refresh(p_portal_id uuid, p_holder text) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  update private.portal_credentials c
     set refresh_holder = null, refresh_lease_until = null
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder;
  return found;
end;
$$;

-- HubSpot access was removed (the refresh token was refused: app uninstalled).
-- Marks the portal disconnected with the reason, fails its pending and running
-- fetch jobs permanently (no retry, no further attempt; a running job's holder is
-- fenced off at its next write or heartbeat), settles their runs (one notification
-- each, by the unique index). Export jobs only read Postgres and are left alone.
-- Idempotent: a second call changes nothing. Returns how many jobs it failed.
create function public.disconnect_portal(p_portal_id uuid, p_reason text) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_message text;
  v_runs uuid[];
  v_run uuid;
  v_failed integer;
begin
  if p_portal_id is null or p_reason is null or char_length(p_reason) not between 1 and 400 then
    raise exception 'disconnect_portal: a portal and a reason of 1-400 characters are required' using errcode = '22023';
  end if;
  update public.portals p
     set disconnected_at = coalesce(p.disconnected_at, now()),
         disconnected_reason = coalesce(p.disconnected_reason, p_reason)
   where p.id = p_portal_id;
  if not found then
    return 0;
  end if;
  update private.portal_credentials c set refresh_holder = null, refresh_lease_until = null where c.portal_id = p_portal_id;
  v_message := format('HubSpot access was removed: reconnect the portal (%s).', p_reason);
  -- Lock order: runs before their jobs.
  select coalesce(array_agg(r.id order by r.id), '{}') into v_runs
    from (select r.id from public.runs r
           where r.portal_id = p_portal_id and r.finished_at is null
             and exists (select 1 from public.jobs j
                          where j.run_id = r.id and j.kind = 'fetch' and j.status in ('pending', 'running'))
           order by r.id
             for update) r;
  update public.jobs j
     set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
         waiting_reason = null, last_error = v_message
   where j.run_id = any (v_runs) and j.kind = 'fetch' and j.status in ('pending', 'running');
  get diagnostics v_failed = row_count;
  foreach v_run in array v_runs loop
    perform private.settle_run(v_run);
  end loop;
  return v_failed;
end;
$$;

-- The HubSpot portal id of the owner's portal whose stored access token has one of
-- these lookup hashes (shared/token-crypto.ts tokenLookupHashes), or null.
create function public.hubspot_portal_for_token_hash(p_owner_id uuid, p_hashes text[]) returns bigint
language sql
stable
security definer
set search_path = ''
as $$
  select p.hubspot_portal_id
    from private.portal_credentials c
    join public.portals p on p.id = c.portal_id
   where p.owner_id = p_owner_id and c.access_token_hash = any (p_hashes)
   limit 1
$$;

-- Rows the rotation step must seal again: under another key than the current
-- one, or still in plaintext (legacy). A row that could not be opened (its key
-- is gone) is offered again only after p_retry_after_seconds, so it neither
-- blocks the others nor is retried by every worker invocation.
create function public.credentials_to_rotate(p_current_key_id text, p_limit integer default 20, p_retry_after_seconds integer default 3600)
returns table (
  portal_id uuid, hubspot_portal_id bigint, auth_kind text, key_id text, access_token_enc text,
  refresh_token_enc text, access_token_legacy text, token_version bigint
)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_current_key_id is null or p_limit is null or p_limit not between 1 and 500
     or p_retry_after_seconds is null or p_retry_after_seconds < 0 then
    raise exception 'credentials_to_rotate: a current key id, a limit of 1-500 and a non-negative retry delay are required'
      using errcode = '22023';
  end if;
  return query
  select c.portal_id, p.hubspot_portal_id, c.auth_kind, c.key_id, c.access_token_enc, c.refresh_token_enc,
         c.access_token, c.token_version
    from private.portal_credentials c
    join public.portals p on p.id = c.portal_id
   where (c.key_id is distinct from p_current_key_id or c.access_token is not null)
     and (c.rotation_attempted_at is null or c.rotation_attempted_at <= now() - make_interval(secs => p_retry_after_seconds))
   order by c.rotation_attempted_at nulls first, c.portal_id
   limit p_limit;
end;
$$;

-- Stores one batch of re-sealed credentials: p_rows is a JSON array of
-- {portal_id, token_version, from_key_id, key_id, access_token_enc, refresh_token_enc, access_token_hash}
-- (a row that could not be opened: {portal_id, failed: true}, moved to the back of the queue).
-- A row changes only if it still has the version and key it was read with (a
-- refresh in between wins; it sealed with the current key anyway). The token
-- version does not change: it is the same token. Returns how many rows were re-sealed.
create function public.rotate_credentials(p_rows jsonb) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_count integer;
begin
  if p_rows is null or jsonb_typeof(p_rows) <> 'array' or jsonb_array_length(p_rows) > 500 then
    raise exception 'rotate_credentials: a JSON array of at most 500 rows is required' using errcode = '22023';
  end if;
  update private.portal_credentials c
     set rotation_attempted_at = now()
    from jsonb_to_recordset(p_rows) as r(portal_id uuid, failed boolean)
   where c.portal_id = r.portal_id and coalesce(r.failed, false);
  update private.portal_credentials c
     set access_token = null, key_id = r.key_id, access_token_enc = r.access_token_enc,
         refresh_token_enc = r.refresh_token_enc, access_token_hash = r.access_token_hash,
         rotation_attempted_at = null, updated_at = now()
    from jsonb_to_recordset(p_rows) as r(portal_id uuid, token_version bigint, from_key_id text, key_id text,
                                          access_token_enc text, refresh_token_enc text, access_token_hash text, failed boolean)
   where not coalesce(r.failed, false) and c.portal_id = r.portal_id and c.token_version = r.token_version
     and c.key_id is not distinct from r.from_key_id and r.key_id is not null and r.access_token_enc is not null;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

revoke all on function public.connect_portal_with_tokens(uuid, bigint, text, text, text, text, text, integer, integer, text, text[]),
  public.claim_portal_token(uuid, text, bigint, integer, integer),
  public.complete_token_refresh(uuid, text, text, text, text, integer, integer, text),
  public.abandon_token_refresh(uuid, text),
  public.disconnect_portal(uuid, text),
  public.hubspot_portal_for_token_hash(uuid, text[]),
  public.credentials_to_rotate(text, integer, integer),
  public.rotate_credentials(jsonb)
  from public, anon, authenticated;
grant execute on function public.connect_portal_with_tokens(uuid, bigint, text, text, text, text, text, integer, integer, text, text[]),
  public.claim_portal_token(uuid, text, bigint, integer, integer),
  public.complete_token_refresh(uuid, text, text, text, text, integer, integer, text),
  public.abandon_token_refresh(uuid, text),
  public.disconnect_portal(uuid, text),
  public.hubspot_portal_for_token_hash(uuid, text[]),
  public.credentials_to_rotate(text, integer, integer),
  public.rotate_credentials(jsonb)
  to service_role;
revoke all on function private.refresh_margin_seconds(integer, integer) from public, anon, authenticated;
