-- private.check_job_items(job, plan, ids): refuses (22023, nothing written) a
-- batch that is not 1 to 1000 ids of items of the job's plan and content
-- type. For the publish holder functions; owner only.
create function private.check_job_items(p_job public.jobs, p_plan_id uuid, p_item_ids bigint[]) returns void
language plpgsql
stable
set search_path = ''
as $$
declare
  v_stray bigint;
begin
  if p_item_ids is null or cardinality(p_item_ids) not between 1 and 1000 or array_position(p_item_ids, null) is not null then
    raise exception 'a batch is 1 to 1000 item ids' using errcode = '22023';
  end if;
  select u.id into v_stray from unnest(p_item_ids) u(id)
   where not exists (select 1 from public.publish_items i
                      where i.id = u.id and i.plan_id = p_plan_id and i.content_type = p_job.content_type)
   limit 1;
  if v_stray is not null then
    raise exception 'item % is not one of job %''s (its plan''s %)', v_stray, p_job.id, p_job.content_type using errcode = '22023';
  end if;
end;
$$;
