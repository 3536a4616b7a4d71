-- public.prune_queue_history(older_than, batch): retention: deletes one bounded
-- batch of finished jobs (delete_finished_jobs), then of finished runs without
-- jobs and their notifications, quiet-cycle roll-ups of days before the
-- cutoff, and HubSpot request windows older than 24 hours (the requests
-- chart's range); returns the counts (call until 0). Rows FOR UPDATE SKIP LOCKED.
-- pg_cron calls it (0910); the service role only.
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
  v_quiet integer;
  v_windows integer;
begin
  select * into v_settings from private.retention_settings s where s.id;
  v_batch := coalesce(p_batch_size, v_settings.batch_size, 5000);
  if coalesce(p_older_than, v_settings.keep_finished) < interval '0' or v_batch not between 1 and 100000 then
    raise exception 'prune_queue_history: a non-negative age and a batch size of 1-100000 are required' using errcode = '22023';
  end if;
  v_cutoff := now() - coalesce(p_older_than, v_settings.keep_finished, interval '30 days');

  v_jobs := public.delete_finished_jobs(now() - v_cutoff, v_batch);

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

  with doomed as (
    select q.portal_id, q.day from public.quiet_cycles q
     where q.day < (v_cutoff at time zone 'UTC')::date
     order by q.day
     limit v_batch
       for update skip locked
  ), gone as (
    delete from public.quiet_cycles q using doomed d where q.portal_id = d.portal_id and q.day = d.day returning 1
  )
  select count(*) into v_quiet from gone;

  with doomed as (
    select w.hubspot_portal_id, w.window_start from private.hubspot_request_counts w
     where w.window_start < now() - interval '24 hours'
     order by w.window_start
     limit v_batch
       for update skip locked
  ), gone as (
    delete from private.hubspot_request_counts w using doomed d
     where w.hubspot_portal_id = d.hubspot_portal_id and w.window_start = d.window_start returning 1
  )
  select count(*) into v_windows from gone;

  return jsonb_build_object('jobs', v_jobs, 'runs', v_runs, 'notifications', v_notifications, 'quiet_cycles', v_quiet,
                            'request_windows', v_windows);
end;
$$;
comment on function public.prune_queue_history(interval, integer) is
  'Retention: deletes one bounded batch of finished jobs, runs, notifications and quiet-cycle roll-ups older than the setting (or p_older_than), and HubSpot request windows older than 24 hours. Returns the counts; pg_cron calls it.';
