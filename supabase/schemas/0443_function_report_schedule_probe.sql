-- public.report_schedule_probe(portal, fencing_token, checkpoint, answers, tables_pages, rate_headers):
-- the lane holding a schedule probe (claim_schedule_probe; docs/decisions/0058)
-- reports what HubSpot answered to the claim's questions (checkpoint, as the
-- claim gave them), and private.probe_changed_types decides. With
-- nothing changed, the cycle leaves no run: the types are recorded as synced
-- now (private.record_probe) and the portal's quiet cycles of the day count
-- one more (public.quiet_cycles). With changed types (and the schedule's types
-- whose marks are not settled), a scheduled incremental run fetches them
-- (create_run, p_probed: no second probe), with the tables list kept for its
-- HubDB jobs. Answers null: the probe failed (HubSpot, the token, the budget),
-- and a scheduled incremental run with a probe job takes the cycle over, with
-- its retries, backoff and notifications. Either way the schedule moves to its
-- next slot at least half an interval away, and the lease ends. rate_headers: the
-- last HubSpot answer's limits ({max, intervalMs, remaining, daily,
-- dailyRemaining, sentAt, answeredAt}), recorded as record_hubspot_rate_headers
-- does. Answers 'quiet', 'changed' or 'handed_over';
-- null when fenced off (another fencing token, or the lease expired: the schedule is
-- due again). Locks the schedule row, then the portal's budget row and what create_run locks. The service role only.
create function public.report_schedule_probe(p_portal_id uuid, p_fencing_token bigint, p_checkpoint jsonb, p_answers jsonb,
                                             p_tables_pages text[] default null, p_rate_headers jsonb default null)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_schedule public.sync_schedules;
  v_types text[]; -- the types probed
  v_changed text[];
  v_run uuid;
  v_due_by timestamptz := now() + interval '10 seconds';
  v_outcome text;
begin
  select s.* into v_schedule from public.sync_schedules s
   where s.portal_id = p_portal_id and s.schedule_probe_fencing_token = p_fencing_token
     and s.schedule_probe_lease_expires_at > now()
     for update;
  if not found then
    return null;
  end if;
  if p_rate_headers is not null then
    perform public.record_hubspot_rate_headers((select p.hubspot_portal_id from public.portals p where p.id = p_portal_id),
      (p_rate_headers ->> 'max')::integer, (p_rate_headers ->> 'intervalMs')::integer, (p_rate_headers ->> 'remaining')::integer,
      (p_rate_headers ->> 'daily')::integer, (p_rate_headers ->> 'dailyRemaining')::integer,
      (p_rate_headers ->> 'sentAt')::timestamptz, (p_rate_headers ->> 'answeredAt')::timestamptz);
  end if;
  if jsonb_typeof(p_checkpoint -> 'types') is distinct from 'object' then
    raise exception 'report_schedule_probe: the checkpoint must be the claim''s {types: {...}}' using errcode = '22023';
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(p_checkpoint -> 'types') k;
  if p_answers is null then
    select c.run_id into v_run
      from public.create_run(p_portal_id, v_schedule.owner_id, 'fetch', v_schedule.content_types, null, null, null,
                             'incremental', 'schedule') c;
    v_outcome := 'handed_over';
  else
    select d.changed_types into v_changed
      from private.probe_changed_types('report_schedule_probe', p_portal_id, p_checkpoint, p_answers, p_tables_pages) d;
    -- The schedule's types the probe could not ask about (no settled marks) are fetched as create_run decides.
    select array_agg(t order by t) into v_changed
      from unnest(v_schedule.content_types) t
     where t = any (coalesce(v_changed, '{}')) or t <> all (coalesce(v_types, '{}'));
    if v_changed is not null then
      select c.run_id into v_run
        from public.create_run(p_portal_id, v_schedule.owner_id, 'fetch', v_changed, null, null, null,
                               'incremental', 'schedule', true) c;
      v_outcome := 'changed';
    else
      -- The day's row is there but for the day's first cycle: an update (no insert tried, no conflict's lock).
      update public.quiet_cycles q set cycles = q.cycles + 1, last_finished_at = greatest(q.last_finished_at, now())
       where q.portal_id = p_portal_id and q.day = (now() at time zone 'UTC')::date;
      if not found then
        insert into public.quiet_cycles as q (portal_id, owner_id, day, cycles, jobs, items_checked, first_finished_at, last_finished_at)
        values (p_portal_id, v_schedule.owner_id, (now() at time zone 'UTC')::date, 1, 0, 0, now(), now())
        on conflict (portal_id, day) do update
           set cycles = q.cycles + 1, last_finished_at = greatest(q.last_finished_at, excluded.last_finished_at);
      end if;
      v_outcome := 'quiet';
    end if;
    perform private.record_probe(p_portal_id, v_run, v_types, v_changed,
                                 case when (p_checkpoint #>> '{types,hubdb_rows,sweep}')::boolean
                                      then v_schedule.schedule_probe_claimed_at end, p_tables_pages);
  end if;
  update public.sync_schedules s
     -- The next slot at least half an interval away: a late probe skips the slot it would reach at once.
     set next_incremental_at = private.sync_slot(s.portal_id, s.incremental_every_minutes,
                                                 greatest(v_due_by, now() + make_interval(secs => s.incremental_every_minutes * 30))),
         last_scheduled_at = now(),
         last_run_id = coalesce(v_run, s.last_run_id),
         schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null
   where s.portal_id = p_portal_id;
  return v_outcome;
end;
$$;
