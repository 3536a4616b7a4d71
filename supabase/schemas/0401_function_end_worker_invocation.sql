-- public.end_worker_invocation(id): gives the invocation lease back and says whether a
-- claim would find work now (claimable_jobs_exist). Deletes the lease row only.
-- For the service role only; the worker calls finish_worker_invocation.
create function public.end_worker_invocation(p_invocation_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  delete from private.worker_invocations i where i.id = p_invocation_id;
  return public.claimable_jobs_exist(null);
end;
$$;
