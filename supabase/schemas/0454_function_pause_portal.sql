-- public.pause_portal(portal, operator, reason): its pending and running jobs
-- wait as pending (run_after 'infinity', the reason on them and its unfinished
-- runs; a holder learns at its next write, attempt given back), each job's own
-- run_after and waiting_reason kept for resume_portal (a running one's: due
-- now, no reason); its schedule creates no run. False when already paused.
-- Locks the portal FOR UPDATE, its unfinished runs (by id), their jobs. The
-- service role only (for operators).
create function public.pause_portal(p_portal_id uuid, p_paused_by uuid default null, p_reason text default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text := coalesce(nullif(btrim(p_reason), ''), 'paused by an operator');
begin
  if p_portal_id is null then
    raise exception 'pause_portal: a portal is required' using errcode = '22004';
  end if;
  if char_length(v_reason) > 500 then
    raise exception 'pause_portal: the reason is at most 500 characters' using errcode = '22023';
  end if;
  perform 1 from public.portals p where p.id = p_portal_id for update;
  if not found then
    raise exception 'pause_portal: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  insert into private.portal_pauses (portal_id, paused_by, reason) values (p_portal_id, p_paused_by, v_reason)
  on conflict (portal_id) do nothing;
  if not found then
    return false;
  end if;
  perform 1 from public.runs r where r.portal_id = p_portal_id and r.finished_at is null order by r.id for update;
  update public.jobs j
     set status = 'pending', run_after = 'infinity', waiting_reason = v_reason, lease_expires_at = null,
         held_run_after = case when j.status = 'running' then now() else j.run_after end,
         held_waiting_reason = case when j.status = 'running' then null else j.waiting_reason end,
         attempts = case when j.status = 'running' then greatest(j.attempts - 1, 0) else j.attempts end,
         updated_at = now()
   where j.portal_id = p_portal_id and j.status in ('pending', 'running') and j.held_run_after is null;
  update public.runs r set waiting_reason = v_reason
   where r.portal_id = p_portal_id and r.finished_at is null;
  return true;
end;
$$;
