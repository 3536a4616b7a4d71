-- private.compact_quiet_cycles(portal): once quiet_cycles_per_fold of the
-- portal's quiet cycles have gathered beyond its last keep_quiet_cycles
-- (private.retention_settings), folds them (at most 100 a call) into
-- public.quiet_cycles and deletes their runs, jobs with them; until then one
-- look at the portal's quiet runs, no write (docs/decisions/0053). Runs are
-- taken FOR UPDATE SKIP LOCKED: a run another settlement holds waits for the
-- next call; only the roll-up row is waited for. Called at settlement; owner only.
create function private.compact_quiet_cycles(p_portal_id uuid) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_keep integer;
  v_per_fold integer;
  v_folded integer;
begin
  select s.keep_quiet_cycles, s.quiet_cycles_per_fold into v_keep, v_per_fold from private.retention_settings s where s.id;
  v_keep := coalesce(v_keep, 3);
  if not exists (select 1 from public.runs r
                  where r.portal_id = p_portal_id and r.quiet
                  order by r.finished_at desc
                 offset v_keep + coalesce(v_per_fold, 1) - 1) then
    return 0;
  end if;
  with doomed as (
    select r.id from public.runs r
     where r.portal_id = p_portal_id and r.quiet
     order by r.finished_at desc
     offset v_keep limit 100
       for update skip locked
  ), checked as (
    -- The jobs as they were before this statement's delete cascades to them.
    select j.run_id, count(*)::integer as jobs, coalesce(sum((j.result ->> 'fetched')::bigint), 0)::bigint as items
      from public.jobs j join doomed d on d.id = j.run_id
     group by j.run_id
  ), gone as (
    delete from public.runs r using doomed d where r.id = d.id
    returning r.id, r.portal_id, r.owner_id, r.finished_at
  ), folded as (
    insert into public.quiet_cycles as q (portal_id, owner_id, day, cycles, jobs, items_checked, first_finished_at, last_finished_at)
    select g.portal_id, g.owner_id, (g.finished_at at time zone 'UTC')::date, count(*)::integer,
           coalesce(sum(c.jobs), 0)::integer, coalesce(sum(c.items), 0)::bigint, min(g.finished_at), max(g.finished_at)
      from gone g left join checked c on c.run_id = g.id
     group by g.portal_id, g.owner_id, (g.finished_at at time zone 'UTC')::date
     order by 3
    on conflict (portal_id, day) do update
       set cycles = q.cycles + excluded.cycles, jobs = q.jobs + excluded.jobs,
           items_checked = q.items_checked + excluded.items_checked,
           first_finished_at = least(q.first_finished_at, excluded.first_finished_at),
           last_finished_at = greatest(q.last_finished_at, excluded.last_finished_at)
  )
  select count(*)::integer into v_folded from gone;
  return v_folded;
end;
$$;
