-- pg_cron job wake-queue-worker: every 10 seconds, when no worker invocation
-- is running and a claim would find work (public.claimable_jobs_exist: a due
-- job, an expired lease, a schedule probe due within 10 s), a background
-- invocation of the worker (private.wake_worker). An invocation that finds
-- nothing due ends; without this the next due schedule waited for the
-- minute's job, and one-minute schedules fell into a pattern where a third
-- of each minute went unprobed (bench 12: 10-30% of the slots skipped).
-- Nothing is sent while the worker runs or has nothing to do. On pg_cron
-- before 1.5, every minute instead (private.cron_interval, with a notice).
-- Without pg_cron and pg_net: nothing, with a notice.
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron')
     or not exists (select 1 from pg_extension where extname = 'pg_net') then
    raise notice 'pg_cron or pg_net is not installed: the worker is not woken between minutes';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'wake-queue-worker',
      private.cron_interval(10),
      $cmd$
        select private.wake_worker('cron_wake')
         where (select w.active from public.worker_invocation_leases() w) = 0
           and public.claimable_jobs_exist();
      $cmd$);
    select private.record_cron_job('wake-queue-worker');
  $sql$;
end
$$;
