-- public.export_header(job, fencing_token): the header record of the holder's export
-- (hubspot_id, hubspot_updated_at, then the pinned fields); raises 55000 for
-- anyone else. Reads only, no locks. For the service role only (the worker).
create function public.export_header(p_job_id bigint, p_fencing_token bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  return next array['hubspot_id', 'hubspot_updated_at'] || private.export_fields(v_job.checkpoint);
end;
$$;
