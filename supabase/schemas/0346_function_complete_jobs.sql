-- public.complete_jobs(ids, fencing tokens): completes many held jobs at once and
-- settles their runs by counters (count_finished_jobs, portals in id order so
-- that quiet-cycle roll-ups are taken in one order); returns how many were
-- still held. Locks the runs FOR UPDATE in id order, then the jobs (v_running:
-- see docs/decisions/0003). For the service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.complete_jobs(p_job_ids bigint[], p_fencing_tokens bigint[])
returns integer
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_runs uuid[];
  v_counts integer[];
  v_i integer;
begin
  if p_job_ids is null or p_fencing_tokens is null or cardinality(p_job_ids) <> cardinality(p_fencing_tokens) then
    raise exception 'complete_jobs: job ids and fencing tokens must be arrays of the same length' using errcode = '22023';
  end if;
  perform 1 from public.runs r
   where r.id in (select j.run_id from public.jobs j where j.id = any (p_job_ids))
   order by r.id
     for update;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now()
      from unnest(p_job_ids, p_fencing_tokens) as t(id, fencing_token)
     where j.id = t.id and j.fencing_token = t.fencing_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id, j.portal_id
  ), per_run as (
    select d.run_id, d.portal_id, count(*)::integer as n from done d group by d.run_id, d.portal_id
  )
  select array_agg(p.run_id order by p.portal_id, p.run_id), array_agg(p.n order by p.portal_id, p.run_id)
    into v_runs, v_counts from per_run p;
  for v_i in 1 .. coalesce(cardinality(v_runs), 0) loop
    perform private.count_finished_jobs(v_runs[v_i], v_counts[v_i], 0);
  end loop;
  return coalesce((select sum(n)::integer from unnest(v_counts) as n), 0);
end;
$$;
