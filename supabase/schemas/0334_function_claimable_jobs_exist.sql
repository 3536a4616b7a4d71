-- public.claimable_jobs_exist(kinds, schedules): whether a claim would find work now (an
-- expired job lease, a due schedule probe unless schedules is false, or one of the first 64 due pending
-- jobs within its portal's cap and the fetch/export exclusion). Reads only, no locks; polled by idle
-- worker lanes, asked at every invocation's end, and by report_and_claim_schedule_probes (jobs only).
-- The service role only.
create function public.claimable_jobs_exist(p_kinds text[] default null, p_schedules boolean default true)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  -- claim_jobs's rescue test, due-pending window and claimable check, written
  -- out here too rather than shared (decision 0003, "The claimable check, written out").
  if exists (select 1 from public.jobs e
              where e.status = 'running' and e.lease_expires_at <= now() and e.attempts < e.max_attempts
                and (p_kinds is null or e.kind = any (p_kinds))) then
    return true;
  end if;
  -- A schedule probe a lane could claim (claim_schedule_probe; decision 0058). The arguments' test on
  -- its own: in one condition with the query, the query's plan is set up even when the test is false.
  if p_schedules and (p_kinds is null or 'probe' = any (p_kinds)) then
    if exists (select 1 from public.sync_schedules s
                where not s.paused and least(s.next_incremental_at, s.next_full_at) <= now() + interval '10 seconds'
                  and private.schedule_probe_due(s, now() + interval '10 seconds')) then
      return true;
    end if;
  end if;
  return exists (
    select 1
      from (select p.portal_id, p.kind, p.content_type from public.jobs p
             where p.status = 'pending' and p.run_after <= now()
               and (p_kinds is null or p.kind = any (p_kinds))
             order by p.claim_rank, p.run_after, p.id
             limit 64) w
     -- private.claimable(w.portal_id, w.kind, w.content_type), written out
     where (select case when count(*) = 0 then true -- within any cap (at least 1): not looked up
                        else count(*) < coalesce(private.portal_cap(w.portal_id, w.kind), 2147483647) end
              from public.jobs r
             where r.portal_id = w.portal_id and r.kind = w.kind and r.status = 'running')
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
comment on function public.claimable_jobs_exist(text[], boolean) is
  'True when claim_jobs (or claim_schedule_probe, unless p_schedules is false) would find work now: an expired job lease, a due schedule probe, or among the first 64 due pending jobs (claim order) one within its portal''s cap and the fetch/export exclusion.';
