-- public.claim_schedule_probe(holder, ...): a worker lane claims the schedule
-- probe due longest (docs/decisions/0058): one due schedule
-- (private.schedule_probe_due), taken FOR UPDATE SKIP LOCKED, under the
-- schedule-probe lease with a new fencing token, its incremental due again
-- when the lease expires. Answers what to ask HubSpot (private.probe_checkpoint
-- of the types with settled marks), which the report brings back. With a token
-- holder, also what the lane's first requests need, so a quiet cycle takes two
-- calls: the portal's token (claim_portal_token for the holder, as jsonb) and,
-- when it is to be used, a grant from the portal's HubSpot budget
-- (acquire_hubspot_requests with the budget arguments) of the requests the
-- questions' first round sends (private.probe_requests); fewer when the
-- budget has less room (the lane asks for the rest itself). ahead_seconds: how
-- long before its due time a schedule may be probed (10, as the tick counts
-- due; report_and_claim_schedule_probes's chained claims 20). Writes nothing
-- else: no run, no job. No row when none is due, or when the schedule got a
-- run's job meanwhile (a tick's: the lease is given back). The service role only (the worker).
create function public.claim_schedule_probe(
  p_token_holder text default null, p_refresh_lease_seconds integer default 30, p_min_valid_seconds integer default 5,
  p_max_requests integer default 190, p_window_ms integer default 10000, p_ceiling integer default null,
  p_daily_reserve_percent numeric default 0, p_ahead_seconds integer default 10
)
returns table (portal_id uuid, fencing_token bigint, checkpoint jsonb, token jsonb, granted integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  -- As the tick: due within 10 s counts as due; a lane in a chain looks further ahead (decision 0063).
  v_due_by timestamptz := now() + make_interval(secs => p_ahead_seconds);
  -- The schedule-probe lease has no setting of its own: it borrows the probe job kind's lease_seconds (same questions, same time).
  v_lease_end timestamptz := now() + make_interval(secs => (select k.lease_seconds from private.job_kinds k where k.kind = 'probe'));
  v_claimed public.sync_schedules;
  v_checkpoint jsonb;
  v_token jsonb;
  v_requests integer;
  v_granted integer := 0;
begin
  if p_ahead_seconds is null or p_ahead_seconds not between 0 and 60 then
    raise exception 'claim_schedule_probe: ahead_seconds must be between 0 and 60' using errcode = '22023';
  end if;
  update public.sync_schedules s
     set schedule_probe_fencing_token = s.schedule_probe_fencing_token + 1,
         schedule_probe_claimed_at = now(),
         schedule_probe_lease_expires_at = v_lease_end,
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
  -- A tick that made this cycle's run and committed after the claim's snapshot, with a next slot
  -- within 10 s, passes the due check on the row's new version, whose job test read the older
  -- snapshot; this statement's snapshot sees the run's job. The cycle is the run's: the lease is
  -- given back and the schedule set to its next slot, as the tick does.
  if exists (select 1 from public.jobs j
              where j.portal_id = v_claimed.portal_id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running')) then
    update public.sync_schedules s
       set schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null,
           next_incremental_at = case when s.incremental_every_minutes is not null
                                      then private.sync_slot(s.portal_id, s.incremental_every_minutes, v_due_by) end
     where s.portal_id = v_claimed.portal_id;
    return;
  end if;
  -- What to ask: the types with settled marks (the others count as changed at the report).
  v_checkpoint := private.probe_checkpoint(v_claimed.portal_id, v_claimed.content_types,
                                           make_interval(secs => v_claimed.overlap_seconds), v_claimed.hubdb_sweep_every_minutes);
  if p_token_holder is not null then
    select to_jsonb(t) into v_token
      from public.claim_portal_token(v_claimed.portal_id, p_token_holder, null, p_refresh_lease_seconds, p_min_valid_seconds) t;
    v_requests := private.probe_requests(v_checkpoint);
    if v_token ->> 'decision' = 'use' and v_requests > 0 then
      select a.granted into v_granted
        from public.acquire_hubspot_requests((v_token ->> 'hubspot_portal_id')::bigint, v_requests, p_max_requests, p_window_ms,
                                             v_token ->> 'auth_kind', p_ceiling, p_daily_reserve_percent) a;
    end if;
  end if;
  return query select v_claimed.portal_id, v_claimed.schedule_probe_fencing_token, v_checkpoint, v_token, v_granted;
end;
$$;
