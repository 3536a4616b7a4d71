-- public.rollback_publish_run(run, user): the user rolls back their finished
-- publish run: a restore run (kind restore, one job per content type with
-- applied or scheduled items, totals = those items) writes each applied
-- item's pre-image back under the same conflict rule, and each scheduled
-- one's into its draft while it is not live yet (prepare_restore_batch); the
-- plan records restored_by, restored_at, restore_run_id. Items overwritten
-- in the window are not restored (their revision is listed instead), nor
-- unchanged, conflicting or failed ones. Refuses, nothing changed: a run that
-- is not the user's publish run (P0002); not finished (55000, hint running);
-- rolled back already (hint already_rolled_back); nothing applied (hint
-- nothing_applied); a disconnected portal (hint disconnected); a publish or
-- restore of the portal running for one of its types (55006, hint busy).
-- Locks the plan row FOR UPDATE. The service role only (the orchestrator).
create function public.rollback_publish_run(p_run_id uuid, p_user uuid) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_run public.runs;
  v_types text[];
  v_totals integer[];
  v_created record;
begin
  if p_run_id is null or p_user is null then
    raise exception 'rollback_publish_run: run and user are required' using errcode = '22004';
  end if;
  select * into v_plan from public.publish_plans p where p.publish_run_id = p_run_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'rollback_publish_run: publish run % not found', p_run_id using errcode = 'P0002';
  end if;
  select * into v_run from public.runs r where r.id = p_run_id;
  if v_run.finished_at is null then
    raise exception 'rollback_publish_run: the publish run is still running: stop it or wait for it' using errcode = '55000', hint = 'running';
  end if;
  if v_plan.restore_run_id is not null or v_plan.restored_at is not null then
    raise exception 'rollback_publish_run: the run was rolled back already (restore run %)', v_plan.restore_run_id
      using errcode = '55000', hint = 'already_rolled_back';
  end if;
  if exists (select 1 from public.portals p where p.id = v_plan.portal_id and p.disconnected_at is not null) then
    raise exception 'rollback_publish_run: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select array_agg(t.content_type order by t.content_type), array_agg(t.n order by t.content_type)
    into v_types, v_totals
    from (select i.content_type, count(*)::integer as n from public.publish_items i
           where i.plan_id = v_plan.id and i.outcome in ('applied', 'scheduled') group by i.content_type) t;
  if v_types is null then
    raise exception 'rollback_publish_run: the run applied nothing to roll back' using errcode = '55000', hint = 'nothing_applied';
  end if;
  if exists (select 1 from public.runs r
              where r.portal_id = v_plan.portal_id and r.kind in ('publish', 'restore') and r.status in ('pending', 'running')
                and r.content_types && v_types) then
    raise exception 'rollback_publish_run: a publish or restore of this portal is still running for one of these types: roll back when it ends'
      using errcode = '55006', hint = 'busy';
  end if;
  select * into v_created from public.create_run(v_plan.portal_id, p_user, 'restore', v_types, v_totals);
  if v_created.run_id is null or cardinality(v_created.duplicate_types) > 0 then
    raise exception 'rollback_publish_run: a restore of this portal is still running for %: roll back when it ends',
      array_to_string(v_created.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set restored_by = p_user, restored_at = now(), restore_run_id = v_created.run_id
   where p.id = v_plan.id;
  return v_created.run_id;
end;
$$;
