-- private.portal_cap(portal, kind): the portal cap, running jobs of a kind one
-- portal may hold at once (null: none). For a kind that calls HubSpot
-- (job_request_rate set), the portal's learned limit per second (at most the
-- configured ceiling) ÷ the requests per second one job sends, rounded up,
-- between 1 and job_kinds.portal_cap_max: a Professional portal runs more jobs at once than
-- a Starter one. Unknown limit: a private app's 100 per 10 s. Reads only; owner only.
create function private.portal_cap(p_portal_id uuid, p_kind text)
returns integer
language plpgsql
stable
set search_path = ''
as $$
begin
  -- plpgsql, not sql: claims call it per candidate, and a sql function with a SET clause is
  -- planned anew at every call (decision 0052).
  return (
    select case when k.portal_cap_max is null or k.job_request_rate is null then k.portal_cap_max
                else least(k.portal_cap_max, greatest(1, ceil(coalesce(
                       (select least(b.max_per_interval * 1000.0 / b.interval_ms, coalesce(b.configured_max / 10.0, 'infinity'))
                          from public.portals p
                          join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
                         where p.id = p_portal_id and b.max_per_interval is not null),
                       10.0) / k.job_request_rate)::integer))
           end
      from private.job_kinds k
     where k.kind = p_kind);
end;
$$;
