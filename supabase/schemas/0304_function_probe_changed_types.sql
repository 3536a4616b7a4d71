-- private.probe_changed_types(caller, portal, checkpoint, answers, tables_pages):
-- a probe's decision (docs/decisions/0046), the same for a probe job
-- (complete_probe_job) and a schedule probe (report_schedule_probe, 0058):
-- which of the checkpoint's types changed, by what HubSpot answered. A CMS
-- type changed when HubSpot counts any item changed after its mark or
-- archived after its archive mark (answers: {type: {changed, archived}}, the
-- totals of two limit=1 listings; a type asked for its overlap window, near
-- its last change: {window, archived}, window the page HubSpot sent, changed
-- when it is not one whole page of items stored live as they are (same data,
-- hence same update time), the answer its incremental fetch would give);
-- HubDB tables when the tables list (its summary in the answers:
-- {hubdb_tables: {tables: [{id, updatedAt, rowCount}]}}, one entry per table
-- of its pages; tables_pages: every page, required when HubDB is probed, kept
-- for a run's HubDB jobs) is not the tables stored live, table for table with
-- the same update time; HubDB rows when a table was updated after their mark
-- (near their last change, after their window: {windows: {tableId: page}},
-- the first page of each such table's rows updated after windowAfter, changed
-- as a CMS window is; decision 0055), or, on a sweep cycle, a table holds
-- fewer rows than are stored live or a table with stored rows is gone. A
-- type with no mark counts as changed (changed_types null: none). stored_rows: a sweep cycle's live
-- HubDB rows stored per table, counted once for the decision and the rows
-- job (decision 0056). Bad answers raise 22023, named after the caller.
-- Reads only; owner only.
create function private.probe_changed_types(p_caller text, p_portal_id uuid, p_checkpoint jsonb, p_answers jsonb,
                                            p_tables_pages text[], out changed_types text[], out stored_rows jsonb)
language plpgsql
stable
set search_path = ''
as $$
declare
  v_types text[];
  v_tables jsonb;
  v_windows jsonb; -- {type: page}: the overlap windows, parsed once
  v_row_windows jsonb; -- {tableId: page}: HubDB rows' windows near their last change, parsed once
  v_rows_after timestamptz; -- HubDB rows' windowAfter
  v_sweep boolean;
begin
  if p_answers is null or jsonb_typeof(p_answers) <> 'object' then
    raise exception '%: answers must be an object of {changed, archived} totals per CMS type', p_caller using errcode = '22023';
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(p_checkpoint -> 'types') k;
  if exists (select 1 from unnest(v_types) t
              where t not in ('hubdb_tables', 'hubdb_rows')
                and (coalesce(jsonb_typeof(p_answers #> array[t, 'archived']), '') <> 'number'
                     or case when p_checkpoint #> array['types', t, 'windowAfter'] is null
                             then coalesce(jsonb_typeof(p_answers #> array[t, 'changed']), '') <> 'number'
                             else coalesce(jsonb_typeof(p_answers #> array[t, 'window']), '') <> 'string' end)) then
    raise exception '%: every CMS type probed needs its {changed, archived} totals ({window, archived} near its last change)', p_caller using errcode = '22023';
  end if;
  -- (An expression first: most cycles have no window, and a query costs a quiet cycle more than its work.)
  if jsonb_path_exists(p_answers, '$.*.window') then
    select jsonb_object_agg(t, (p_answers #>> array[t, 'window'])::jsonb) into v_windows
      from unnest(v_types) t where jsonb_typeof(p_answers #> array[t, 'window']) = 'string';
    if exists (select 1 from jsonb_each(coalesce(v_windows, '{}')) w(type, page) where not private.is_listing_page(w.page)) then
      raise exception '%: a window must be a listing page: {total, results: [{id, ...}]}', p_caller using errcode = '22023';
    end if;
  end if;
  v_sweep := coalesce((p_checkpoint #>> '{types,hubdb_rows,sweep}')::boolean, false);
  if v_sweep then -- (set only under types.hubdb_rows: HubDB rows are probed)
    select coalesce(jsonb_object_agg(s.table_id, s.live_rows), '{}'::jsonb) into stored_rows
      from public.stored_hubdb_rows(p_portal_id) s;
  end if;
  v_rows_after := (p_checkpoint #>> '{types,hubdb_rows,windowAfter}')::timestamptz;
  if v_rows_after is not null then
    if jsonb_typeof(p_answers #> '{hubdb_rows,windows}') is distinct from 'object'
       or exists (select 1 from jsonb_each(p_answers #> '{hubdb_rows,windows}') w where jsonb_typeof(w.value) <> 'string') then
      raise exception '%: HubDB rows near their last change need {windows: {tableId: page}}', p_caller using errcode = '22023';
    end if;
    select jsonb_object_agg(w.key, w.value::jsonb) into v_row_windows from jsonb_each_text(p_answers #> '{hubdb_rows,windows}') w;
    if exists (select 1 from jsonb_each(coalesce(v_row_windows, '{}')) w(table_id, page) where not private.is_listing_page(w.page)) then
      raise exception '%: a window must be a listing page: {total, results: [{id, ...}]}', p_caller using errcode = '22023';
    end if;
  end if;

  if v_types && array['hubdb_tables', 'hubdb_rows'] then
    if p_tables_pages is null or cardinality(p_tables_pages) = 0 or array_position(p_tables_pages, null) is not null then
      raise exception '%: a probe of HubDB needs every page of the tables list', p_caller using errcode = '22023';
    end if;
    -- The decision reads the tables' summary, never the pages (a table with its columns is ~2 KB of JSON:
    -- parsing them cost a quiet cycle more than the rest of its decision; decision 0062).
    v_tables := p_answers #> '{hubdb_tables,tables}';
    if jsonb_typeof(v_tables) is distinct from 'array' then
      raise exception '%: a probe of HubDB needs the tables list''s summary: {hubdb_tables: {tables: [{id, updatedAt, rowCount}]}}', p_caller using errcode = '22023';
    end if;
  end if;

  select array_agg(t.content_type order by t.content_type) into changed_types
    from unnest(v_types) t(content_type)
    left join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
   where m.high_water is null
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and ((p_answers #>> array[t.content_type, 'changed'])::numeric > 0
               or (p_answers #>> array[t.content_type, 'archived'])::numeric > 0))
      -- The overlap window: more than its page holds, or an item not stored live as it is (new, updated, late).
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and exists (select 1 from (select v_windows -> t.content_type as page) w
                       where (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                          or exists (select 1 from jsonb_array_elements(w.page -> 'results') e
                                      -- The stored item as HubSpot lists it (its update time is part of it), found by
                                      -- id: a scalar subquery, never an anti join that reads the whole type (decision 0051).
                                      where (select c.data from public.hubspot_content c
                                              where c.portal_id = p_portal_id and c.content_type = t.content_type
                                                and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from e)))
      -- The tables list is whole: changed when a table is not stored live with its update time (HubSpot moves
      -- it at every publish; the stored one is a column, so no table's data is read), or the stored hold more.
      or (t.content_type = 'hubdb_tables'
          and (exists (select 1 from jsonb_array_elements(v_tables) e
                        where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                           or (select c.hubspot_updated_at from public.hubspot_content c
                                where c.portal_id = p_portal_id and c.content_type = 'hubdb_tables'
                                  and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from (e ->> 'updatedAt')::timestamptz)
               or jsonb_array_length(v_tables) <> (select count(*) from public.hubspot_content c
                                                    where c.portal_id = p_portal_id and c.content_type = 'hubdb_tables'
                                                      and c.deleted_at is null)))
      or (t.content_type = 'hubdb_rows' and v_rows_after is null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                       where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                          or (e ->> 'updatedAt')::timestamptz > m.high_water))
      -- Near their last change: each table updated after the window, by its window's page (as a CMS window;
      -- a row is stored as listed with its table's id merged in). No window for such a table: changed.
      or (t.content_type = 'hubdb_rows' and v_rows_after is not null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                        cross join lateral (select v_row_windows -> (e ->> 'id') as page) w
                       where (jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                              or (e ->> 'updatedAt')::timestamptz > v_rows_after)
                         and (w.page is null
                              or (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                              or exists (select 1 from jsonb_array_elements(w.page -> 'results') r
                                          where (select c.data from public.hubspot_content c
                                                  where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows'
                                                    and c.hubspot_id = (e ->> 'id') || ':' || (r ->> 'id') and c.deleted_at is null)
                                                is distinct from r || jsonb_build_object('tableId', e ->> 'id')))))
      or (t.content_type = 'hubdb_rows' and v_sweep
          and exists (select 1 from jsonb_each_text(stored_rows) s(table_id, live_rows)
                        left join jsonb_array_elements(v_tables) e on e ->> 'id' = s.table_id
                       where e is null or coalesce((e ->> 'rowCount')::numeric, 0) < s.live_rows::numeric));
end;
$$;
