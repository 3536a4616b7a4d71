-- private.publish_holder(job, fencing_token, kinds, lock): the fence of every publish
-- holder call, as 0341-0348 fence theirs: the job is running with this
-- fencing token and an unexpired job lease, else 55000 (nothing written); a
-- job of another kind is 22023; a job whose run has no plan P0002. Returns
-- the job row (locked FOR UPDATE when p_lock: the caller writes) and its plan
-- (publish_plans by the run of the job's kind). For the publish holder
-- functions; owner only.
create function private.publish_holder(p_job_id bigint, p_fencing_token bigint, p_kinds text[], p_lock boolean)
returns table (job public.jobs, plan_id uuid)
language plpgsql
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_plan uuid;
begin
  if p_job_id is null or p_fencing_token is null then
    raise exception 'job id and fencing token are required' using errcode = '22004';
  end if;
  if p_lock then
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       for update;
  else
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now();
  end if;
  if v_job.id is null then
    raise exception 'job % is not held with this fencing token (stop working on it)', p_job_id using errcode = '55000';
  end if;
  if v_job.kind <> all (p_kinds) then
    raise exception 'job % is a % job, not a % job', p_job_id, v_job.kind, array_to_string(p_kinds, ' or ') using errcode = '22023';
  end if;
  select p.id into v_plan from public.publish_plans p
   where case v_job.kind when 'plan' then p.plan_run_id when 'publish' then p.publish_run_id else p.restore_run_id end = v_job.run_id;
  if v_plan is null then
    raise exception 'job % belongs to no plan', p_job_id using errcode = 'P0002';
  end if;
  return query select v_job, v_plan;
end;
$$;
