-- public.worker_invocation_leases(): how many invocation leases are held now, and
-- the cap. Reads only, no locks. For the service role only (worker, operators).
create function public.worker_invocation_leases()
returns table (active integer, cap integer)
language sql
stable
security definer
set search_path = ''
as $$
  select (select count(*)::integer from private.worker_invocations i where i.lease_expires_at > now()),
         (select s.max_concurrent_invocations from private.worker_settings s where s.id)
$$;
