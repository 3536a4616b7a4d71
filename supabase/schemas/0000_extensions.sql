-- Extensions the schedules use: pg_cron (in pg_catalog, where it must live; its
-- objects are in its own `cron` schema) and pg_net (in `extensions`, never in
-- public). Created only where both can be, and Vault is there too (a Supabase
-- project); elsewhere nothing is scheduled (0900-0920 say so).
do $$
begin
  if not exists (select 1 from pg_available_extensions where name = 'pg_cron')
     or not exists (select 1 from pg_available_extensions where name = 'pg_net')
     or not exists (select 1 from pg_namespace where nspname = 'vault') then
    raise notice 'pg_cron, pg_net or vault is not available: the worker is not scheduled (invoke it yourself, or use npm start)';
    return;
  end if;
  execute 'create extension if not exists pg_cron with schema pg_catalog';
  execute 'create extension if not exists pg_net with schema extensions';
end
$$;
