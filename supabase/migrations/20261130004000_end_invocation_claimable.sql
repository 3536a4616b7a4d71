-- An ending worker invocation continues only when a claim would really find
-- work: the same rules as claim_jobs (a portal's cap on running jobs, exports
-- waiting for a fetch of their type), not merely "a due job exists". Otherwise
-- a portal at its cap would make invocations hand over to each other without
-- claiming anything.
create or replace function public.end_worker_invocation(p_invocation_id uuid)
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
revoke all on function public.end_worker_invocation(uuid) from public, anon, authenticated;
grant execute on function public.end_worker_invocation(uuid) to service_role;
