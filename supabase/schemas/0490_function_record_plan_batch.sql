-- public.record_plan_batch(job, fencing_token, item_ids, body): a plan job's batch,
-- HubSpot's batch/read answer (text; private.publish_answer: for redirects the
-- worker's `{"results":[…]}` of its single reads, for HubDB rows the tables'
-- answers as an array) classifies each of the items still unread: not in the
-- results → `missing` (an error naming it that is not OBJECT_NOT_FOUND →
-- `invalid`, with HubSpot's message); HubSpot's update time differs from the
-- edit's base → `conflict` (HubSpot's values beside ours in `current`); the
-- patched fields already hold the targets → `unchanged`; else `ready`, with
-- HubSpot's values in `before` and its update time. Items already classified
-- are left alone (a batch sent again). Progress on the job (the items
-- classified), the job lease extended. Returns {ready, conflict, invalid,
-- unchanged, missing}. 55000 for anyone but the holder; 22023 / 22P02 for
-- ids not the job's or a malformed answer (nothing written). Parses before
-- it locks the job row. The service role only (the worker).
create function public.record_plan_batch(p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb := private.publish_answer(p_body);
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_counts jsonb;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['plan'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
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
    select i.id, r.item, er.error, private.hubspot_item_updated_at(r.item) as updated_at
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
      left join err er on er.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.plan_status is null
  ), classified as (
    update public.publish_items i
       set plan_status = case
             when s.item is null and s.error is not null and coalesce(s.error ->> 'category', '') <> 'OBJECT_NOT_FOUND' then 'invalid'
             when s.item is null then 'missing'
             when s.updated_at is distinct from i.base_updated_at then 'conflict'
             when private.patch_is_applied(s.item, i.after) then 'unchanged'
             else 'ready' end,
           plan_message = case
             when s.item is null and s.error is not null and coalesce(s.error ->> 'category', '') <> 'OBJECT_NOT_FOUND'
               then left(coalesce(s.error ->> 'message', s.error::text), 2000)
             when s.item is null then 'not in HubSpot (deleted or archived since the copy was fetched)'
             when s.updated_at is distinct from i.base_updated_at
               then format('changed in HubSpot since the edit''s base (updated %s, the edit is based on %s)',
                           coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                           to_char(i.base_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           before = case when s.item is not null and s.updated_at is not distinct from i.base_updated_at
                         then private.patch_fields_of(s.item, i.after) end,
           current = case when s.item is not null and s.updated_at is distinct from i.base_updated_at
                          then private.patch_fields_of(s.item, i.after) end,
           planned_updated_at = s.updated_at,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.plan_status
  )
  select jsonb_build_object(
           'ready', count(*) filter (where c.plan_status = 'ready'),
           'conflict', count(*) filter (where c.plan_status = 'conflict'),
           'invalid', count(*) filter (where c.plan_status = 'invalid'),
           'unchanged', count(*) filter (where c.plan_status = 'unchanged'),
           'missing', count(*) filter (where c.plan_status = 'missing'))
    into v_counts
    from classified c;
  perform private.advance_publish_job(v_job,
    (v_counts ->> 'ready')::integer + (v_counts ->> 'conflict')::integer + (v_counts ->> 'invalid')::integer
    + (v_counts ->> 'unchanged')::integer + (v_counts ->> 'missing')::integer);
  return v_counts;
end;
$$;
