-- private.hubspot_item_updated_at(item): HubSpot's update time of one item as
-- its API answers it: `updated` (CMS v3 types), else `updatedAt` (HubDB), the
-- rule save_fetched_page_raw stores hubspot_updated_at by; null when neither is
-- a timestamp string. Stable (a time zone setting reads a string without an
-- offset); for the publish functions; owner only.
create function private.hubspot_item_updated_at(p_item jsonb) returns timestamptz
language plpgsql
stable
parallel safe
set search_path = ''
as $$
declare
  v jsonb := coalesce(nullif(p_item -> 'updated', 'null'::jsonb), p_item -> 'updatedAt');
begin
  if jsonb_typeof(v) = 'string' and pg_input_is_valid(v #>> '{}', 'timestamptz') then
    return (v #>> '{}')::timestamptz;
  end if;
  return null;
end;
$$;
