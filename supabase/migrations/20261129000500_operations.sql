-- Operations: queue statistics for operators and bounded retention.

-- Jobs by kind and status, oldest pending age, running leases and recent failures (service role only).
create function public.queue_stats() returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object(
    'by_kind_and_status', coalesce((
      select jsonb_agg(jsonb_build_object('kind', s.kind, 'status', s.status, 'jobs', s.n) order by s.kind, s.status)
        from (select j.kind, j.status, count(*) as n from public.jobs j group by j.kind, j.status) s), '[]'::jsonb),
    'oldest_pending_age_seconds', (
      select extract(epoch from now() - min(j.run_after))::integer
        from public.jobs j where j.status = 'pending' and j.run_after <= now()),
    'running', coalesce((
      select jsonb_agg(jsonb_build_object('job_id', j.id::text, 'kind', j.kind, 'content_type', j.content_type,
                                          'worker_id', j.worker_id,
                                          'lease_seconds_left', round(extract(epoch from j.lease_expires_at - now()))::integer)
                       order by j.lease_expires_at)
        from public.jobs j where j.status = 'running'), '[]'::jsonb),
    'failed_last_hour', (
      select count(*) from public.jobs j where j.status = 'failed' and j.finished_at > now() - interval '1 hour'),
    'unfinished_runs', (select count(*) from public.runs r where r.finished_at is null)
  )
$$;

-- Deletes up to p_batch_size jobs that finished before now() - p_older_than
-- and whose run is finished (runs keep their counts). Returns how many it
-- deleted; call again until it returns 0.
create function public.delete_finished_jobs(p_older_than interval, p_batch_size integer default 1000) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  if p_older_than is null or p_older_than < interval '0' or p_batch_size is null or p_batch_size not between 1 and 100000 then
    raise exception 'delete_finished_jobs: a non-negative age and a batch size of 1-100000 are required' using errcode = '22023';
  end if;
  delete from public.jobs j
   where j.id in (
     select j2.id from public.jobs j2
       join public.runs r on r.id = j2.run_id
      where j2.finished_at < now() - p_older_than and r.finished_at is not null
      order by j2.finished_at
      limit p_batch_size
        for update of j2 skip locked);
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;
