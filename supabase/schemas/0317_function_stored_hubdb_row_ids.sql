-- public.stored_hubdb_row_ids(portal, table): the row ids (without the
-- `<tableId>:` prefix) of the table's live HubDB rows stored. A sweep page
-- compares them with every row HubSpot lists in the table and saves the
-- missing ones as tombstones (save_swept_table): the comparison runs in the
-- worker, as Postgres' part of a sweep is then one index-only read per table
-- (decision 0057). plpgsql: called once per swept table, its plan is cached
-- (decision 0052). The service role only (the worker).
create function public.stored_hubdb_row_ids(p_portal_id uuid, p_table_id text)
returns text[]
language plpgsql
stable
set search_path = ''
as $$
begin
  return array(
    select substr(c.hubspot_id, char_length(p_table_id) + 2)
      from public.hubspot_content c
     where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
       and split_part(c.hubspot_id, ':', 1) = p_table_id);
end;
$$;
