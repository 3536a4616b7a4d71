-- private.wake_worker(source): a background invocation of the worker edge
-- function through pg_net (net.http_post), with the project URL and worker
-- secret from Vault; nothing (null) until both secrets exist. The cron jobs
-- invoke-queue-worker and wake-queue-worker call it (supabase/schemas/09xx).
-- plpgsql: pg_net and Vault are looked up when it runs, so it is created
-- without them. Owner only (the cron jobs run as the owner).
create function private.wake_worker(p_source text)
returns bigint
language plpgsql
volatile
set search_path = ''
as $$
declare
  v_url text := (select s.decrypted_secret from vault.decrypted_secrets s where s.name = 'project_url');
  v_secret text := (select s.decrypted_secret from vault.decrypted_secrets s where s.name = 'worker_secret');
begin
  if v_url is null or v_secret is null then
    return null;
  end if;
  return net.http_post(
    url := v_url || '/functions/v1/worker',
    headers := jsonb_build_object('Content-Type', 'application/json', 'Authorization', 'Bearer ' || v_secret),
    body := jsonb_build_object('source', p_source, 'mode', 'background'),
    timeout_milliseconds := 5000);
end;
$$;
