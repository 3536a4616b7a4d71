-- public.connect_portal_with_tokens(...): connects or reconnects a portal with
-- sealed credentials (a private-app token, or an OAuth grant with its lifetime),
-- clears the disconnected state and any refresh lease, bumps the token version;
-- returns the portal id. A null name keeps a reconnected portal's name (a new
-- portal is named "HubSpot portal <hub id>"). Locks the portal, then its credentials (upserts).
-- For the service role only (the orchestrator).
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
  if p_owner_id is null or p_hubspot_portal_id is null or p_auth_kind is null
     or p_key_id is null or p_access_token_enc is null then
    raise exception 'connect_portal_with_tokens: owner, HubSpot portal id, kind, key id and sealed token are required'
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
  values (p_owner_id, p_hubspot_portal_id, coalesce(p_name, 'HubSpot portal ' || p_hubspot_portal_id), p_auth_kind)
  on conflict (owner_id, hubspot_portal_id) do update
     set name = coalesce(p_name, p.name), auth_kind = excluded.auth_kind, disconnected_at = null, disconnected_reason = null
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
         token_version = c.token_version + 1, refresh_holder = null, refresh_lease_expires_at = null,
         refresh_started_at = null, rotation_attempted_at = null, updated_at = now();
  return v_portal_id;
end;
$$;
