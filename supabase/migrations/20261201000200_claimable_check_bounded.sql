-- claimable_jobs_exist, cheaper per call: it is now asked often, by the idle
-- slots of a worker isolate polling while they linger
-- (functions/worker/invocation.ts), besides the continuation decision at the
-- end of every invocation.
--
--   * It looks at the first 64 due pending jobs (claim order) instead of every
--     one: unbounded, one call ran the checks for every due pending job held
--     back by its portal's cap, thousands per poll behind a large backlog.
--     Capped jobs past the first 64 read as "nothing to claim now"; they
--     become claimable when a job of their portal ends, and the slot that
--     ended it claims again at once. Claims look no further in their fair
--     passes (128 and 32 jobs).
--   * plpgsql with the cap and exclusion checks inlined (as claim_jobs has
--     them), instead of an SQL function calling private.claimable (a plpgsql
--     frame) per job: its statements are planned once per connection, not at
--     every call.

create or replace function public.claimable_jobs_exist(p_kinds text[] default null)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  if exists (select 1 from public.jobs e
              where e.status = 'running' and e.lease_expires_at <= now() and e.attempts < e.max_attempts
                and (p_kinds is null or e.kind = any (p_kinds))) then
    return true;
  end if;
  return exists (
    select 1
      from (select p.portal_id, p.kind, p.content_type from public.jobs p
             where p.status = 'pending' and p.run_after <= now()
               and (p_kinds is null or p.kind = any (p_kinds))
             order by p.claim_rank, p.run_after, p.id
             limit 64) w
     where (select count(*) from public.jobs r
             where r.portal_id = w.portal_id and r.kind = w.kind and r.status = 'running')
           < coalesce((select k.max_running_per_portal from private.job_kinds k where k.kind = w.kind), 2147483647)
       and not (w.kind = 'export' and (select 1 from public.jobs x
                                        where x.portal_id = w.portal_id and x.kind = 'fetch'
                                          and x.content_type = w.content_type
                                          and x.status in ('pending', 'running') limit 1) is not null)
       and not (w.kind = 'fetch' and (select 1 from public.jobs x
                                       where x.portal_id = w.portal_id and x.kind = 'export'
                                         and x.content_type = w.content_type and x.status = 'running'
                                       limit 1) is not null));
end;
$$;
comment on function public.claimable_jobs_exist(text[]) is
  'True when claim_jobs would find a job now: an expired lease, or among the first 64 due pending jobs (claim order) one within its portal''s cap and the fetch/export exclusion.';
revoke all on function public.claimable_jobs_exist(text[]) from public, anon, authenticated;
grant execute on function public.claimable_jobs_exist(text[]) to service_role;
