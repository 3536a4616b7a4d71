-- GENERATED FILE: do not edit. The cron jobs' migration, made by scripts/schema-baseline.ts
-- (npm run schema:baseline) from the cron job files of supabase/schemas/ (09xx_cron_*.sql),
-- applied after the baseline: pg_cron 1.6.4 can miss the cron.job change of one
-- large migration, never a small one's (docs/decisions/0069).

-- ==== supabase/schemas/0900_cron_invoke_queue_worker.sql ====
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

-- ==== supabase/schemas/0905_cron_wake_queue_worker.sql ====
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

-- ==== supabase/schemas/0910_cron_prune_queue_history.sql ====
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

-- ==== supabase/schemas/0920_cron_prune_oauth_install_states.sql ====
-- pg_cron job prune-oauth-install-states: every 5 minutes one bounded batch of
-- expired OAuth install states is deleted (public.prune_oauth_install_states).
-- Without pg_cron: nothing, with a notice.
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: expired OAuth install states are not pruned on a schedule (call public.prune_oauth_install_states())';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'prune-oauth-install-states',
      '*/5 * * * *',
      $cmd$select public.prune_oauth_install_states()$cmd$);
    select private.record_cron_job('prune-oauth-install-states');
  $sql$;
end
$$;
