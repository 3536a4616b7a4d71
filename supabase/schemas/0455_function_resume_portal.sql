-- public.resume_portal(portal): ends an operator's pause: each job it held
-- gets its own run_after and waiting_reason back (due now only if that time
-- has passed: a parked job stays parked until its reset); an unfinished run
-- that showed the pause's reason shows that of its job whose wait ends first,
-- else none; its schedule runs again. False when it was not paused. Locks the
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
     set run_after = j.held_run_after, waiting_reason = j.held_waiting_reason,
         held_run_after = null, held_waiting_reason = null, updated_at = now()
   where j.portal_id = p_portal_id and j.status = 'pending' and j.held_run_after is not null;
  update public.runs r
     set waiting_reason = (select j.waiting_reason from public.jobs j
                            where j.run_id = r.id and j.status = 'pending' and j.waiting_reason is not null
                              and j.run_after > now()
                            order by j.run_after, j.id
                            limit 1)
   where r.portal_id = p_portal_id and r.finished_at is null and r.waiting_reason = v_reason;
  return true;
end;
$$;
