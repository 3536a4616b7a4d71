-- public.disconnect_portal(portal, reason, holder): HubSpot access was removed:
-- the portal is marked disconnected, its pending and running fetch jobs (and probes) fail
-- for good and their runs settle; with a holder, only while it still holds the
-- refresh lease (else null). Idempotent; returns the jobs failed. Locks: portal
-- FOR NO KEY UPDATE, credentials, runs (id order), jobs. The service role only.
create function public.disconnect_portal(p_portal_id uuid, p_reason text, p_holder text default null) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_message text;
  v_runs uuid[];
  v_run uuid;
  v_failed integer;
  v_holder text;
begin
  if p_portal_id is null or p_reason is null or char_length(p_reason) not between 1 and 400 then
    raise exception 'disconnect_portal: a portal and a reason of 1-400 characters are required' using errcode = '22023';
  end if;
  -- Lock order as connect_portal_with_tokens: the portal, then its credentials. The
  -- portal's lock is the one its UPDATE below takes anyway (FOR NO KEY UPDATE, which
  -- does not block the key-share locks of rows that reference the portal).
  perform 1 from public.portals p where p.id = p_portal_id for no key update;
  if not found then
    return 0;
  end if;
  select c.refresh_holder into v_holder from private.portal_credentials c where c.portal_id = p_portal_id for update;
  if p_holder is not null and v_holder is distinct from p_holder then
    return null; -- reconnected or taken over since this holder read its refresh token
  end if;
  update public.portals p
     set disconnected_at = coalesce(p.disconnected_at, now()),
         disconnected_reason = coalesce(p.disconnected_reason, p_reason)
   where p.id = p_portal_id
  returning private.access_removed_message(p.disconnected_reason) into v_message;
  update private.portal_credentials c set refresh_holder = null, refresh_lease_expires_at = null where c.portal_id = p_portal_id;
  -- Lock order: runs before their jobs.
  select coalesce(array_agg(r.id order by r.id), '{}') into v_runs
    from (select r.id from public.runs r
           where r.portal_id = p_portal_id and r.finished_at is null
             and exists (select 1 from public.jobs j
                          where j.run_id = r.id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running'))
           order by r.id
             for update) r;
  update public.jobs j
     set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
         waiting_reason = null, last_error = v_message
   where j.run_id = any (v_runs) and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running');
  get diagnostics v_failed = row_count;
  foreach v_run in array v_runs loop
    perform private.settle_run(v_run);
  end loop;
  return v_failed;
end;
$$;
