-- public.next_publish_items(job, fencing_token, limit): the next items (at most
-- limit, 1-1000) the holder's job still has to handle, in id order, of its
-- plan and content type: a plan job's items not read yet (plan_status null);
-- a publish job's ready items without an outcome, being written (`writing`:
-- a batch cut off after its write was counted) or failed by an earlier
-- attempt of the job (an operator's retry_job); a restore job's applied (or
-- scheduled) items without a restore outcome, being restored, or failed
-- before. `state` is the
-- phase's own (outcome or restore_outcome). Raises 55000 for anyone but the
-- holder. Reads only, no locks. The service role only (the worker).
create function public.next_publish_items(p_job_id bigint, p_fencing_token bigint, p_limit integer)
returns table (item_id bigint, hubspot_id text, after jsonb, before jsonb, state text, writes integer)
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
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception 'next_publish_items: limit must be between 1 and 1000' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['plan', 'publish', 'restore'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  if v_job.kind = 'plan' then
    return query
      select i.id, i.hubspot_id, i.after, i.before, i.plan_status, i.writes from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type and i.plan_status is null
       order by i.id limit p_limit;
  elsif v_job.kind = 'publish' then
    return query
      select i.id, i.hubspot_id, i.after, i.before, i.outcome, i.writes from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type
         and i.plan_status = 'ready' and (i.outcome is null or i.outcome in ('writing', 'failed'))
       order by i.id limit p_limit;
  else
    return query
      select i.id, i.hubspot_id, i.after, private.patch_fields_of(i.pre_image, i.after), i.restore_outcome, i.restore_writes
        from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type
         and i.outcome in ('applied', 'scheduled') and (i.restore_outcome is null or i.restore_outcome in ('restoring', 'failed'))
       order by i.id limit p_limit;
  end if;
end;
$$;
