-- public.complete_token_refresh(...): the refresh lease holder stores its new
-- sealed tokens (lifetime counted from when the refresh lease was taken) and releases
-- the refresh lease; returns the new token version, null when it no longer held the
-- refresh lease. Locks the credentials row. For the service role only.
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
         refresh_holder = null, refresh_lease_expires_at = null, updated_at = now()
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder and c.auth_kind = 'oauth'
  returning c.token_version into v_version;
  return v_version;
end;
$$;
