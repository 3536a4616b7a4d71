-- public.schedule_due_syncs(): the pg_cron tick's call (every minute, before
-- the worker is invoked): for at most private.sync_settings.max_runs_per_tick
-- due schedules of connected portals, not paused, oldest due first, creates a
-- fetch run through create_run (a type with an active fetch gets no second
-- job): a full reconcile when due (it stands for the incremental too), else an
-- incremental, once it has been due probe_grace_seconds with no live schedule
-- probe (worker lanes probe due incrementals from the schedule row and make a
-- run only on a change: docs/decisions/0058; the tick is their fallback, and
-- with a grace of 0 makes every due incremental a run). The next due times are
-- each interval's next slot (private.sync_slot), but a full that met a busy
-- type stays due. A time due within 10 s counts as due: ticks a minute apart
-- start at varying times. Schedules are taken FOR UPDATE SKIP LOCKED: two
-- ticks, or a tick and a lane, never handle one twice. Returns the number of
-- runs created. The service role only.
create function public.schedule_due_syncs() returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_schedule public.sync_schedules;
  v_full boolean;
  v_run uuid;
  v_duplicates text[];
  v_runs integer := 0;
  v_due_by timestamptz := now() + interval '10 seconds';
  v_grace interval := make_interval(secs => (select t.probe_grace_seconds from private.sync_settings t));
begin
  for v_schedule in
    select s.* from public.sync_schedules s
     where not s.paused
       and least(s.next_incremental_at, s.next_full_at) <= v_due_by
       -- A full reconcile when due; an incremental once no lane has probed it within the grace (none live now).
       and (s.next_full_at <= v_due_by
            or (s.next_incremental_at <= v_due_by - v_grace
                and (s.schedule_probe_lease_expires_at is null or s.schedule_probe_lease_expires_at <= now())))
       and exists (select 1 from public.portals p where p.id = s.portal_id and p.disconnected_at is null)
     order by least(s.next_incremental_at, s.next_full_at)
     limit (select t.max_runs_per_tick from private.sync_settings t)
       for update of s skip locked
  loop
    v_full := v_schedule.next_full_at <= v_due_by;
    select c.run_id, c.duplicate_types into v_run, v_duplicates
      from public.create_run(v_schedule.portal_id, v_schedule.owner_id, 'fetch', v_schedule.content_types, null, null, null,
                             case when v_full then 'full' else 'incremental' end, 'schedule') c;
    if v_run is not null then
      v_runs := v_runs + 1;
    end if;
    update public.sync_schedules s
       set next_incremental_at = case when s.incremental_every_minutes is not null
                                      then private.sync_slot(s.portal_id, s.incremental_every_minutes, v_due_by) end,
           next_full_at = case when v_full and cardinality(v_duplicates) = 0
                               then private.sync_slot(s.portal_id, s.full_every_minutes, v_due_by) else s.next_full_at end,
           last_scheduled_at = now(),
           last_run_id = coalesce(v_run, s.last_run_id),
           schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null -- an expired lease ends
     where s.portal_id = v_schedule.portal_id;
  end loop;
  return v_runs;
end;
$$;
