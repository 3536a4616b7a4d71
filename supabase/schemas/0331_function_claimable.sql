-- private.claimable(portal, kind, type, nth): whether a pending job may be
-- claimed now as its portal's nth of that kind in one claim: its portal
-- cap leaves room, and no conflicting fetch or export is in flight.
-- Called by claim_jobs holding the portal's claim lock; reads only; owner only.
-- The other claim sites write this check out, not call it (decision 0003,
-- "The claimable check, written out").
create function private.claimable(p_portal_id uuid, p_kind text, p_content_type text, p_nth bigint default 1)
returns boolean
language plpgsql
stable
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  if p_nth + (select count(*) from public.jobs r
                where r.portal_id = p_portal_id and r.kind = p_kind and r.status = 'running')
     > coalesce(private.portal_cap(p_portal_id, p_kind), 2147483647) then
    return false;
  end if;
  if p_kind = 'export' then
    return not exists (select 1 from public.jobs x
                        where x.portal_id = p_portal_id and x.kind = 'fetch' and x.content_type = p_content_type
                          and x.status in ('pending', 'running'));
  end if;
  if p_kind = 'fetch' then
    return not exists (select 1 from public.jobs x
                        where x.portal_id = p_portal_id and x.kind = 'export' and x.content_type = p_content_type
                          and x.status = 'running');
  end if;
  return true;
end;
$$;
