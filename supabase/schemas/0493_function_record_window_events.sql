-- public.record_window_events(job, token, body): a page of HubSpot's CMS
-- audit log (`{"results":[{objectId, objectType, event, timestamp, …}], …}`)
-- read after a publish job's writes: each item the job wrote and HubSpot
-- applied (`applied`, writes >= 1) with an event on it (its object id; a HubDB
-- row's table; the job's type's objectType when the event names one) whose
-- time is strictly between the pre-image's update time (T0) and ours (T2) —
-- a foreign edit that landed in the window between the batch's re-read and
-- our write, which HubSpot gave no way to refuse — becomes `overwritten`, the
-- events kept in `overwritten_by` (an item already overwritten adds them).
-- Returns how many items it newly marked. 55000 for anyone but the holder;
-- 22004 / 22P02 / 22023 for a missing, invalid or result-less body. The
-- service role only (the worker).
create function public.record_window_events(p_job_id bigint, p_token bigint, p_body text)
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
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  -- The audit log's objectType of the job's type (PublicAuditLog's enum; blog authors and tags have none).
  v_type := case v_job.content_type when 'site_pages' then 'WEBSITE_PAGE' when 'landing_pages' then 'LANDING_PAGE'
                                    when 'blog_posts' then 'BLOG_POST' when 'hubdb_rows' then 'HUBDB_TABLE'
                                    when 'url_redirects' then 'URL_MAPPING' end;
  with events as (
    select e, e ->> 'objectId' as object_id,
           case when jsonb_typeof(e -> 'timestamp') = 'number' then to_timestamp((e ->> 'timestamp')::numeric / 1000)
                when jsonb_typeof(e -> 'timestamp') = 'string' and pg_input_is_valid(e ->> 'timestamp', 'timestamptz')
                  then (e ->> 'timestamp')::timestamptz end as at
      from jsonb_array_elements(v_body -> 'results') e
     where jsonb_typeof(e) = 'object' and e ? 'objectId'
       and (e ->> 'objectType' is null or v_type is null or e ->> 'objectType' = v_type)
  ), hits as (
    select i.id, i.outcome as was, jsonb_agg(ev.e order by ev.at) as found
      from public.publish_items i
      join events ev on ev.object_id = case when i.content_type = 'hubdb_rows' then split_part(i.hubspot_id, ':', 1) else i.hubspot_id end
     where i.plan_id = v_plan and i.content_type = v_job.content_type
       and i.outcome in ('applied', 'overwritten') and i.writes >= 1
       and ev.at > i.pre_updated_at and ev.at < i.applied_updated_at
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
  select count(*) filter (where m.was = 'applied') into v_marked from marked m;
  return v_marked;
end;
$$;
