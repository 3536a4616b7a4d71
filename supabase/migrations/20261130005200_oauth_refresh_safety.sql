-- OAuth refresh safety (review of 20261130005000):
--
-- * disconnect_portal takes the refresh holder that saw its refresh token
--   refused (p_holder). It acts only if that caller still holds the portal's
--   refresh lease: a reconnect (connect_portal_with_tokens clears the lease and
--   stores new tokens) or a lease taken over by another caller (a newer refresh
--   token may be stored by now) makes it change nothing and answer null, and the
--   caller asks claim_portal_token again. Without p_holder (an owner's own
--   "disconnect") it acts as before.
-- * The message every job of a disconnected portal ends with has one source,
--   private.access_removed_message; claim_portal_token answers it with
--   'disconnected', so the functions never build it themselves.
-- * Sealed tokens may be in the second format ("v2.": a key derived with HKDF for
--   AES-GCM, additional data naming the owner and the hub, so a ciphertext copied
--   into another user's row for the same hub does not open). claim_portal_token
--   and credentials_to_rotate answer the owner (needed to open them), and the
--   rotation step offers rows still holding a "v1." ciphertext, which it seals
--   again as "v2.".

create function private.access_removed_message(p_reason text) returns text
language sql
immutable
set search_path = ''
as $$
  select format('HubSpot access was removed: reconnect the portal (%s).', p_reason)
$$;
revoke all on function private.access_removed_message(text) from public, anon, authenticated;

alter table private.portal_credentials
  drop constraint portal_credentials_sealed_form,
  add constraint portal_credentials_sealed_form check (
    (access_token_enc like 'v1.%' or access_token_enc like 'v2.%') and char_length(access_token_enc) <= 8192
    and (refresh_token_enc is null
         or ((refresh_token_enc like 'v1.%' or refresh_token_enc like 'v2.%') and char_length(refresh_token_enc) <= 8192)));

drop function public.disconnect_portal(uuid, text);

-- HubSpot access was removed (the refresh token was refused: app uninstalled).
-- Marks the portal disconnected with the reason, fails its pending and running
-- fetch jobs permanently (no retry; attempts are left as they are; a running
-- job's holder is fenced off at its next write or heartbeat), settles their runs
-- (one notification each, by the unique index). Export jobs only read Postgres
-- and are left alone. Idempotent: a second call fails nothing more.
-- p_holder: the refresh lease holder whose refresh token HubSpot refused. Then
-- the call acts only while that caller still holds the lease; otherwise (the
-- portal was reconnected, or another caller took the lease over and may have
-- stored a newer refresh token) it changes nothing and returns null.
-- Returns how many jobs it failed (null: refused for a stale holder).
create function public.disconnect_portal(p_portal_id uuid, p_reason text, p_holder text default null) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_message text;
  v_runs uuid[];
  v_run uuid;
  v_failed integer;
  v_holder text;
begin
  if p_portal_id is null or p_reason is null or char_length(p_reason) not between 1 and 400 then
    raise exception 'disconnect_portal: a portal and a reason of 1-400 characters are required' using errcode = '22023';
  end if;
  -- Lock order as connect_portal_with_tokens: the portal, then its credentials. The
  -- portal's lock is the one its UPDATE below takes anyway (FOR NO KEY UPDATE, which
  -- does not block the key-share locks of rows that reference the portal).
  perform 1 from public.portals p where p.id = p_portal_id for no key update;
  if not found then
    return 0;
  end if;
  select c.refresh_holder into v_holder from private.portal_credentials c where c.portal_id = p_portal_id for update;
  if p_holder is not null and v_holder is distinct from p_holder then
    return null; -- reconnected or taken over since this holder read its refresh token
  end if;
  update public.portals p
     set disconnected_at = coalesce(p.disconnected_at, now()),
         disconnected_reason = coalesce(p.disconnected_reason, p_reason)
   where p.id = p_portal_id
  returning private.access_removed_message(p.disconnected_reason) into v_message;
  update private.portal_credentials c set refresh_holder = null, refresh_lease_until = null where c.portal_id = p_portal_id;
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

drop function public.claim_portal_token(uuid, text, bigint, integer, integer);

-- As in 20261130005000, plus owner_id (sealed tokens name their owner) and
-- disconnected_message (the message jobs of a disconnected portal end with).
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

drop function public.credentials_to_rotate(text, integer, integer);

-- As in 20261130005000, plus owner_id, and rows whose tokens are still sealed in
-- the first format ("v1.", even under the current key).
create function public.credentials_to_rotate(p_current_key_id text, p_limit integer default 20, p_retry_after_seconds integer default 3600)
returns table (
  portal_id uuid, hubspot_portal_id bigint, owner_id uuid, auth_kind text, key_id text, access_token_enc text,
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
  select c.portal_id, p.hubspot_portal_id, p.owner_id, c.auth_kind, c.key_id, c.access_token_enc, c.refresh_token_enc,
         c.access_token, c.token_version
    from private.portal_credentials c
    join public.portals p on p.id = c.portal_id
   where (c.key_id is distinct from p_current_key_id or c.access_token is not null
          or c.access_token_enc like 'v1.%' or c.refresh_token_enc like 'v1.%')
     and (c.rotation_attempted_at is null or c.rotation_attempted_at <= now() - make_interval(secs => p_retry_after_seconds))
   order by c.rotation_attempted_at nulls first, c.portal_id
   limit p_limit;
end;
$$;

revoke all on function public.disconnect_portal(uuid, text, text),
  public.claim_portal_token(uuid, text, bigint, integer, integer),
  public.credentials_to_rotate(text, integer, integer)
  from public, anon, authenticated;
grant execute on function public.disconnect_portal(uuid, text, text),
  public.claim_portal_token(uuid, text, bigint, integer, integer),
  public.credentials_to_rotate(text, integer, integer)
  to service_role;
