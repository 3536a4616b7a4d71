-- public.rotate_credentials(rows): stores one batch of re-sealed credentials; a
-- row changes only if it still has the version and key it was read with (a
-- refresh in between wins). Returns how many were re-sealed. Locks the rows it
-- updates. For the service role only (the worker).
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
