-- public.delete_finished_jobs(older_than, batch): deletes up to batch jobs that
-- finished before now() - older_than in finished runs; returns how many (call
-- until 0). Job rows FOR UPDATE SKIP LOCKED. For the service role only
-- (prune_queue_history is what cron calls).
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
