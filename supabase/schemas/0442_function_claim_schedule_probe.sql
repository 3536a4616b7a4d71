-- public.claim_schedule_probe(): a worker lane claims the schedule probe due
-- longest (docs/decisions/0058): one due schedule (private.schedule_probe_due),
-- taken FOR UPDATE SKIP LOCKED, leased for the probe job kind's lease with a
-- new fencing token, its questions (private.probe_checkpoint of the types with
-- settled marks) kept on the row for the report. Writes nothing else: no run,
-- no job. No row when none is due. The service role only (the worker).
create function public.claim_schedule_probe()
returns table (portal_id uuid, probe_token bigint, checkpoint jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_due_by timestamptz := now() + interval '10 seconds'; -- as the tick: due within 10 s counts as due
  v_schedule public.sync_schedules;
  v_settled text[];
begin
  select s.* into v_schedule from public.sync_schedules s
   where not s.paused
     and least(s.next_incremental_at, s.next_full_at) <= v_due_by
     and private.schedule_probe_due(s, v_due_by)
   order by least(s.next_incremental_at, s.next_full_at)
   limit 1
     for update of s skip locked;
  if not found then
    return;
  end if;
  -- The types a probe can ask about: marks settled (the others count as changed at the report).
  select array_agg(m.content_type order by m.content_type) into v_settled
    from public.sync_marks m
   where m.portal_id = v_schedule.portal_id and m.content_type = any (v_schedule.content_types)
     and (m.archived_high_water is not null or m.content_type in ('hubdb_tables', 'hubdb_rows'));
  return query
  update public.sync_schedules s
     set probe_token = s.probe_token + 1,
         probe_claimed_at = now(),
         probe_lease_expires_at = now() + make_interval(secs => (select k.lease_seconds from private.job_kinds k where k.kind = 'probe')),
         probe_checkpoint = private.probe_checkpoint(s.portal_id, coalesce(v_settled, '{}'), make_interval(secs => s.overlap_seconds),
                                                     s.hubdb_sweep_every_minutes)
   where s.portal_id = v_schedule.portal_id
  returning s.portal_id, s.probe_token, s.probe_checkpoint;
end;
$$;
