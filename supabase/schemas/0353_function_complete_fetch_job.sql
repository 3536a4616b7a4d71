-- public.complete_fetch_job(job, token): completes the holder's fetch job:
-- items of its type it never saw are marked deleted (kept), the counts go into
-- the result and the run is settled; false for anyone else. Locks the run, then
-- the job FOR UPDATE. For the service role only (the worker).
create function public.complete_fetch_job(p_job_id bigint, p_token bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_deleted integer;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'fetch'
     for update;
  if not found then
    return false;
  end if;
  update public.hubspot_content c
     set deleted_at = now()
   where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
     and c.deleted_at is null and c.last_seen_job_id is distinct from p_job_id;
  get diagnostics v_deleted = row_count;
  return public.complete_job(p_job_id, p_token,
    jsonb_build_object('deleted', v_deleted, 'fetched', coalesce((v_job.result ->> 'fetched')::integer, 0)));
end;
$$;
