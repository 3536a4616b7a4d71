-- Schedules retention with pg_cron next to the worker: every 5 minutes one
-- bounded batch of finished history older than private.retention_settings
-- (30 days; 5,000 jobs and 5,000 runs per call) is deleted. On a Postgres
-- without pg_cron it does nothing and says so (run the command yourself, or
-- re-run this block once pg_cron is enabled). pg_net prunes its own responses
-- (pg_net.ttl, 6 hours by default).
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: queue history is not pruned on a schedule (call public.prune_queue_history())';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'prune-queue-history',
      '*/5 * * * *',
      $cmd$select public.prune_queue_history()$cmd$)
  $sql$;
end
$$;
