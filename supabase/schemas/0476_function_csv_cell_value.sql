-- private.csv_cell_value(json_type, cell): an edited CSV cell read back as
-- the JSON value of an editable field's type, the inverse of
-- private.csv_cells: a `string` cell as it is (an empty unquoted cell, SQL
-- NULL, is JSON null), less the apostrophe our export put before a leading
-- = + - @ tab or CR; `integer` and `number` as numbers, `boolean` as true or
-- false (any case), `array_of_integers` and `object` as JSON text. SQL NULL
-- when the cell is not a value of the type (import_csv_edits: `wrong_type`).
-- Immutable, no exceptions raised or caught; owner only.
create function private.csv_cell_value(p_json_type text, p_cell text) returns jsonb
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v jsonb;
begin
  if p_json_type = 'string' then
    if p_cell is null then
      return 'null'::jsonb;
    end if;
    return to_jsonb(case when p_cell ~ e'^''[=+\\-@\\t\\r]' then substr(p_cell, 2) else p_cell end);
  end if;
  if p_cell is null then
    return null;
  end if;
  if p_json_type = 'integer' then
    return case when p_cell ~ '^\s*-?[0-9]{1,18}\s*$' then to_jsonb(btrim(p_cell)::bigint) end;
  elsif p_json_type = 'number' then
    return case when p_cell ~ '^\s*-?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][-+]?[0-9]{1,3})?\s*$'
                then to_jsonb(btrim(p_cell)::numeric) end;
  elsif p_json_type = 'boolean' then
    return case lower(btrim(p_cell)) when 'true' then 'true'::jsonb when 'false' then 'false'::jsonb end;
  elsif p_json_type in ('array_of_integers', 'object') then
    if not pg_input_is_valid(p_cell, 'jsonb') then
      return null;
    end if;
    v := p_cell::jsonb;
    if p_json_type = 'object' then
      return case when jsonb_typeof(v) = 'object' then v end;
    end if;
    return case when jsonb_typeof(v) = 'array' and not jsonb_path_exists(v, '$[*] ? (@.type() != "number" || @.floor() != @)')
                then v end;
  end if;
  return null;
end;
$$;
