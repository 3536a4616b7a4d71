-- pg_cron job invoke-queue-worker: every minute, the due sync schedules'
-- runs (public.schedule_due_syncs), then a background invocation of the
-- worker edge function through pg_net, with the project URL and worker
-- secret from Vault (it waits quietly until both secrets exist). Runs as the
-- role that applied the migration. Without pg_cron and pg_net: nothing, with a notice.
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
        select net.http_post(
          url := s.project_url || '/functions/v1/worker',
          headers := jsonb_build_object('Content-Type', 'application/json', 'Authorization', 'Bearer ' || s.worker_secret),
          body := jsonb_build_object('source', 'cron', 'mode', 'background'),
          timeout_milliseconds := 5000)
          from (select (select decrypted_secret from vault.decrypted_secrets where name = 'project_url') as project_url,
                       (select decrypted_secret from vault.decrypted_secrets where name = 'worker_secret') as worker_secret) s
         where s.project_url is not null and s.worker_secret is not null
      $cmd$)
  $sql$;
end
$$;
