-- public.stored_hubdb_rows(portal): the portal's live HubDB rows stored, per
-- table: (table_id, live_rows), one row per table that has any. An
-- incremental rows job compares them with HubSpot's rowCount (a table that
-- holds fewer has lost rows: swept) and sweeps the tables no longer live.
-- Walks hubspot_content_hubdb_table_idx table by table (a skip scan: the
-- portal's other rows are never read). The service role only (the worker).
create function public.stored_hubdb_rows(p_portal_id uuid)
returns table (table_id text, live_rows integer)
language sql
stable
set search_path = ''
as $$
  with recursive t(id) as (
    select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
     where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
    union all
    select (select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
             where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
               and split_part(c.hubspot_id, ':', 1) > t.id)
      from t where t.id is not null
  )
  select t.id, (select count(*)::integer from public.hubspot_content c
                 where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
                   and split_part(c.hubspot_id, ':', 1) = t.id)
    from t where t.id is not null
$$;
