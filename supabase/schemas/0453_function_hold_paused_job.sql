-- Triggers jobs_hold_paused_insert / _update: a paused portal's job that becomes
-- pending (created, released, parked, retried) waits with run_after 'infinity'
-- and the pause's reason until resume_portal, its own run_after and
-- waiting_reason kept in held_run_after / held_waiting_reason for the resume.
-- A held job that ends (stop_job, stop_run, disconnect_portal) drops the hold
-- and gets its own run_after back. An insert first takes the portal FOR KEY
-- SHARE, waiting out a pause_portal in flight (it holds it FOR UPDATE).
-- Reads only; SECURITY DEFINER since the service role cannot read private.
create function private.hold_paused_job() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text;
begin
  if new.status <> 'pending' then
    if new.run_after = 'infinity' then
      new.run_after := new.held_run_after;
    end if;
    new.held_run_after := null;
    new.held_waiting_reason := null;
    return new;
  end if;
  if new.held_run_after is not null then
    return new; -- held already (pause_portal holds what it hands back itself)
  end if;
  if tg_op = 'INSERT' then
    perform 1 from public.portals p where p.id = new.portal_id for key share;
  end if;
  select pp.reason into v_reason from private.portal_pauses pp where pp.portal_id = new.portal_id;
  if found then
    new.held_run_after := new.run_after;
    new.held_waiting_reason := new.waiting_reason;
    new.run_after := 'infinity';
    new.waiting_reason := v_reason;
  end if;
  return new;
end;
$$;
create trigger jobs_hold_paused_insert before insert on public.jobs
  for each row when (new.status = 'pending') execute function private.hold_paused_job();
create trigger jobs_hold_paused_update before update of status on public.jobs
  for each row when ((new.status = 'pending' and old.status <> 'pending')
                     or (new.status <> 'pending' and old.held_run_after is not null))
  execute function private.hold_paused_job();
