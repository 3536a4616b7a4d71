-- Schedules the worker edge function every minute with pg_cron + pg_net,
-- reading the project URL and the worker secret from Supabase Vault:
--   select vault.create_secret('https://<ref>.supabase.co', 'project_url');
--   select vault.create_secret('<WORKER_SECRET>', 'worker_secret');
-- On a Postgres without pg_cron, pg_net or Vault (the embedded local default)
-- it does nothing and says so.
do $$
begin
  if not exists (select 1 from pg_available_extensions where name = 'pg_cron')
     or not exists (select 1 from pg_available_extensions where name = 'pg_net')
     or not exists (select 1 from pg_namespace where nspname = 'vault') then
    raise notice 'pg_cron, pg_net or vault is not available: the worker is not scheduled (invoke it yourself, or use npm start)';
    return;
  end if;
  execute 'create extension if not exists pg_cron';
  execute 'create extension if not exists pg_net with schema extensions';
  execute $sql$
    select cron.schedule(
      'invoke-queue-worker',
      '* * * * *',
      $cmd$
        select net.http_post(
          url := (select decrypted_secret from vault.decrypted_secrets where name = 'project_url') || '/functions/v1/worker',
          headers := jsonb_build_object(
            'Content-Type', 'application/json',
            'Authorization', 'Bearer ' || (select decrypted_secret from vault.decrypted_secrets where name = 'worker_secret')),
          body := jsonb_build_object('source', 'cron'),
          timeout_milliseconds := 5000)
      $cmd$)
  $sql$;
end
$$;
