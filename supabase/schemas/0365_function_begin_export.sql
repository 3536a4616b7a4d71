-- public.begin_export(job, token, checkpoint): the holder starts writing an
-- export file: records its first checkpoint and counts the rows it will
-- write now (the count create_run made may predate the fetch it waited for).
-- False when it no longer holds the job. Locks the held job row. The service role only.
create function public.begin_export(p_job_id bigint, p_token bigint, p_checkpoint jsonb)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  if p_job_id is null or p_token is null or p_checkpoint is null then
    raise exception 'job id, token and checkpoint are required' using errcode = '22004';
  end if;
  update public.jobs j
     set lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         progress_done = 0,
         progress_total = (select count(*)::integer from public.hubspot_content c
                            where c.portal_id = j.portal_id and c.content_type = j.content_type and c.deleted_at is null),
         checkpoint = p_checkpoint,
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.kind = 'export'
     and j.lease_expires_at > now() and k.kind = j.kind
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  perform private.mark_run_started(v_run_id);
  return true;
end;
$$;
comment on function public.begin_export(bigint, bigint, jsonb) is
  'The holder starts an export file: first checkpoint, and the rows it will write counted now.';
