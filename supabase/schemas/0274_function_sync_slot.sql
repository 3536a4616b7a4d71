-- private.sync_slot(portal, every minutes, after): the portal's first slot
-- after `after` for an interval: the times a whole number of intervals from
-- the portal's phase (a hash of its id, within the interval). Schedules due
-- on their slots keep their exact interval, and portals created together
-- spread over it. Immutable; owner only (fill_sync_schedule, schedule_due_syncs).
create function private.sync_slot(p_portal_id uuid, p_every_minutes integer, p_after timestamptz) returns timestamptz
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v_period bigint := p_every_minutes * 60::bigint;
  v_phase bigint := mod(mod(hashtextextended(p_portal_id::text, 0), p_every_minutes * 60::bigint) + p_every_minutes * 60::bigint,
                        p_every_minutes * 60::bigint);
begin
  return to_timestamp(v_phase + v_period * ((floor(extract(epoch from p_after))::bigint - v_phase) / v_period + 1));
end;
$$;
