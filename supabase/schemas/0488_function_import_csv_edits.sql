-- public.import_csv_edits(portal, user, type, columns, rows): an edited
-- export CSV of one content type, parsed by the caller into its header
-- (`p_columns`) and rows (`p_rows`: a JSON array of rows, each an array of
-- cells in header order, a string or null: null is an empty unquoted cell, ''
-- a quoted empty one), made into pending edits (source csv) all or nothing.
-- The header holds hubspot_id, hubspot_updated_at and otherwise only the
-- type's export columns (private.export_columns). Each row's item must be
-- live in the copy, its hubspot_updated_at the copy's (else `stale`: it
-- changed since the export); each other cell is compared with the item's own
-- export cell (private.csv_cells, formula neutralising included): equal is
-- not an edit, nor is a cell whose value equals the stored one (TRUE for
-- true); a differing read-only cell is `read_only`; a differing editable cell
-- is read back as its type (private.csv_cell_value: our export's leading
-- apostrophe removed), `wrong_type` when it is not one, and a HubDB row's
-- values keep only the changed columns. Any error: nothing is stored and
-- `errors` lists them all (at most 1,000, then one `too_many_errors`), each
-- {row (1-based data row; null for the header), column, code, message} with
-- code unknown_column, duplicate_column, missing_column, row_shape,
-- not_in_copy, duplicate_row, stale, read_only or wrong_type. No error: one
-- pending edit per row with changes (base = the row's hubspot_updated_at),
-- replacing the item's pending edit; `edits` is how many. Raises, with
-- nothing changed: a portal not the user's (P0002), a type without editable
-- fields, rows not a JSON array (22023), more rows than
-- private.publish_settings.max_edits_per_plan (54000). The service role only
-- (the orchestrator, for the signed-in user). docs/publish.md.
create function public.import_csv_edits(
  p_portal_id uuid, p_user uuid, p_content_type text, p_columns text[], p_rows jsonb
) returns table (edits integer, errors jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_settings private.publish_settings;
  v_ncols integer := coalesce(cardinality(p_columns), 0);
  v_id_pos integer;
  v_upd_pos integer;
  v_data_cols text[];
  v_data_pos integer[];
  v_errors jsonb;
  v_error_count integer;
  v_edits jsonb;
  v_count integer;
  v_max_errors constant integer := 1000;
begin
  if p_portal_id is null or p_user is null or p_content_type is null or p_columns is null or p_rows is null then
    raise exception 'import_csv_edits: portal, user, content type, columns and rows are required' using errcode = '22004';
  end if;
  select p.owner_id into v_owner from public.portals p where p.id = p_portal_id and p.owner_id = p_user;
  if not found then
    raise exception 'import_csv_edits: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  if not exists (select 1 from private.editable_fields f where f.content_type = p_content_type) then
    raise exception 'import_csv_edits: % items are not editable', p_content_type using errcode = '22023';
  end if;
  if jsonb_typeof(p_rows) <> 'array' then
    raise exception 'import_csv_edits: rows must be a JSON array of rows' using errcode = '22023';
  end if;
  select * into v_settings from private.publish_settings s where s.id;
  if jsonb_array_length(p_rows) > v_settings.max_edits_per_plan then
    raise exception 'import_csv_edits: % rows, more than one plan takes (%)', jsonb_array_length(p_rows), v_settings.max_edits_per_plan
      using errcode = '54000', hint = 'too_many';
  end if;
  if v_ncols not between 1 and 202 then
    raise exception 'import_csv_edits: the header must have 1 to 202 columns' using errcode = '22023';
  end if;

  -- The header.
  select coalesce(jsonb_agg(jsonb_build_object('row', null, 'column', h.name, 'code', h.code, 'message', h.message)
                            order by h.ord), '[]'::jsonb)
    into v_errors
    from (select c.ord, c.name, 'unknown_column' as code,
                 format('%s is not a column of the %s export', coalesce(c.name, 'an empty header cell'), p_content_type) as message
            from unnest(p_columns) with ordinality c(name, ord)
           where c.name is null
              or (c.name not in ('hubspot_id', 'hubspot_updated_at')
                  and not exists (select 1 from private.export_columns x
                                   where x.content_type = p_content_type and x.column_name = c.name))
          union all
          select max(c.ord), c.name, 'duplicate_column', format('%s is in the header more than once', c.name)
            from unnest(p_columns) with ordinality c(name, ord)
           where c.name is not null
           group by c.name having count(*) > 1
          union all
          select 0, r.name, 'missing_column', format('the header must have a %s column (the export''s own)', r.name)
            from unnest(array['hubspot_id', 'hubspot_updated_at']) r(name)
           where not exists (select 1 from unnest(p_columns) c where c = r.name)) h;
  if jsonb_array_length(v_errors) > 0 then
    return query select 0, v_errors;
    return;
  end if;

  v_id_pos := array_position(p_columns, 'hubspot_id');
  v_upd_pos := array_position(p_columns, 'hubspot_updated_at');
  select coalesce(array_agg(c.name order by c.ord), '{}'), coalesce(array_agg(c.ord::integer order by c.ord), '{}')
    into v_data_cols, v_data_pos
    from unnest(p_columns) with ordinality c(name, ord)
   where c.name not in ('hubspot_id', 'hubspot_updated_at');

  -- The rows: each row's own checks, then each of its cells that differs from the copy's.
  with r as (
    select e.ord::integer as row_no, e.cells,
           case when jsonb_typeof(e.cells) = 'array'
                then jsonb_array_length(e.cells) = v_ncols
                     and not jsonb_path_exists(e.cells, '$[*] ? (@.type() != "string" && @.type() != "null")')
                else false end as shaped
      from jsonb_array_elements(p_rows) with ordinality e(cells, ord)
  ), k as (
    select r.row_no, r.cells, r.shaped,
           case when r.shaped then nullif(r.cells ->> (v_id_pos - 1), '') end as hubspot_id,
           case when r.shaped then r.cells ->> (v_upd_pos - 1) end as updated_cell
      from r
  ), d as (
    select k.*, case when k.hubspot_id is null then 1 else row_number() over (partition by k.hubspot_id order by k.row_no) end as nth
      from k
  ), j as (
    select d.row_no, d.cells, d.hubspot_id, c.data, c.hubspot_updated_at as stored_updated,
           case when d.updated_cell ~ '^\d{4}-\d{2}-\d{2}[T ]' and pg_input_is_valid(d.updated_cell, 'timestamptz')
                then d.updated_cell::timestamptz end as base,
           case when not d.shaped then 'row_shape'
                when d.hubspot_id is null then 'not_in_copy'
                when d.nth > 1 then 'duplicate_row'
                when c.id is null or c.deleted_at is not null then 'not_in_copy'
                when d.updated_cell is null or d.updated_cell !~ '^\d{4}-\d{2}-\d{2}[T ]'
                     or not pg_input_is_valid(d.updated_cell, 'timestamptz') then 'wrong_type'
                when d.updated_cell::timestamptz is distinct from c.hubspot_updated_at then 'stale'
           end as row_code,
           d.updated_cell,
           case when jsonb_typeof(d.cells) = 'array' then jsonb_array_length(d.cells) end as width
      from d
      -- One probe of the unique index per row, by its key alone (LIMIT 1, as save_page's lookup; with
      -- `deleted_at is null` the planner may read the type's partial index of live items whole per row).
      left join lateral (
        select s.id, s.data, s.hubspot_updated_at, s.deleted_at from public.hubspot_content s
         where s.portal_id = p_portal_id and s.content_type = p_content_type and s.hubspot_id = d.hubspot_id
         limit 1) c on d.shaped and d.hubspot_id is not null and d.nth = 1
  ), cells as (
    select j.row_no, j.hubspot_id, j.base, x.name, x.i, j.cells ->> (x.pos - 1) as cell, j.stored_cells[x.i] as stored_cell,
           j.data -> x.name as stored_value, f.json_type
      from (select j0.*, private.csv_cells('{}'::text[], j0.data, v_data_cols) as stored_cells from j j0 where j0.row_code is null) j
     cross join unnest(v_data_cols, v_data_pos) with ordinality x(name, pos, i)
      left join private.editable_fields f on f.content_type = p_content_type and f.field = x.name
     where (j.cells ->> (x.pos - 1)) is distinct from j.stored_cells[x.i]
  ), valued as (
    select c.*, case when c.json_type is not null then private.csv_cell_value(c.json_type, c.cell) end as value
      from cells c
  ), changes as (
    select v.row_no, v.hubspot_id, v.base, v.name,
           case when v.json_type = 'object'
                then (select jsonb_object_agg(e.key, e.value) from jsonb_each(v.value) e
                       where e.value is distinct from coalesce(v.stored_value -> e.key, 'null'::jsonb))
                when v.value = coalesce(v.stored_value, 'null'::jsonb) then null
                else v.value end as patch_value
      from valued v
     where v.json_type is not null and v.value is not null
  ), errs as (
    select j.row_no, 0 as i,
           case when j.row_code in ('not_in_copy', 'duplicate_row') then 'hubspot_id'
                when j.row_code in ('wrong_type', 'stale') then 'hubspot_updated_at' end as col,
           j.row_code as code,
           case j.row_code
             when 'row_shape' then case when j.width is null then 'a row must be a list of cells'
                                        when j.width <> v_ncols then format('the row has %s cells; the header has %s', j.width, v_ncols)
                                        else 'every cell must be text or empty' end
             when 'not_in_copy' then case when j.hubspot_id is null then 'the row has no hubspot_id'
                                          else format('%s %s is not a live item of this portal''s copy', p_content_type, left(j.hubspot_id, 200)) end
             when 'duplicate_row' then format('%s is on an earlier row too', left(j.hubspot_id, 200))
             when 'wrong_type' then 'hubspot_updated_at must be the exported timestamp'
             else format('the item changed since this file was exported (hubspot_updated_at %s, the copy has %s): export again, or leave this row out',
                         left(j.updated_cell, 40), to_char(j.stored_updated at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end as message
      from j where j.row_code is not null
    union all
    select v.row_no, v.i, v.name,
           case when v.json_type is null then 'read_only' else 'wrong_type' end,
           case when v.json_type is null then format('%s is read-only: leave its cell as exported', v.name)
                else format('%s must be %s', v.name, case v.json_type
                       when 'integer' then 'a whole number'
                       when 'number' then 'a number'
                       when 'boolean' then 'true or false'
                       when 'array_of_integers' then 'a JSON array of whole numbers, as exported'
                       else 'a JSON object, as exported' end) end
      from valued v
     where v.json_type is null or v.value is null
  ), edits as (
    select ch.hubspot_id, ch.base, jsonb_object_agg(ch.name, ch.patch_value) as patch
      from changes ch
     where ch.patch_value is not null
     group by ch.row_no, ch.hubspot_id, ch.base
  )
  select (select coalesce(jsonb_agg(jsonb_build_object('row', e.row_no, 'column', e.col, 'code', e.code, 'message', e.message)
                                    order by e.row_no, e.i), '[]'::jsonb)
            from (select * from errs order by row_no, i limit v_max_errors) e),
         (select count(*)::integer from errs),
         (select coalesce(jsonb_agg(jsonb_build_object('hubspot_id', ed.hubspot_id, 'base', ed.base, 'patch', ed.patch)), '[]'::jsonb)
            from edits ed)
    into v_errors, v_error_count, v_edits;

  if v_error_count > 0 then
    if v_error_count > v_max_errors then
      v_errors := v_errors || jsonb_build_object('row', null, 'column', null, 'code', 'too_many_errors',
                                                 'message', format('%s more errors', v_error_count - v_max_errors));
    end if;
    return query select 0, v_errors;
    return;
  end if;

  delete from public.content_edits e
   using jsonb_to_recordset(v_edits) x(hubspot_id text, base timestamptz, patch jsonb)
   where e.portal_id = p_portal_id and e.content_type = p_content_type and e.hubspot_id = x.hubspot_id and e.status = 'pending';
  insert into public.content_edits (portal_id, owner_id, content_type, hubspot_id, base_updated_at, patch, source, created_by)
  select p_portal_id, v_owner, p_content_type, x.hubspot_id, x.base, x.patch, 'csv', p_user
    from jsonb_to_recordset(v_edits) x(hubspot_id text, base timestamptz, patch jsonb)
   order by x.hubspot_id;
  get diagnostics v_count = row_count;
  return query select v_count, '[]'::jsonb;
end;
$$;
