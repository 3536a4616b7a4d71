-- private.is_listing_page(page): whether a probe's window answer has the
-- shape of a HubSpot listing page: a number `total` and a `results` array of
-- objects, each with a string or number `id` (complete_probe_job: the CMS
-- windows and HubDB rows' windows). Immutable; owner only.
create function private.is_listing_page(p_page jsonb) returns boolean
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return jsonb_typeof(p_page -> 'total') is not distinct from 'number'
     and jsonb_typeof(p_page -> 'results') is not distinct from 'array'
     and not exists (select 1 from jsonb_array_elements(p_page -> 'results') e
                      where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') not in ('string', 'number'));
end;
$$;
