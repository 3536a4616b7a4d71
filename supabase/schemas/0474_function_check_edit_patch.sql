-- private.check_edit_patch(type, patch): refuses (22023, naming the field) a
-- patch that is not a non-empty JSON object (at most 256 KiB) whose keys are
-- editable fields of the type (private.editable_fields) with values of their
-- JSON type: `string` a string or null, `integer` a whole number, `number` a
-- number, `boolean`, `array_of_integers` an array of whole numbers, `object`
-- a non-empty object (a HubDB row's values, sparse by column key). A type
-- without editable fields is refused whole. The content_edits trigger's check;
-- owner only.
create function private.check_edit_patch(p_content_type text, p_patch jsonb) returns void
language plpgsql
stable
set search_path = ''
as $$
declare
  v_field record;
  v_editable text;
begin
  select string_agg(f.field, ', ' order by f.field) into v_editable
    from private.editable_fields f where f.content_type = p_content_type;
  if v_editable is null then
    raise exception 'edit: % items are not editable', coalesce(p_content_type, 'null') using errcode = '22023';
  end if;
  if jsonb_typeof(p_patch) is distinct from 'object' or p_patch = '{}'::jsonb then
    raise exception 'edit: the patch must be a non-empty JSON object of fields (editable fields of %: %)', p_content_type, v_editable
      using errcode = '22023';
  end if;
  if octet_length(p_patch::text) > 262144 then
    raise exception 'edit: the patch is over 256 KiB' using errcode = '22023';
  end if;
  for v_field in
    select e.key, e.value, f.json_type
      from jsonb_each(p_patch) e
      left join private.editable_fields f on f.content_type = p_content_type and f.field = e.key
     order by e.key
  loop
    if v_field.json_type is null then
      raise exception 'edit: "%" is not an editable field of % (editable: %)', left(v_field.key, 100), p_content_type, v_editable
        using errcode = '22023';
    end if;
    if not (case v_field.json_type
         when 'string' then jsonb_typeof(v_field.value) in ('string', 'null')
         when 'integer' then jsonb_typeof(v_field.value) = 'number' and (v_field.value #>> '{}')::numeric % 1 = 0
         when 'number' then jsonb_typeof(v_field.value) = 'number'
         when 'boolean' then jsonb_typeof(v_field.value) = 'boolean'
         when 'array_of_integers' then jsonb_typeof(v_field.value) = 'array'
           and not jsonb_path_exists(v_field.value, '$[*] ? (@.type() != "number" || @.floor() != @)')
         when 'object' then jsonb_typeof(v_field.value) = 'object' and v_field.value <> '{}'::jsonb
         else false end) then
      raise exception 'edit: "%" of % must be %, got %', v_field.key, p_content_type,
        case v_field.json_type
          when 'string' then 'a string or null'
          when 'integer' then 'a whole number'
          when 'number' then 'a number'
          when 'boolean' then 'true or false'
          when 'array_of_integers' then 'an array of whole numbers'
          else 'a non-empty object (the changed columns and their values)' end,
        left(v_field.value::text, 100)
        using errcode = '22023';
    end if;
  end loop;
end;
$$;
