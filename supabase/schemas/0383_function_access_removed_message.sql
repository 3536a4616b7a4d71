-- private.access_removed_message(reason): the one source of the message jobs of
-- a disconnected portal end with. Immutable; called by disconnect_portal and
-- claim_portal_token; owner only.
create function private.access_removed_message(p_reason text) returns text
language sql
immutable
set search_path = ''
as $$
  select format('HubSpot access was removed: reconnect the portal (%s).', p_reason)
$$;
