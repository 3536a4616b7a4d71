-- public.claim_schedule_probe(): a worker lane claims the schedule probe due
-- longest (docs/decisions/0058): one due schedule (private.schedule_probe_due),
-- taken FOR UPDATE SKIP LOCKED, leased for the probe job kind's lease with a
-- new fencing token, its incremental due again when the lease expires. Answers what to ask HubSpot (private.probe_checkpoint of
-- the types with settled marks), which the report brings back. Writes nothing
-- else: no run, no job. No row when none is due. The service role only (the worker).
create function public.claim_schedule_probe()
returns table (portal_id uuid, probe_token bigint, checkpoint jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_due_by timestamptz := now() + interval '10 seconds'; -- as the tick: due within 10 s counts as due
  v_lease_end timestamptz := now() + make_interval(secs => (select k.lease_seconds from private.job_kinds k where k.kind = 'probe'));
  v_claimed public.sync_schedules;
begin
  update public.sync_schedules s
     set probe_token = s.probe_token + 1,
         probe_claimed_at = now(),
         probe_lease_expires_at = v_lease_end,
         -- Due again when the lease expires: the due index then passes over probes in flight (a claim
         -- never walks every lane's leased schedule), and a probe whose worker died comes due by itself.
         next_incremental_at = v_lease_end
   where s.portal_id = (select d.portal_id from public.sync_schedules d
                         where not d.paused
                           and least(d.next_incremental_at, d.next_full_at) <= v_due_by
                           and private.schedule_probe_due(d, v_due_by)
                         order by least(d.next_incremental_at, d.next_full_at)
                         limit 1
                           for update skip locked)
  returning s.* into v_claimed;
  if v_claimed.portal_id is null then
    return;
  end if;
  -- What to ask: the types with settled marks (the others count as changed at the report).
  return query
  select v_claimed.portal_id, v_claimed.probe_token,
         private.probe_checkpoint(v_claimed.portal_id,
           coalesce((select array_agg(m.content_type order by m.content_type) from public.sync_marks m
                      where m.portal_id = v_claimed.portal_id and m.content_type = any (v_claimed.content_types)
                        and (m.archived_high_water is not null or m.content_type in ('hubdb_tables', 'hubdb_rows'))), '{}'),
           make_interval(secs => v_claimed.overlap_seconds), v_claimed.hubdb_sweep_every_minutes);
end;
$$;
