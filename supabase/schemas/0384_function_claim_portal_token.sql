-- public.claim_portal_token(portal, holder, used_version, ...): what a caller
-- needs for HubSpot requests and what to do: 'use' the token, 'refresh' (the
-- caller now holds the refresh lease), 'wait' wait_ms, or 'disconnected'; no
-- row for an unknown portal. Times in ms from now. Locks the credentials row
-- FOR UPDATE, then reads the portal, unless the token is used as it is. The service role only. docs/decisions/0007.
create function public.claim_portal_token(
  p_portal_id uuid, p_holder text, p_used_version bigint default null,
  p_lease_seconds integer default 30, p_min_valid_seconds integer default 5
) returns table (
  decision text, hubspot_portal_id bigint, owner_id uuid, auth_kind text, access_token_enc text, access_token_legacy text,
  refresh_token_enc text, token_version bigint, refresh_in_ms bigint, expires_in_ms bigint,
  disconnected_reason text, disconnected_message text, wait_ms integer
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
    raise exception 'claim_portal_token: a refresh lease of 1-600 s and a non-negative minimum validity are required' using errcode = '22023';
  end if;
  -- A token to use as it is (a private app's, an OAuth one not due for refresh) is read without a lock:
  -- the common call writes nothing.
  select * into v_cred from private.portal_credentials c where c.portal_id = p_portal_id;
  if not found then
    return;
  end if;
  if p_used_version is not null or (v_cred.auth_kind = 'oauth' and not coalesce(v_now < v_cred.refresh_after, false)) then
    -- The credentials row's lock first, then the portal read in a statement after it: a
    -- disconnect_portal that committed while this call waited for the lock is seen.
    select * into v_cred from private.portal_credentials c where c.portal_id = p_portal_id for update;
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
  elsif v_cred.refresh_holder is null or v_cred.refresh_holder = p_holder or v_cred.refresh_lease_expires_at <= v_now then
    update private.portal_credentials c
       set refresh_holder = p_holder, refresh_lease_expires_at = v_now + make_interval(secs => p_lease_seconds),
           refresh_started_at = v_now
     where c.portal_id = p_portal_id;
    v_decision := 'refresh';
  elsif p_used_version is null and v_cred.access_expires_at > v_now + make_interval(secs => p_min_valid_seconds) then
    v_decision := 'use'; -- being refreshed by another caller, still valid meanwhile
  else
    v_decision := 'wait';
    v_wait := greatest(20, least(250, ceil(extract(epoch from (v_cred.refresh_lease_expires_at - v_now)) * 1000)::integer));
  end if;

  return query select v_decision, v_portal.hubspot_portal_id, v_portal.owner_id, v_cred.auth_kind,
    case when v_decision = 'use' then v_cred.access_token_enc end,
    case when v_decision = 'use' and v_cred.access_token_enc is null then v_cred.access_token end,
    case when v_decision = 'refresh' then v_cred.refresh_token_enc end,
    v_cred.token_version,
    case when v_cred.refresh_after is not null then floor(extract(epoch from (v_cred.refresh_after - v_now)) * 1000)::bigint end,
    case when v_cred.access_expires_at is not null then floor(extract(epoch from (v_cred.access_expires_at - v_now)) * 1000)::bigint end,
    v_portal.disconnected_reason,
    case when v_portal.disconnected_at is not null then private.access_removed_message(v_portal.disconnected_reason) end,
    v_wait;
end;
$$;
