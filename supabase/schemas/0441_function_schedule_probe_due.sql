-- private.schedule_probe_due(schedule, due_by): whether a worker lane may
-- probe the schedule now (docs/decisions/0058): schedule probes on
-- (probe_grace_seconds > 0), its incremental due by due_by and its full
-- reconcile not (the tick's), no live schedule-probe lease, the portal connected, not
-- paused by an operator, and no fetch or probe job of it pending or running
-- (the tick's run would join them). The caller filters by the due index first (not paused,
-- least of the due times). claim_schedule_probe and claimable_jobs_exist ask
-- it (plpgsql: per row, decision 0052); owner only.
create function private.schedule_probe_due(p_schedule public.sync_schedules, p_due_by timestamptz)
returns boolean
language plpgsql
stable
set search_path = ''
as $$
begin
  return p_schedule.next_incremental_at <= p_due_by
     and (p_schedule.next_full_at is null or p_schedule.next_full_at > p_due_by)
     and (p_schedule.schedule_probe_lease_expires_at is null or p_schedule.schedule_probe_lease_expires_at <= now())
     and (select t.probe_grace_seconds from private.sync_settings t) > 0
     and exists (select 1 from public.portals p where p.id = p_schedule.portal_id and p.disconnected_at is null)
     and not exists (select 1 from private.portal_pauses pp where pp.portal_id = p_schedule.portal_id)
     -- By the active-job indexes: never the portal's runs, which a month of changed cycles makes many.
     and not exists (select 1 from public.jobs j
                      where j.portal_id = p_schedule.portal_id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running'));
end;
$$;
