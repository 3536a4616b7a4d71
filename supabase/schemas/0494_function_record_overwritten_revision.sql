-- public.record_overwritten_revision(job, fencing_token, item, revision): the
-- revision to restore for an item of the publish job found `overwritten`
-- (HubSpot's revision of the foreign edit our write overwrote, from the
-- item's revisions). True when recorded; false when the item is not
-- overwritten. 55000 for anyone but the holder; 22023 for an item not the
-- job's or a revision id not 1-100 characters. The service role only (the worker).
create function public.record_overwritten_revision(p_job_id bigint, p_fencing_token bigint, p_item_id bigint, p_revision_id text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  if p_revision_id is null or char_length(p_revision_id) not between 1 and 100 then
    raise exception 'record_overwritten_revision: a revision id is 1-100 characters' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, array[p_item_id]);
  update public.publish_items i
     set overwritten_revision_id = p_revision_id, updated_at = now()
   where i.id = p_item_id and i.outcome = 'overwritten';
  return found;
end;
$$;
