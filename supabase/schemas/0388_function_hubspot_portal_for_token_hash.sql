-- public.hubspot_portal_for_token_hash(owner, hashes): the HubSpot portal id of
-- the owner's portal whose stored token has one of these lookup hashes, or
-- null. Reads only, no locks. For the service role only (the orchestrator).
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
