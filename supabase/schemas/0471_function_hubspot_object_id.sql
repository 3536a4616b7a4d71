-- private.hubspot_object_id(type, hubspot_id): the id HubSpot's own answers
-- and audit log use for a stored item: a HubDB row's row id (stored as
-- `<tableId>:<rowId>`), any other item's id as stored. Immutable; for the
-- publish functions; owner only.
create function private.hubspot_object_id(p_content_type text, p_hubspot_id text) returns text
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return case when p_content_type = 'hubdb_rows' then split_part(p_hubspot_id, ':', 2) else p_hubspot_id end;
end;
$$;
