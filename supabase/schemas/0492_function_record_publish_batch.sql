-- public.record_publish_batch(job, fencing_token, item_ids, status, body): HubSpot's
-- answer to a publish job's write of a batch (`p_status` 200 or 207 with
-- batch/update's body: results and errors per input; for HubDB rows,
-- redirects and drafts the worker's assembly of its requests' answers, as
-- private.publish_answer reads them). Each result of an item being written
-- (`writing`) → `applied`: its answer, HubSpot's new update time (T2), and
-- the copy updated (private.write_published_copy: the change feed lists it
-- as an update); in a plan of mode schedule → `scheduled` instead: the
-- result is its draft (T2 the draft's update time), nothing is live yet, so
-- the copy is left as it is (the first fetch after publish_at brings the
-- live item). Each error naming items by its context ids → `invalid` with
-- HubSpot's message. A whole-batch refusal (`p_status` 400-499 but 429,
-- HubSpot applied nothing) makes every sent item `invalid` with its message.
-- Items sent but in neither stay `writing`: the next re-read decides
-- (prepare_publish_batch); a `pending` answer naming one (the first step of
-- its write answered, the rest unknown) is kept in its `answer` for that
-- re-read to recognise HubSpot's values by. Returns {applied, scheduled,
-- invalid, writing}. 55000 for anyone but the holder; 22023 / 22P02 for ids
-- not the job's, another status or a malformed answer (nothing written). The
-- service role only (the worker).
create function public.record_publish_batch(
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
  v_scheduled boolean;
begin
  if p_status is null or not (p_status in (200, 207) or (p_status between 400 and 499 and p_status <> 429)) then
    raise exception 'record_publish_batch: HubSpot''s status must be 200, 207 or a 4xx refusal other than 429, got %', p_status
      using errcode = '22023';
  end if;
  v_answer := case when p_status in (200, 207) then private.publish_answer(p_body)
                   else private.publish_refusal(p_body) end;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.mode = 'schedule' into v_scheduled from public.publish_plans p where p.id = v_plan;
  -- The first step's answers of writes whose rest is unknown: kept for the next re-read.
  update public.publish_items i
     set answer = d.item, updated_at = now()
    from (select distinct on (x ->> 'id') x ->> 'id' as key, x as item
            from jsonb_array_elements(coalesce(v_answer -> 'pending', '[]'::jsonb)) x
           order by x ->> 'id') d
   where i.id = any (p_item_ids) and i.outcome = 'writing'
     and d.key = private.hubspot_object_id(i.content_type, i.hubspot_id);
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
     where i.id = any (p_item_ids) and i.outcome = 'writing'
       and (r.item is not null or er.error is not null or v_answer ? 'refusal')
  ), recorded as (
    update public.publish_items i
       set outcome = case when s.item is null then 'invalid' when v_scheduled then 'scheduled' else 'applied' end,
           outcome_message = case when s.item is null then left(coalesce(s.error ->> 'message', s.error::text), 2000) end,
           answer = coalesce(s.item, s.error),
           applied_updated_at = case when s.item is not null
                                     then coalesce(private.hubspot_item_updated_at(s.item), i.pre_updated_at) end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.hubspot_id, i.outcome, s.item
  )
  select jsonb_build_object('applied', count(*) filter (where r.outcome = 'applied'),
                            'scheduled', count(*) filter (where r.outcome = 'scheduled'),
                            'invalid', count(*) filter (where r.outcome = 'invalid')),
         array_agg(r.hubspot_id) filter (where r.outcome = 'applied'),
         array_agg(r.item) filter (where r.outcome = 'applied')
    into v_counts, v_ids, v_items
    from recorded r;
  perform private.write_published_copy(v_job, v_ids, v_items);
  perform private.advance_publish_job(v_job,
    (v_counts ->> 'applied')::integer + (v_counts ->> 'scheduled')::integer + (v_counts ->> 'invalid')::integer);
  return v_counts || jsonb_build_object('writing',
    (select count(*) from public.publish_items i where i.id = any (p_item_ids) and i.outcome = 'writing'));
end;
$$;
