-- public.record_restore_batch(job, fencing_token, item_ids, status, body): HubSpot's
-- answer to a restore job's write of a batch, as record_publish_batch reads
-- it: each result of an item being restored (`restoring`) → `restored` (its
-- answer, HubSpot's new update time, the copy updated), each error by its
-- context ids (or a whole-batch 4xx refusal) → `invalid` with HubSpot's
-- message; items in neither stay `restoring` for the next re-read. A
-- scheduled item's result is its draft written back: `restored`, the copy
-- left as it is (nothing live changed), its message saying that HubSpot
-- still publishes the draft at the plan's time, with the fields as they were
-- before (HubSpot has no way to cancel a schedule). Returns
-- {restored, invalid, restoring}. 55000 for anyone but the holder; 22023 /
-- 22P02 as record_publish_batch. The service role only (the worker).
create function public.record_restore_batch(
  p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_status integer, p_body text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb;
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_counts jsonb;
  v_ids text[];
  v_items jsonb[];
  v_publish_at timestamptz;
begin
  if p_status is null or not (p_status in (200, 207) or (p_status between 400 and 499 and p_status <> 429)) then
    raise exception 'record_restore_batch: HubSpot''s status must be 200, 207 or a 4xx refusal other than 429, got %', p_status
      using errcode = '22023';
  end if;
  v_answer := case when p_status in (200, 207) then private.publish_answer(p_body)
                   else private.publish_refusal(p_body) end;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['restore'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.publish_at into v_publish_at from public.publish_plans p where p.id = v_plan;
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), err as (
    select distinct on (k.key) k.key, e as error
      from jsonb_array_elements(v_answer -> 'errors') e
     cross join lateral jsonb_array_elements_text(
             case when jsonb_typeof(e #> '{context,ids}') = 'array' then e #> '{context,ids}' else '[]'::jsonb end) k(key)
     order by k.key
  ), seen as (
    select i.id, r.item, coalesce(er.error, v_answer -> 'refusal') as error
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
      left join err er on er.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.restore_outcome = 'restoring'
       and (r.item is not null or er.error is not null or v_answer ? 'refusal')
  ), recorded as (
    update public.publish_items i
       set restore_outcome = case when s.item is not null then 'restored' else 'invalid' end,
           restore_message = case
             when s.item is null then left(coalesce(s.error ->> 'message', s.error::text), 2000)
             when i.outcome = 'scheduled' then format(
               'its draft written back: HubSpot has no way to cancel a schedule, so it still publishes the draft at %s, with these fields as they were before',
               to_char(v_publish_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           restore_answer = coalesce(s.item, s.error),
           restored_updated_at = case when s.item is not null
                                      then coalesce(private.hubspot_item_updated_at(s.item), i.applied_updated_at) end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.hubspot_id, i.restore_outcome, i.outcome, s.item
  )
  select jsonb_build_object('restored', count(*) filter (where r.restore_outcome = 'restored'),
                            'invalid', count(*) filter (where r.restore_outcome = 'invalid')),
         array_agg(r.hubspot_id) filter (where r.restore_outcome = 'restored' and r.outcome = 'applied'),
         array_agg(r.item) filter (where r.restore_outcome = 'restored' and r.outcome = 'applied')
    into v_counts, v_ids, v_items
    from recorded r;
  perform private.write_published_copy(v_job, v_ids, v_items);
  perform private.advance_publish_job(v_job, (v_counts ->> 'restored')::integer + (v_counts ->> 'invalid')::integer);
  return v_counts || jsonb_build_object('restoring',
    (select count(*) from public.publish_items i where i.id = any (p_item_ids) and i.restore_outcome = 'restoring'));
end;
$$;
