-- public.queue_stats(): what an operator needs to see, in constant time
-- whatever the history (active jobs and the last hour only): jobs by kind and
-- status, oldest pending age, running jobs' job lease time left, per portal, HubSpot budget
-- use per portal (with its limits and what remains of its day), recent failures
-- and invocations, the last hour per minute (jobs finished, invocations), and
-- the worker invocations of the last 60 minutes (this minute and the 59 before
-- it) counted from private.worker_invocation_minutes, every one of them, by
-- source and stop reason.
-- Reads only. The service role only.
create function public.queue_stats() returns jsonb
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
    'running_per_portal', coalesce((
      select jsonb_agg(jsonb_build_object('portal_id', r.portal_id, 'name', p.name, 'running', r.n) order by r.n desc, r.portal_id)
        from (select j.portal_id, count(*) as n from public.jobs j where j.status = 'running' group by j.portal_id) r
        join public.portals p on p.id = r.portal_id), '[]'::jsonb),
    'hubspot_budget_last_10s', coalesce((
      select jsonb_agg(jsonb_build_object('hubspot_portal_id', b.hubspot_portal_id::text,
                                          'name', (select min(p.name) from public.portals p where p.hubspot_portal_id = b.hubspot_portal_id),
                                          'requests', (select count(*) from unnest(b.granted_at) t where t > now() - interval '10 seconds'),
                                          'max_per_interval', l.max_per_interval, 'interval_ms', l.interval_ms,
                                          'daily_limit', l.daily_limit, 'daily_remaining', l.daily_remaining,
                                          'daily_resets_at', l.daily_resets_at)
                       order by b.hubspot_portal_id)
        from private.hubspot_request_budgets b
        cross join lateral public.hubspot_portal_limits(array[b.hubspot_portal_id]) l
       where b.updated_at > now() - interval '10 seconds'), '[]'::jsonb),
    'failed_last_hour', (
      select count(*) from public.jobs j where j.finished_at > now() - interval '1 hour' and j.status = 'failed'),
    'recent_failures', coalesce((
      select jsonb_agg(jsonb_build_object('job_id', f.id::text, 'kind', f.kind, 'content_type', f.content_type,
                                          'finished_at', f.finished_at, 'last_error', f.last_error) order by f.finished_at desc)
        from (select j.id, j.kind, j.content_type, j.finished_at, j.last_error from public.jobs j
               where j.finished_at > now() - interval '1 hour' and j.status = 'failed'
               order by j.finished_at desc limit 10) f), '[]'::jsonb),
    'recent_invocations', coalesce((
      select jsonb_agg(jsonb_build_object('source', l.source, 'started_at', l.started_at, 'ended_at', l.ended_at,
                                          'stop_reason', l.stop_reason, 'shutdown_reason', l.shutdown_reason,
                                          'claimed', l.claimed, 'completed', l.completed, 'released', l.released,
                                          'failed', l.failed, 'cpu_ms', l.cpu_ms) order by l.ended_at desc)
        from (select * from private.worker_invocation_log x order by x.ended_at desc limit 20) l), '[]'::jsonb),
    'unfinished_runs', (select count(*) from public.runs r where r.finished_at is null),
    'last_hour', (
      select jsonb_agg(jsonb_build_object('minute', m.minute, 'completed', coalesce(j.completed, 0), 'failed', coalesce(j.failed, 0),
                                          'invocations', coalesce(i.n, 0), 'claimed', coalesce(i.claimed, 0)) order by m.minute)
        from generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()), interval '1 minute') m (minute)
        left join (select date_trunc('minute', x.finished_at) as minute, count(*) filter (where x.status = 'completed') as completed,
                          count(*) filter (where x.status = 'failed') as failed
                     from public.jobs x where x.finished_at > date_trunc('minute', now()) - interval '59 minutes'
                    group by 1) j on j.minute = m.minute
        left join (select c.minute, sum(c.invocations) as n, sum(c.claimed) as claimed
                     from private.worker_invocation_minutes c where c.minute >= date_trunc('minute', now()) - interval '59 minutes'
                    group by 1) i on i.minute = m.minute),
    'invocations_last_hour', (
      select jsonb_build_object(
               'since', date_trunc('minute', now()) - interval '59 minutes', 'minutes', 60,
               'invocations', coalesce(sum(c.invocations), 0), 'claimed', coalesce(sum(c.claimed), 0),
               'completed', coalesce(sum(c.completed), 0), 'failed', coalesce(sum(c.failed), 0),
               'by_source', coalesce((
                 select jsonb_agg(jsonb_build_object('source', b.source, 'stop_reason', b.stop_reason, 'invocations', b.n, 'claimed', b.claimed)
                                  order by b.n desc, b.source, b.stop_reason)
                   from (select x.source, x.stop_reason, sum(x.invocations) as n, sum(x.claimed) as claimed
                           from private.worker_invocation_minutes x
                          where x.minute >= date_trunc('minute', now()) - interval '59 minutes'
                          group by x.source, x.stop_reason) b), '[]'::jsonb))
        from private.worker_invocation_minutes c
       where c.minute >= date_trunc('minute', now()) - interval '59 minutes')
  )
$$;
comment on function public.queue_stats() is
  'Active jobs (and those finished in the last hour) by kind and status, oldest pending age, running jobs with their job lease time left and per portal, HubSpot budget use, recent failures and worker invocations, unfinished runs, the last hour per minute, the last 60 minutes'' worker invocations by source and stop reason. Constant time in the history.';
