-- public.resume_portal(portal): ends an operator's pause: the portal's jobs
-- held by it are due now (waiting reason cleared on them and on its unfinished
-- runs), its schedule runs again. False when it was not paused. Locks the
-- portal FOR UPDATE, then its unfinished runs (by id), then their jobs. For
-- the service role only (the orchestrator, for operators).
create function public.resume_portal(p_portal_id uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text;
begin
  if p_portal_id is null then
    raise exception 'resume_portal: a portal is required' using errcode = '22004';
  end if;
  perform 1 from public.portals p where p.id = p_portal_id for update;
  if not found then
    raise exception 'resume_portal: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  delete from private.portal_pauses pp where pp.portal_id = p_portal_id returning pp.reason into v_reason;
  if not found then
    return false;
  end if;
  perform 1 from public.runs r where r.portal_id = p_portal_id and r.finished_at is null order by r.id for update;
  update public.jobs j
     set run_after = now(), waiting_reason = null, updated_at = now()
   where j.portal_id = p_portal_id and j.status = 'pending' and j.run_after = 'infinity';
  update public.runs r set waiting_reason = null
   where r.portal_id = p_portal_id and r.finished_at is null and r.waiting_reason = v_reason;
  return true;
end;
$$;
