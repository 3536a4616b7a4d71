-- Exports are formatted by Postgres: the worker streams
--   copy (select ... from public.export_rows(<job>, <token>, <after_id>, <through_id>) ...) to stdout with (format csv)
-- straight to the export sink without decoding it. COPY takes no bind
-- parameters, so the worker inlines only integers it has checked; everything
-- else (portal, content type, the exported fields) comes from the job row.
--
-- The exported fields are pinned in the job's checkpoint (`columns`) when the
-- export begins, so every invocation of a resumed export writes the same
-- columns under the same header; the list itself lives in the worker's code.

-- One item as CSV cell texts: the leading texts (our own columns), then each
-- field of p_data in order. Strings as they are, other JSON values (numbers,
-- booleans, objects, arrays) as JSON text, missing fields and JSON null as
-- NULL (an empty cell). A string that a spreadsheet would execute as a formula
-- (starting with = + - @ tab or CR) gets a leading apostrophe. p_data is
-- decompressed once per call, not once per field.
create function private.csv_cells(p_lead text[], p_data jsonb, p_fields text[])
returns text[]
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v_data jsonb := p_data || '{}'::jsonb;
  v_cells text[] := array_fill(null::text, array[coalesce(cardinality(p_lead), 0) + coalesce(cardinality(p_fields), 0)]);
  v_lead integer := coalesce(cardinality(p_lead), 0);
  v_value jsonb;
  v_text text;
  i integer;
begin
  for i in 1 .. v_lead loop
    v_text := p_lead[i];
    if left(v_text, 1) in ('=', '+', '-', '@', e'\t', e'\r') then
      v_text := '''' || v_text;
    end if;
    v_cells[i] := v_text;
  end loop;
  for i in 1 .. coalesce(cardinality(p_fields), 0) loop
    v_value := v_data -> p_fields[i];
    v_text := v_value #>> '{}';
    if left(v_text, 1) in ('=', '+', '-', '@', e'\t', e'\r') and jsonb_typeof(v_value) = 'string' then
      v_text := '''' || v_text;
    end if;
    v_cells[v_lead + i] := v_text;
  end loop;
  return v_cells;
end;
$$;
comment on function private.csv_cells(text[], jsonb, text[]) is
  'CSV cell texts of one exported item, formula-neutralised; COPY ... (format csv) does the quoting.';

-- The exported fields pinned in an export job's checkpoint, checked.
create function private.export_fields(p_checkpoint jsonb)
returns text[]
language plpgsql
immutable
set search_path = ''
as $$
declare
  v_columns jsonb := p_checkpoint -> 'columns';
  v_fields text[];
begin
  if jsonb_typeof(v_columns) is distinct from 'array' or jsonb_array_length(v_columns) not between 1 and 200
     or exists (select 1 from jsonb_array_elements(v_columns) c
                 where jsonb_typeof(c) <> 'string' or char_length(c #>> '{}') not between 1 and 200) then
    raise exception 'the export job''s checkpoint has no valid columns (1 to 200 field names)' using errcode = '22023';
  end if;
  select array_agg(c order by n) into v_fields from jsonb_array_elements_text(v_columns) with ordinality as e(c, n);
  return v_fields;
end;
$$;

-- The next page of an export for the holder of the job: the id of its last
-- live item and how many items it has (up to p_limit) after p_after_id, in id
-- order. held = false (and nothing else) when the caller is not the holder
-- (lease lost, reclaimed, stopped). An empty page (last_id null) is the end.
create function public.export_page(p_job_id bigint, p_token bigint, p_after_id bigint, p_limit integer)
returns table (held boolean, last_id bigint, row_count integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  if p_job_id is null or p_token is null or p_after_id is null or p_limit is null then
    raise exception 'job id, token, position and limit are required' using errcode = '22004';
  end if;
  if p_after_id < 0 or p_limit not between 1 and 100000 then
    raise exception 'position must be >= 0 and limit between 1 and 100000' using errcode = '22023';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    return query select false, null::bigint, 0;
    return;
  end if;
  return query
    select true, max(p.id), count(*)::integer
      from (select c.id from public.hubspot_content c
             where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
               and c.deleted_at is null and c.id > p_after_id
             order by c.id
             limit p_limit) p;
end;
$$;

-- The header record of the holder's export: hubspot_id, hubspot_updated_at,
-- then the fields pinned in the job's checkpoint. Raises 55000 for anyone else.
create function public.export_header(p_job_id bigint, p_token bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  return next array['hubspot_id', 'hubspot_updated_at'] || private.export_fields(v_job.checkpoint);
end;
$$;

-- The CSV cells of the live items with p_after_id < id <= p_through_id, in id
-- order, for the holder of the export job only: hubspot_id,
-- hubspot_updated_at (ISO 8601 UTC, milliseconds), then the fields pinned in
-- the job's checkpoint. Raises 55000 when the caller is not the holder (a set
-- returning function cannot answer "fenced" with a value, and an empty result
-- would read as "no rows").
create function public.export_rows(p_job_id bigint, p_token bigint, p_after_id bigint, p_through_id bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_fields text[];
begin
  if p_job_id is null or p_token is null or p_after_id is null or p_through_id is null then
    raise exception 'job id, token and positions are required' using errcode = '22004';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  v_fields := private.export_fields(v_job.checkpoint);
  return query
    select private.csv_cells(
             array[c.hubspot_id, to_char(c.hubspot_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')],
             c.data, v_fields)
      from public.hubspot_content c
     where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
       and c.deleted_at is null and c.id > p_after_id and c.id <= p_through_id
     order by c.id;
end;
$$;

revoke all on function private.csv_cells(text[], jsonb, text[]) from public, anon, authenticated;
revoke all on function private.export_fields(jsonb) from public, anon, authenticated;
revoke all on function public.export_page(bigint, bigint, bigint, integer) from public, anon, authenticated;
revoke all on function public.export_header(bigint, bigint) from public, anon, authenticated;
revoke all on function public.export_rows(bigint, bigint, bigint, bigint) from public, anon, authenticated;
grant execute on function public.export_page(bigint, bigint, bigint, integer) to service_role;
grant execute on function public.export_header(bigint, bigint) to service_role;
grant execute on function public.export_rows(bigint, bigint, bigint, bigint) to service_role;
