-- public.abandon_token_refresh(portal, holder): the holder gives its refresh
-- lease back without a new token; false when not held. Locks the credentials
-- row. For the service role only.
create function public.abandon_token_refresh(p_portal_id uuid, p_holder text) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  update private.portal_credentials c
     set refresh_holder = null, refresh_lease_expires_at = null
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder;
  return found;
end;
$$;
