-- public.discard_publish_plan(plan, user): the user drops their plan that was
-- never approved (ready or failed): `discarded`, its edits pending again
-- (private.return_plan_edits). False when it was discarded already; P0002
-- when it is not the user's; 55000 while it is being made (hint planning:
-- stop its run first) or once approved (hint already_approved). Locks the plan
-- row FOR UPDATE. The service role only (the orchestrator).
create function public.discard_publish_plan(p_plan_id uuid, p_user uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_status text;
begin
  if p_plan_id is null or p_user is null then
    raise exception 'discard_publish_plan: plan and user are required' using errcode = '22004';
  end if;
  select p.status into v_status from public.publish_plans p where p.id = p_plan_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'discard_publish_plan: plan % not found', p_plan_id using errcode = 'P0002';
  end if;
  if v_status = 'discarded' then
    return false;
  end if;
  if v_status = 'planning' then
    raise exception 'discard_publish_plan: the plan is still being made: stop its run first' using errcode = '55000', hint = 'planning';
  end if;
  if v_status = 'approved' then
    raise exception 'discard_publish_plan: the plan is approved: roll its publish run back instead' using errcode = '55000', hint = 'already_approved';
  end if;
  update public.publish_plans p set status = 'discarded' where p.id = p_plan_id;
  perform private.return_plan_edits(p_plan_id);
  return true;
end;
$$;
