-- pg_cron job prune-queue-history: every 20 seconds one bounded batch of
-- finished history older than private.retention_settings is deleted
-- (public.prune_queue_history): 3 × 5,000 jobs a minute, twice what 1,000
-- portals on a one-minute schedule create (on pg_cron before 1.5 every minute
-- instead, a third of that: private.cron_interval). Without pg_cron: nothing, with a
-- notice (call the function yourself, or re-run this file once pg_cron is enabled).
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: queue history is not pruned on a schedule (call public.prune_queue_history())';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'prune-queue-history',
      private.cron_interval(20),
      $cmd$select public.prune_queue_history()$cmd$);
    select private.record_cron_job('prune-queue-history');
  $sql$;
end
$$;
