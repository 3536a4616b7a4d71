-- private.export_fields(checkpoint): the exported fields pinned in an export
-- job's checkpoint (`columns`), checked (1-200 names of 1-200 characters).
-- Immutable; called by export_header and export_rows; owner only.
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
