-- Triggers jobs_hold_paused_insert / _update: a paused portal's job that becomes
-- pending (created, released, parked, retried) waits with run_after 'infinity'
-- and the pause's reason until resume_portal. An insert first takes the portal
-- FOR KEY SHARE, waiting out a pause_portal in flight (it holds it FOR UPDATE).
-- Reads only; SECURITY DEFINER since the service role cannot read private.
create function private.hold_paused_job() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text;
begin
  if tg_op = 'INSERT' then
    perform 1 from public.portals p where p.id = new.portal_id for key share;
  end if;
  select pp.reason into v_reason from private.portal_pauses pp where pp.portal_id = new.portal_id;
  if found then
    new.run_after := 'infinity';
    new.waiting_reason := v_reason;
  end if;
  return new;
end;
$$;
create trigger jobs_hold_paused_insert before insert on public.jobs
  for each row when (new.status = 'pending') execute function private.hold_paused_job();
create trigger jobs_hold_paused_update before update of status on public.jobs
  for each row when (new.status = 'pending' and old.status <> 'pending') execute function private.hold_paused_job();
