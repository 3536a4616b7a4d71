-- pg_cron job invoke-queue-worker: every minute, the due sync schedules'
-- runs (public.schedule_due_syncs), then a background invocation of the
-- worker edge function (private.wake_worker: pg_net, the project URL and
-- worker secret from Vault; it waits quietly until both secrets exist). Runs
-- as the role that applied the migration, and recorded for
-- public.heal_cron_jobs (private.record_cron_job). The 09xx_cron files make a
-- migration of their own, after the schema's (decision 0069). Without pg_cron
-- and pg_net: nothing, with a notice.
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron')
     or not exists (select 1 from pg_extension where extname = 'pg_net') then
    raise notice 'pg_cron or pg_net is not installed: the worker is not scheduled';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'invoke-queue-worker',
      '* * * * *',
      $cmd$
        select public.schedule_due_syncs();
        select private.wake_worker('cron');
      $cmd$);
    select private.record_cron_job('invoke-queue-worker');
  $sql$;
end
$$;
