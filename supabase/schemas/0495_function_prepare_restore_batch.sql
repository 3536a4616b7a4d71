-- public.prepare_restore_batch(job, fencing_token, item_ids, body): a restore job's
-- re-read of a batch of applied (or scheduled) items (HubSpot's batch/read
-- answer, as record_plan_batch takes it), just before it writes their
-- pre-images back: the patched fields' values in the pre-image (sparse).
-- An applied item never sent (restore_writes 0): gone from HubSpot or its
-- update time no longer ours (T2, applied_updated_at) → restore `conflict`
-- (changed in HubSpot since our write: listed with HubSpot's values in
-- `current`, never overwritten); the pre-image's values already there →
-- `restored` (no write); else `restoring`. Sent before: those values there
-- and HubSpot's update time past T2 → `restored` (its own earlier write; the
-- copy updated); the update time still T2 → to write again; anything else →
-- `conflict`. A scheduled item (mode schedule: our edit is in its draft,
-- which HubSpot publishes at the plan's publish_at; HubSpot has no way to
-- cancel a schedule): still not live (the live update time is T0) → its
-- draft is written back (`draft` true: the pre-image's values PATCHed into
-- the draft, again on a retry), and the schedule then publishes the fields
-- as they were; gone live by its schedule (update time at or after
-- publish_at, the targets there) → it is `applied` now (T2 and the answer:
-- the live item) and restored as any applied item; the schedule published a
-- draft we had written back (sent before, the pre-image's values there) →
-- `restored`; anything else → `conflict`. Returns the items to write now
-- (id order) with the values to write and whether to write the draft, each
-- counted (`restore_writes` + 1) in this transaction, before it is sent.
-- Progress: the items settled. 55000 for anyone but the holder; 22023 /
-- 22P02 as prepare_publish_batch. The service role only (the worker).
create function public.prepare_restore_batch(p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text)
returns table (item_id bigint, hubspot_id text, before jsonb, draft boolean)
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
  v_drafts bigint[];
  v_publish_at timestamptz;
  v_own_ids text[];
  v_own_items jsonb[];
  v_settled integer;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['restore'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.publish_at into v_publish_at from public.publish_plans p where p.id = v_plan;
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), seen as (
    select i.id, r.item, private.hubspot_item_updated_at(r.item) as updated_at,
           case when r.item is null then 'conflict'
                when i.outcome = 'scheduled' then
                  case when private.hubspot_item_updated_at(r.item) = i.pre_updated_at then 'draft'
                       when private.hubspot_item_updated_at(r.item) >= v_publish_at
                            and private.patch_is_applied(r.item, i.after) then 'gone_live'
                       when private.hubspot_item_updated_at(r.item) >= v_publish_at and i.restore_writes > 0
                            and private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after)) then 'restored'
                       else 'conflict' end
                when i.restore_writes = 0 then
                  case when private.hubspot_item_updated_at(r.item) is distinct from i.applied_updated_at then 'conflict'
                       when private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after)) then 'restored'
                       else 'write' end
                else
                  case when private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after))
                            and private.hubspot_item_updated_at(r.item) > i.applied_updated_at then 'restored'
                       when private.hubspot_item_updated_at(r.item) = i.applied_updated_at then 'write'
                       else 'conflict' end
           end as decision
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.outcome in ('applied', 'scheduled')
       and (i.restore_outcome is null or i.restore_outcome in ('restoring', 'failed'))
  ), decided as (
    update public.publish_items i
       set restore_outcome = case when s.decision in ('write', 'draft', 'gone_live') then 'restoring' else s.decision end,
           restore_message = case
             when s.decision <> 'conflict' then null
             when s.item is null then 'deleted in HubSpot since our write (not restored)'
             when i.outcome = 'scheduled' then
               format('changed in HubSpot since our schedule (updated %s, before our write %s, publishing at %s): not restored',
                      coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                      to_char(i.pre_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                      to_char(v_publish_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
             else format('changed in HubSpot since our write (updated %s, our write %s): not restored',
                         coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                         to_char(i.applied_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           -- Gone live by its schedule: applied now, at the time HubSpot published it.
           outcome = case when s.decision = 'gone_live' then 'applied' else i.outcome end,
           applied_updated_at = case when s.decision = 'gone_live' then s.updated_at else i.applied_updated_at end,
           answer = case when s.decision = 'gone_live' then s.item else i.answer end,
           current = case when s.decision = 'conflict' and s.item is not null then private.patch_fields_of(s.item, i.after) else i.current end,
           restored_updated_at = case when s.decision = 'restored' then s.updated_at else i.restored_updated_at end,
           restore_answer = case when s.decision = 'restored' then s.item else i.restore_answer end,
           restore_writes = i.restore_writes + case when s.decision in ('write', 'draft', 'gone_live') then 1 else 0 end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.id, i.hubspot_id, s.decision, s.item, i.restore_writes
  )
  select array_agg(d.id order by d.id) filter (where d.decision in ('write', 'draft', 'gone_live')),
         array_agg(d.id) filter (where d.decision = 'draft'),
         array_agg(d.hubspot_id) filter (where d.decision = 'restored' and d.restore_writes > 0),
         array_agg(d.item) filter (where d.decision = 'restored' and d.restore_writes > 0),
         count(*) filter (where d.decision not in ('write', 'draft', 'gone_live'))
    into v_write, v_drafts, v_own_ids, v_own_items, v_settled
    from decided d;
  perform private.write_published_copy(v_job, v_own_ids, v_own_items);
  perform private.advance_publish_job(v_job, coalesce(v_settled, 0));
  return query
    select i.id, i.hubspot_id, private.patch_fields_of(i.pre_image, i.after), i.id = any (coalesce(v_drafts, '{}'))
      from public.publish_items i
     where i.id = any (coalesce(v_write, '{}')) order by i.id;
end;
$$;
