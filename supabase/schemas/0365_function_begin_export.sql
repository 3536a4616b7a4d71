-- public.begin_export(job, fencing_token, checkpoint): the holder starts writing an
-- export file: records its first checkpoint and counts the rows it will
-- write now (the count create_run made may predate the fetch it waited for).
-- False when it no longer holds the job. Locks the held job row. The service role only.
create function public.begin_export(p_job_id bigint, p_fencing_token bigint, p_checkpoint jsonb)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_total integer;
begin
  if p_job_id is null or p_fencing_token is null or p_checkpoint is null then
    raise exception 'job id, fencing token and checkpoint are required' using errcode = '22004';
  end if;
  select (select count(*)::integer from public.hubspot_content c
           where c.portal_id = j.portal_id and c.content_type = j.content_type and c.deleted_at is null)
    into v_total
    from public.jobs j
   where j.id = p_job_id and j.kind = 'export';
  if not found then
    return false;
  end if;
  -- The job lease, the fence, the progress and the run's start: the heartbeat's.
  return public.heartbeat_job(p_job_id, p_fencing_token, 0, v_total, p_checkpoint);
end;
$$;
comment on function public.begin_export(bigint, bigint, jsonb) is
  'The holder starts an export file: first checkpoint, and the rows it will write counted now.';
