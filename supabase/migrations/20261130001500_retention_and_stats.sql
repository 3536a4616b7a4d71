-- Retention and constant-time statistics. Finished history (jobs, runs and
-- their notifications) is deleted in bounded batches once it is older than a
-- setting (pg_cron calls prune_queue_history, see …1600); queue_stats reads
-- only active jobs and the last hour, so it answers in the same time whatever
-- the history holds.

-- Retention settings (one row): how long finished history is kept, and how
-- many jobs and runs one prune_queue_history call deletes at most.
create table private.retention_settings (
  id boolean primary key default true check (id),
  keep_finished interval not null default interval '30 days'
    constraint retention_settings_keep_finished_positive check (keep_finished >= interval '0'),
  batch_size integer not null default 5000
    constraint retention_settings_batch_size_range check (batch_size between 1 and 100000)
);
comment on table private.retention_settings is
  'Retention: finished jobs, runs and notifications older than keep_finished are deleted, at most batch_size jobs and batch_size runs per prune_queue_history call.';
insert into private.retention_settings default values;
alter table private.retention_settings enable row level security;
revoke all on private.retention_settings from public, anon, authenticated;

-- Finished runs by age: retention finds the old ones without reading the rest.
create index runs_finished_idx on public.runs (finished_at) where finished_at is not null;

-- Deletes one bounded batch of finished history older than p_older_than
-- (default: retention_settings.keep_finished): up to p_batch_size jobs that
-- finished before the cutoff in finished runs, then up to p_batch_size runs
-- that finished before the cutoff and have no job left, with their
-- notifications. Unfinished runs and their jobs are never touched; content
-- rows are kept. Returns {jobs, runs, notifications} deleted; call again until
-- all are 0. Rows locked by someone else are skipped (next call).
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

revoke all on function public.prune_queue_history(interval, integer) from public, anon, authenticated;
grant execute on function public.prune_queue_history(interval, integer) to service_role;

-- Queue statistics in constant time whatever the history: jobs by kind and
-- status count the active jobs (pending, running) and the jobs finished in the
-- last hour; every part reads a partial or range index of those rows only.
create or replace function public.queue_stats() returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object(
    'by_kind_and_status', coalesce((
      select jsonb_agg(jsonb_build_object('kind', s.kind, 'status', s.status, 'jobs', s.n) order by s.kind, s.status)
        from (select x.kind, x.status, count(*) as n
                from (select j.kind, j.status from public.jobs j where j.status in ('pending', 'running')
                      union all
                      select j.kind, j.status from public.jobs j
                       where j.finished_at > now() - interval '1 hour') x
               group by x.kind, x.status) s), '[]'::jsonb),
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
      select count(*) from public.jobs j where j.finished_at > now() - interval '1 hour' and j.status = 'failed'),
    'unfinished_runs', (select count(*) from public.runs r where r.finished_at is null)
  )
$$;
comment on function public.queue_stats() is
  'Active jobs (and those finished in the last hour) by kind and status, oldest pending age, running leases, failures in the last hour, unfinished runs. Constant time in the history.';
