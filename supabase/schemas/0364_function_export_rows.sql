-- public.export_rows(job, fencing_token, after, through): the CSV cells of the live
-- items with after < id <= through, in id order, for the export's holder only
-- (the worker COPYs them to its sink); raises 55000 for anyone else. Reads
-- only, no locks. For the service role only. docs/decisions/0006-exports-in-sql.md.
create function public.export_rows(p_job_id bigint, p_fencing_token bigint, p_after_id bigint, p_through_id bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_fields text[];
begin
  if p_job_id is null or p_fencing_token is null or p_after_id is null or p_through_id is null then
    raise exception 'job id, fencing token and positions are required' using errcode = '22004';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  v_fields := private.export_fields(v_job.checkpoint);
  return query
    select private.csv_cells(
             array[c.hubspot_id, to_char(c.hubspot_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')],
             c.data, v_fields)
      from public.hubspot_content c
     where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
       and c.deleted_at is null and c.id > p_after_id and c.id <= p_through_id
     order by c.id;
end;
$$;
