-- public.prepare_publish_batch(job, fencing_token, item_ids, body, read_at): a
-- publish job's re-read of a batch (HubSpot's batch/read answer, as
-- record_plan_batch takes it), just before its write. Per item never sent
-- (writes 0): gone from HubSpot or its update time no longer the plan's →
-- `conflict` (HubSpot's values in `current`, never written); the targets
-- already there → `unchanged` (no write); else `writing`, with the whole item
-- as its pre-image, its update time (T0) and the re-read's time on HubSpot's
-- clock (`reread_at`: the earliest `startedAt` of the answer, or `p_read_at`
-- when earlier or the answer has none, as a redirect's GET: its Date header),
-- where the item's window starts. Per item sent before (a batch cut off after
-- its write was counted, or an earlier attempt's): the targets there (or the
-- values of HubSpot's answer to that write's first step, kept while the rest
-- was lost: a value HubSpot normalised, a lowercased slug, is recognised)
-- and HubSpot's update time past T0 → `applied` (its own earlier write: never
-- a conflict, not written again; the copy updated); the update time still T0
-- → to write again (HubSpot never applied it); anything else → `conflict`.
-- Returns the items to write now, in id order, and counts each one's write
-- (`writes` + 1) in this transaction, before the worker sends it. Items
-- already settled are left alone. Progress: the items settled. 55000 for
-- anyone but the holder; 22023 / 22P02 for ids not the job's or a malformed
-- answer (nothing written). The service role only (the worker).
create function public.prepare_publish_batch(
  p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text, p_read_at timestamptz default null
)
returns table (item_id bigint, hubspot_id text, after jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb := private.publish_answer(p_body);
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_write bigint[];
  v_own_ids text[];
  v_own_items jsonb[];
  v_settled integer;
  v_read_at timestamptz := least(p_read_at, (v_answer ->> 'read_at')::timestamptz);
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), seen as (
    select i.id, r.item, private.hubspot_item_updated_at(r.item) as updated_at,
           case when i.writes = 0 then
                  case when r.item is null then 'conflict'
                       when private.hubspot_item_updated_at(r.item) is distinct from i.planned_updated_at then 'conflict'
                       when private.patch_is_applied(r.item, i.after) then 'unchanged'
                       else 'write' end
                else
                  case when r.item is null then 'conflict'
                       when (private.patch_is_applied(r.item, i.after)
                             or (jsonb_typeof(i.answer) = 'object'
                                 and private.patch_is_applied(r.item, private.patch_fields_of(i.answer, i.after))))
                            and private.hubspot_item_updated_at(r.item) > i.pre_updated_at then 'applied'
                       when private.hubspot_item_updated_at(r.item) = i.pre_updated_at then 'write'
                       else 'conflict' end
           end as decision
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.plan_status = 'ready' and (i.outcome is null or i.outcome in ('writing', 'failed'))
  ), decided as (
    update public.publish_items i
       set outcome = case s.decision when 'write' then 'writing' else s.decision end,
           outcome_message = case
             when s.decision <> 'conflict' then null
             when s.item is null then 'deleted in HubSpot since the plan (not written)'
             when i.writes = 0 then format('changed in HubSpot since the plan (updated %s, the plan read %s): not written',
                                           coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                                           coalesce(to_char(i.planned_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'))
             else format('changed in HubSpot while our write was in flight (updated %s, before our write %s): not written again',
                         coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                         to_char(i.pre_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           current = case when s.decision = 'conflict' and s.item is not null then private.patch_fields_of(s.item, i.after) else i.current end,
           pre_image = case when s.decision = 'write' and i.writes = 0 then s.item else i.pre_image end,
           pre_updated_at = case when s.decision = 'write' and i.writes = 0 then s.updated_at else i.pre_updated_at end,
           reread_at = case when s.decision = 'write' then coalesce(i.reread_at, v_read_at) else i.reread_at end,
           applied_updated_at = case when s.decision = 'applied' then s.updated_at else i.applied_updated_at end,
           answer = case when s.decision = 'applied' then s.item else i.answer end,
           writes = i.writes + case when s.decision = 'write' then 1 else 0 end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.id, i.hubspot_id, s.decision, s.item
  )
  select array_agg(d.id order by d.id) filter (where d.decision = 'write'),
         array_agg(d.hubspot_id) filter (where d.decision = 'applied'),
         array_agg(d.item) filter (where d.decision = 'applied'),
         count(*) filter (where d.decision <> 'write')
    into v_write, v_own_ids, v_own_items, v_settled
    from decided d;
  perform private.write_published_copy(v_job, v_own_ids, v_own_items);
  perform private.advance_publish_job(v_job, coalesce(v_settled, 0));
  return query
    select i.id, i.hubspot_id, i.after from public.publish_items i
     where i.id = any (coalesce(v_write, '{}')) order by i.id;
end;
$$;
