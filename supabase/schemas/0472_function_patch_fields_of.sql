-- private.patch_fields_of(item, patch): HubSpot's values of the fields a patch
-- sets, as an object of the same shape (an object-valued field, a HubDB row's
-- `values`, sparse: only the patch's keys); a field the item lacks is JSON
-- null. What a plan shows as `before` (and `current` beside ours for a
-- conflict), and what a restore writes back from the pre-image. Immutable;
-- owner only.
create function private.patch_fields_of(p_item jsonb, p_patch jsonb) returns jsonb
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return (
    select coalesce(jsonb_object_agg(e.key,
             case when jsonb_typeof(e.value) = 'object'
                  then (select coalesce(jsonb_object_agg(c.key, coalesce(p_item -> e.key -> c.key, 'null'::jsonb)), '{}'::jsonb)
                          from jsonb_each(e.value) c)
                  else coalesce(p_item -> e.key, 'null'::jsonb) end), '{}'::jsonb)
      from jsonb_each(p_patch) e);
end;
$$;
