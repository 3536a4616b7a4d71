-- private.csv_cells(lead, data, fields): one exported item as CSV cell texts
-- (strings as they are, other JSON as JSON text, missing as NULL; a formula-like
-- string gets a leading apostrophe). Immutable; called by export_rows; owner
-- only. docs/decisions/0006-exports-in-sql.md.
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
