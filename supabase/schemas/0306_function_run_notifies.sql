-- private.run_notifies(run): the notification rule, for a run that just
-- finished: a run a person started always; a scheduled one only when it failed
-- (failed / partially_failed) and the portal's previous finished scheduled run
-- of its kind (stopped ones aside) did not: the first failure after successes.
-- Quiet or changed scheduled successes send none. For the owner only.
create function private.run_notifies(p_run public.runs) returns boolean
language plpgsql stable
set search_path = ''
as $$
begin
  if p_run.trigger = 'user' then
    return true;
  end if;
  if p_run.status not in ('failed', 'partially_failed') then
    return false;
  end if;
  return coalesce((
    select prev.status not in ('failed', 'partially_failed')
      from public.runs prev
     where prev.portal_id = p_run.portal_id and prev.id <> p_run.id and prev.kind = p_run.kind
       and prev.trigger = 'schedule' and prev.finished_at is not null and prev.status <> 'stopped'
     order by prev.created_at desc
     limit 1), true);
end;
$$;
