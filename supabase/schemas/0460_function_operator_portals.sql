-- public.operator_portals(): every connected or disconnected portal for the
-- Operator view: owner, HubSpot id, auth kind, disconnected, paused (when, by
-- whom, why), its active jobs by status, and its HubSpot requests in the last
-- 10 s and hour (private.hubspot_request_counts) with its learned limit.
-- Reads only. For the service role only (the orchestrator, for operators).
create function public.operator_portals() returns table (
  portal_id uuid, name text, owner_id uuid, hubspot_portal_id bigint, auth_kind text, disconnected_at timestamptz,
  disconnected_reason text, paused_at timestamptz, paused_by uuid, pause_reason text, pending_jobs integer,
  running_jobs integer, requests_last_10s integer, requests_last_hour integer, max_per_interval integer, interval_ms integer
)
language sql
stable
security definer
set search_path = ''
as $$
  select p.id, p.name, p.owner_id, p.hubspot_portal_id, p.auth_kind, p.disconnected_at, p.disconnected_reason,
         pp.paused_at, pp.paused_by, pp.reason,
         (select count(*)::integer from public.jobs j where j.portal_id = p.id and j.status = 'pending'),
         (select count(*)::integer from public.jobs j where j.portal_id = p.id and j.status = 'running'),
         (select count(*)::integer from private.hubspot_request_budgets b, unnest(b.granted_at) t
           where b.hubspot_portal_id = p.hubspot_portal_id and t > now() - interval '10 seconds'),
         (select coalesce(sum(c.requests), 0)::integer from private.hubspot_request_counts c
           where c.hubspot_portal_id = p.hubspot_portal_id and c.window_start > now() - interval '1 hour'),
         b.max_per_interval, b.interval_ms
    from public.portals p
    left join private.portal_pauses pp on pp.portal_id = p.id
    left join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
   order by p.name, p.id
   limit 1000;
$$;
