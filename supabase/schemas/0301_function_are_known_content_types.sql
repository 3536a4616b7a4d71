-- private.are_known_content_types(ts): whether ts is a non-empty array of
-- distinct registered content types: create_run's check of runs.content_types,
-- which no foreign key can reference. Stable, reads only; for the owner only.
create function private.are_known_content_types(ts text[]) returns boolean
language plpgsql
stable
parallel safe
set search_path = ''
as $$
begin
  return cardinality(ts) >= 1
     and (select count(distinct t.t) = count(*) and count(c.content_type) = count(*)
            from unnest(ts) as t(t)
            left join private.content_types c on c.content_type = t.t);
end;
$$;
