-- public.stored_hubdb_rows(portal, tables): the portal's live HubDB rows
-- stored, per table: (table_id, live_rows), one row per table that has any;
-- with `tables`, one row per table listed (0 for none). A sweep cycle's rows
-- job starts with them in its checkpoint (incremental_checkpoint: compared
-- with HubSpot's rowCount, a table holding fewer has lost rows: swept; a
-- stored table no longer live is swept too); its sweep pass counts again the
-- tables its changed pass wrote (decision 0056). Walks
-- hubspot_content_hubdb_table_idx table by table (a skip scan: the portal's
-- other rows are never read). The service role only (the worker).
create function public.stored_hubdb_rows(p_portal_id uuid, p_tables text[] default null)
returns table (table_id text, live_rows integer)
language sql
stable
set search_path = ''
as $$
  with recursive t(id) as (
    select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
     where p_tables is null
       and c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
    union all
    select (select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
             where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
               and split_part(c.hubspot_id, ':', 1) > t.id)
      from t where t.id is not null
  )
  select l.id, (select count(*)::integer from public.hubspot_content c
                 where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
                   and split_part(c.hubspot_id, ':', 1) = l.id)
    from (select t.id from t where t.id is not null
          union all
          select distinct u.id from unnest(p_tables) u(id) where u.id is not null) l
$$;
