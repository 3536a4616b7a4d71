-- private.settle_publish_run(run): what a finished plan, publish or restore
-- run's settlement adds (settle_finished_run calls it first, holding the
-- run's lock); returns the run row as it now stands. A plan run settles its
-- plan (still `planning`): `ready` when the run completed, approvable until
-- its end plus private.publish_settings.plan_fresh_minutes (fresh_until),
-- else `failed`, its edits pending again (private.return_plan_edits); the
-- counts per plan status kept. A publish or restore run first fails the items
-- left without a final outcome (private.fail_publish_items), then settles by
-- its items, not its jobs: every item applied, scheduled, unchanged or
-- overwritten (restore: restored) → `completed`, some → `partially_failed`, none →
-- `failed`; a stopped run stays `stopped`. Owner only. docs/publish.md.
create function private.settle_publish_run(p_run public.runs) returns public.runs
language plpgsql
set search_path = ''
as $$
declare
  v_plan uuid;
  v_status text;
  v_total integer;
  v_good integer;
  v_run public.runs;
begin
  if p_run.kind = 'plan' then
    update public.publish_plans p
       set status = case when p_run.status = 'completed' then 'ready' else 'failed' end,
           planned_at = p_run.finished_at,
           fresh_until = case when p_run.status = 'completed'
                              then p_run.finished_at + make_interval(mins => (select s.plan_fresh_minutes from private.publish_settings s where s.id)) end,
           items_ready = c.ready, items_conflict = c.conflict, items_invalid = c.invalid,
           items_unchanged = c.unchanged, items_missing = c.missing
      from (select count(*) filter (where i.plan_status = 'ready')::integer as ready,
                   count(*) filter (where i.plan_status = 'conflict')::integer as conflict,
                   count(*) filter (where i.plan_status = 'invalid')::integer as invalid,
                   count(*) filter (where i.plan_status = 'unchanged')::integer as unchanged,
                   count(*) filter (where i.plan_status = 'missing')::integer as missing
              from public.publish_items i
              join public.publish_plans p0 on p0.id = i.plan_id
             where p0.plan_run_id = p_run.id) c
     where p.plan_run_id = p_run.id and p.status = 'planning'
    returning p.id, p.status into v_plan, v_status;
    if v_status = 'failed' then
      perform private.return_plan_edits(v_plan);
    end if;
    return p_run;
  end if;
  if p_run.kind not in ('publish', 'restore') then
    return p_run;
  end if;
  perform private.fail_publish_items(p_run.id, true);
  if p_run.kind = 'publish' then
    select count(*), count(*) filter (where i.outcome in ('applied', 'scheduled', 'unchanged', 'overwritten'))
      into v_total, v_good
      from public.publish_plans p join public.publish_items i on i.plan_id = p.id
     where p.publish_run_id = p_run.id and i.plan_status = 'ready';
  else
    select count(*), count(*) filter (where i.restore_outcome = 'restored')
      into v_total, v_good
      from public.publish_plans p join public.publish_items i on i.plan_id = p.id
     where p.restore_run_id = p_run.id and i.outcome in ('applied', 'scheduled');
  end if;
  if p_run.status = 'stopped' or v_total = 0 then
    return p_run;
  end if;
  v_status := case when v_good = v_total then 'completed' when v_good = 0 then 'failed' else 'partially_failed' end;
  if v_status = p_run.status then
    return p_run;
  end if;
  update public.runs r set status = v_status where r.id = p_run.id returning r.* into v_run;
  return v_run;
end;
$$;
