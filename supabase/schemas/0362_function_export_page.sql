-- public.export_page(job, fencing_token, after, limit): the holder's next export page:
-- the id of its last live item and how many it has (up to limit) after `after`;
-- held = false for anyone else; an empty page is the end. Reads only, no locks.
-- For the service role only (the worker).
create function public.export_page(p_job_id bigint, p_fencing_token bigint, p_after_id bigint, p_limit integer)
returns table (held boolean, last_id bigint, row_count integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  if p_job_id is null or p_fencing_token is null or p_after_id is null or p_limit is null then
    raise exception 'job id, fencing token, position and limit are required' using errcode = '22004';
  end if;
  if p_after_id < 0 or p_limit not between 1 and 100000 then
    raise exception 'position must be >= 0 and limit between 1 and 100000' using errcode = '22023';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    return query select false, null::bigint, 0;
    return;
  end if;
  return query
    select true, max(p.id), count(*)::integer
      from (select c.id from public.hubspot_content c
             where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
               and c.deleted_at is null and c.id > p_after_id
             order by c.id
             limit p_limit) p;
end;
$$;
