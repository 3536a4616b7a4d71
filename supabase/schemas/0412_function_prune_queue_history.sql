-- public.prune_queue_history(older_than, batch): retention: deletes one bounded
-- batch of finished jobs, then of finished runs without jobs and their
-- notifications, older than the setting; returns the counts (call until 0).
-- Rows FOR UPDATE SKIP LOCKED. pg_cron calls it (0910); the service role only.
create function public.prune_queue_history(p_older_than interval default null, p_batch_size integer default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.retention_settings;
  v_cutoff timestamptz;
  v_batch integer;
  v_jobs integer;
  v_runs integer;
  v_notifications integer;
begin
  select * into v_settings from private.retention_settings s where s.id;
  v_batch := coalesce(p_batch_size, v_settings.batch_size, 5000);
  if coalesce(p_older_than, v_settings.keep_finished) < interval '0' or v_batch not between 1 and 100000 then
    raise exception 'prune_queue_history: a non-negative age and a batch size of 1-100000 are required' using errcode = '22023';
  end if;
  v_cutoff := now() - coalesce(p_older_than, v_settings.keep_finished, interval '30 days');

  with gone as (
    delete from public.jobs j
     where j.id in (
       select j2.id from public.jobs j2
         join public.runs r on r.id = j2.run_id
        where j2.finished_at < v_cutoff and r.finished_at is not null
        order by j2.finished_at
        limit v_batch
          for update of j2 skip locked)
    returning 1
  )
  select count(*) into v_jobs from gone;

  with doomed as (
    select r.id from public.runs r
     where r.finished_at < v_cutoff
       and not exists (select 1 from public.jobs j where j.run_id = r.id)
     order by r.finished_at
     limit v_batch
       for update skip locked
  ), notes as (
    delete from public.notifications n using doomed d where n.run_id = d.id returning 1
  ), gone as (
    delete from public.runs r using doomed d where r.id = d.id returning 1
  )
  select (select count(*) from gone), (select count(*) from notes) into v_runs, v_notifications;

  return jsonb_build_object('jobs', v_jobs, 'runs', v_runs, 'notifications', v_notifications);
end;
$$;
comment on function public.prune_queue_history(interval, integer) is
  'Retention: deletes one bounded batch of finished jobs, runs and notifications older than the setting (or p_older_than). Returns the counts; pg_cron calls it.';
