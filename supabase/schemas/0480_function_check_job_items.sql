-- private.check_job_items(job, plan, ids): refuses (22023, nothing written) a
-- batch that is not 1 to 1000 ids of items of the job's plan and content
-- type. Each id is one probe of the primary key: a plan's items of one type
-- can be thousands, and a fresh plan has no statistics yet (an anti join over
-- them scanned the type's items once per id; a hash join, the whole table).
-- For the publish holder functions; owner only.
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
  -- LIMIT 1 in the lateral lookup keeps it a probe per id (as save_page's lookup): never a join over the table.
  select u.id into v_stray from unnest(p_item_ids) u(id)
    left join lateral (select i.plan_id, i.content_type from public.publish_items i where i.id = u.id limit 1) i on true
   where i.plan_id is distinct from p_plan_id or i.content_type is distinct from p_job.content_type
   limit 1;
  if v_stray is not null then
    raise exception 'item % is not one of job %''s (its plan''s %)', v_stray, p_job.id, p_job.content_type using errcode = '22023';
  end if;
end;
$$;
