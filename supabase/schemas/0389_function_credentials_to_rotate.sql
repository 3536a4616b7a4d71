-- public.credentials_to_rotate(key, limit, retry_after): credentials the
-- rotation step must seal again (another key, plaintext, or the "v1." format);
-- a row that could not be opened comes back only after retry_after seconds.
-- Reads only, no locks. For the service role only (the worker).
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
