-- private.is_known_content_type(t): whether t is a registered content type
-- (a row of private.content_types). Stable, reads only. For the owner only; no
-- function calls it any more (create_run checks with are_known_content_types).
create function private.is_known_content_type(t text) returns boolean
language sql
stable
parallel safe
set search_path = ''
as $$
  select exists (select 1 from private.content_types c where c.content_type = t)
$$;
