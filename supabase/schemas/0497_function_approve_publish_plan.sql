-- public.approve_publish_plan(plan, user): the user approves their plan by its
-- id: its publish run is created (kind publish, one job per content type
-- with ready items, totals = its ready items per type) and the plan becomes
-- `approved` (approved_by, approved_at, publish_run_id). Refuses, nothing
-- changed: a plan that is not the user's (P0002, as if it did not exist);
-- approved already (55000, hint already_approved: twice makes one run), not
-- ready (hint not_ready: still planning, failed or discarded), stale (now()
-- past fresh_until, hint stale: plan again), with no ready item (hint
-- nothing_ready), of a disconnected portal (hint disconnected); a publish or
-- restore of the portal still running for one of its types (55006, hint
-- busy). Locks the plan row FOR UPDATE (concurrent approvals queue on it).
-- The service role only (the orchestrator, for the signed-in user).
create function public.approve_publish_plan(p_plan_id uuid, p_user uuid) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_types text[];
  v_totals integer[];
  v_run record;
begin
  if p_plan_id is null or p_user is null then
    raise exception 'approve_publish_plan: plan and user are required' using errcode = '22004';
  end if;
  select * into v_plan from public.publish_plans p where p.id = p_plan_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'approve_publish_plan: plan % not found', p_plan_id using errcode = 'P0002';
  end if;
  if v_plan.status = 'approved' then
    raise exception 'approve_publish_plan: the plan is approved already (its publish run: %)', v_plan.publish_run_id
      using errcode = '55000', hint = 'already_approved';
  end if;
  if v_plan.status <> 'ready' then
    raise exception 'approve_publish_plan: the plan is %, not ready', v_plan.status using errcode = '55000', hint = 'not_ready';
  end if;
  if now() > v_plan.fresh_until then
    raise exception 'approve_publish_plan: the plan is stale (approvable until %): plan again', v_plan.fresh_until
      using errcode = '55000', hint = 'stale';
  end if;
  if exists (select 1 from public.portals p where p.id = v_plan.portal_id and p.disconnected_at is not null) then
    raise exception 'approve_publish_plan: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select array_agg(t.content_type order by t.content_type), array_agg(t.n order by t.content_type)
    into v_types, v_totals
    from (select i.content_type, count(*)::integer as n from public.publish_items i
           where i.plan_id = p_plan_id and i.plan_status = 'ready' group by i.content_type) t;
  if v_types is null then
    raise exception 'approve_publish_plan: the plan has no item to publish (every one is a conflict, unchanged, missing or invalid)'
      using errcode = '55000', hint = 'nothing_ready';
  end if;
  if exists (select 1 from public.runs r
              where r.portal_id = v_plan.portal_id and r.kind in ('publish', 'restore') and r.status in ('pending', 'running')
                and r.content_types && v_types) then
    raise exception 'approve_publish_plan: a publish or restore of this portal is still running for one of these types: approve when it ends'
      using errcode = '55006', hint = 'busy';
  end if;
  select * into v_run from public.create_run(v_plan.portal_id, p_user, 'publish', v_types, v_totals);
  if v_run.run_id is null or cardinality(v_run.duplicate_types) > 0 then
    raise exception 'approve_publish_plan: a publish of this portal is still running for %: approve when it ends',
      array_to_string(v_run.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set status = 'approved', approved_by = p_user, approved_at = now(), publish_run_id = v_run.run_id
   where p.id = p_plan_id;
  return v_run.run_id;
end;
$$;
