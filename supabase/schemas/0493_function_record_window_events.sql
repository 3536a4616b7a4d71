-- public.record_window_events(job, fencing_token, body): a page of HubSpot's CMS
-- audit log (`{"results":[{objectId, objectType, event, timestamp, userId,
-- …}], …}`), read after a publish job's writes over the window
-- publish_job_context gives. First it learns who our writer is: an event on
-- an item the job wrote, stamped exactly at the item's update time after our
-- write (T2, applied_updated_at), is our write's own; its userId is kept
-- (`writer_user_id`). Then each item the job wrote and HubSpot took
-- (`applied`, `scheduled`, writes >= 1) with an event on it (its object id;
-- a HubDB row's table; of the job's type's objectType, private.audit_object_type,
-- when the event names one) whose time is strictly between the pre-image's
-- update time (T0) and ours (T2) — an edit that landed in the window between
-- the batch's re-read and our write, which HubSpot gave no way to refuse —
-- becomes `overwritten`, the events kept in `overwritten_by` (an item already
-- overwritten adds them). In a plan of mode `draft` or `schedule`, our own
-- draft PATCH lands inside that window (so does a retried one): an event by
-- one of the job's writers (the userIds learned above, on this page or an
-- earlier one) is ours, not another's. The worker reads the log newest first,
-- so the event at our latest write comes first. Returns how many items it
-- newly marked. 55000 for anyone but the holder; 22004 / 22P02 / 22023 for a
-- missing, invalid or result-less body. The service role only (the worker).
create function public.record_window_events(p_job_id bigint, p_fencing_token bigint, p_body text)
returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_body jsonb;
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_type text;
  v_drafts boolean;
  v_writers text[];
  v_events jsonb;
  v_marked integer;
begin
  if p_body is null then
    raise exception 'record_window_events: the audit log page is required' using errcode = '22004';
  end if;
  if not pg_input_is_valid(p_body, 'jsonb') then
    raise exception 'record_window_events: the audit log page is not valid JSON' using errcode = '22P02';
  end if;
  v_body := p_body::jsonb;
  if jsonb_typeof(v_body) <> 'object' or coalesce(jsonb_typeof(v_body -> 'results'), '') <> 'array' then
    raise exception 'record_window_events: the audit log page must be an object with a results array' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  v_type := private.audit_object_type(v_job.content_type);
  select p.mode in ('draft', 'schedule') into v_drafts from public.publish_plans p where p.id = v_plan;
  -- The page's events of the job's type, parsed once: the event, its object, user and time (ISO, or epoch milliseconds).
  select coalesce(jsonb_agg(jsonb_build_object('e', e, 'object_id', e ->> 'objectId', 'user_id', e ->> 'userId', 'at',
           case when jsonb_typeof(e -> 'timestamp') = 'number' then timestamptz 'epoch' + (e ->> 'timestamp')::numeric * interval '1 millisecond'
                when jsonb_typeof(e -> 'timestamp') = 'string' and pg_input_is_valid(e ->> 'timestamp', 'timestamptz')
                  then (e ->> 'timestamp')::timestamptz end)), '[]'::jsonb)
    into v_events
    from jsonb_array_elements(v_body -> 'results') e
   where jsonb_typeof(e) = 'object' and e ? 'objectId'
     and (e ->> 'objectType' is null or v_type is null or e ->> 'objectType' = v_type);
  -- Our write's own event: on the item, at its T2.
  update public.publish_items i
     set writer_user_id = ev.user_id, updated_at = now()
    from jsonb_to_recordset(v_events) as ev(e jsonb, object_id text, user_id text, at timestamptz)
   where i.plan_id = v_plan and i.content_type = v_job.content_type
     and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1 and i.writer_user_id is null
     and ev.user_id is not null and ev.at = i.applied_updated_at
     and ev.object_id = private.hubspot_object_id(i.content_type, i.hubspot_id);
  if v_drafts then
    select array_agg(distinct i.writer_user_id) into v_writers
      from public.publish_items i
     where i.plan_id = v_plan and i.content_type = v_job.content_type and i.writer_user_id is not null;
  end if;
  with hits as (
    select i.id, i.outcome as was, jsonb_agg(ev.e order by ev.at) as found
      from public.publish_items i
      join jsonb_to_recordset(v_events) as ev(e jsonb, object_id text, user_id text, at timestamptz)
        on ev.object_id = case when i.content_type = 'hubdb_rows' then split_part(i.hubspot_id, ':', 1) else i.hubspot_id end
     where i.plan_id = v_plan and i.content_type = v_job.content_type
       and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1
       and ev.at > i.pre_updated_at and ev.at < i.applied_updated_at
       and not (v_drafts and coalesce(ev.user_id = any (coalesce(v_writers, '{}')), false))
     group by i.id, i.outcome
  ), marked as (
    update public.publish_items i
       set outcome = 'overwritten',
           overwritten_by = case when i.overwritten_by is null then h.found
                                 else i.overwritten_by || (select coalesce(jsonb_agg(x), '[]'::jsonb) from jsonb_array_elements(h.found) x
                                                           where not i.overwritten_by @> jsonb_build_array(x)) end,
           updated_at = now()
      from hits h
     where i.id = h.id
    returning h.was
  )
  select count(*) filter (where m.was <> 'overwritten') into v_marked from marked m;
  return v_marked;
end;
$$;
