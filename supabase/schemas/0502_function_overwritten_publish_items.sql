-- public.overwritten_publish_items(job, fencing_token): the holder's publish job's
-- items found `overwritten` in their window (record_window_events) whose
-- revision to restore is not recorded yet, in id order: item id, HubSpot id,
-- the pre-image's update time (T0) and ours (T2), between which the worker
-- looks for that revision (record_overwritten_revision). Reads only, no
-- locks. 55000 for anyone but the holder; 22023 for a job of another kind.
-- The service role only (the worker). docs/publish.md.
create function public.overwritten_publish_items(p_job_id bigint, p_fencing_token bigint)
returns table (item_id bigint, hubspot_id text, pre_updated_at timestamptz, applied_updated_at timestamptz)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  return query
    select i.id, i.hubspot_id, i.pre_updated_at, i.applied_updated_at
      from public.publish_items i
     where i.plan_id = v_plan and i.content_type = v_job.content_type
       and i.outcome = 'overwritten' and i.overwritten_revision_id is null
     order by i.id;
end;
$$;
