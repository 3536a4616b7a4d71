-- Security by the database: RLS on every exposed table, read-only access for
-- signed-in owners, queue internals executable by the service role only.

alter table public.portals enable row level security;
alter table public.runs enable row level security;
alter table public.jobs enable row level security;
alter table public.hubspot_content enable row level security;
alter table public.notifications enable row level security;
alter table private.portal_credentials enable row level security;
alter table private.job_kinds enable row level security;
alter table private.hubspot_request_budgets enable row level security;

-- Supabase grants everything in public to anon and authenticated by default:
-- take it back, then grant only reads (and marking notifications read).
revoke all on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  from anon, authenticated;
grant select on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to authenticated;
grant update (read_at) on public.notifications to authenticated;
grant select, insert, update, delete on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to service_role;
revoke all on all sequences in schema public from anon, authenticated;

revoke all on all tables in schema private from public, anon, authenticated;
revoke all on all functions in schema private from public, anon, authenticated;
revoke all on all sequences in schema private from public, anon, authenticated;

create policy "owners read their portals" on public.portals
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their runs" on public.runs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their jobs" on public.jobs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their content" on public.hubspot_content
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "users read their notifications" on public.notifications
  for select to authenticated using (user_id = (select auth.uid()));
create policy "users mark their notifications read" on public.notifications
  for update to authenticated using (user_id = (select auth.uid())) with check (user_id = (select auth.uid()));

-- Queue internals: the service role only.
do $$
declare
  f regprocedure;
begin
  for f in
    select p.oid::regprocedure from pg_proc p
     where p.pronamespace = 'public'::regnamespace
       and p.proname in ('claim_jobs', 'claim_next_job', 'heartbeat_job', 'release_job', 'complete_job',
                         'complete_jobs', 'complete_job_and_claim_next', 'fail_job', 'reconcile_stuck_runs',
                         'create_run', 'stop_run', 'save_fetched_page', 'complete_fetch_job', 'connect_portal',
                         'portal_credentials', 'acquire_hubspot_request', 'queue_stats', 'delete_finished_jobs')
  loop
    execute format('revoke all on function %s from public, anon, authenticated', f);
    execute format('grant execute on function %s to service_role', f);
  end loop;
end
$$;

-- Realtime: a frontend can subscribe to its runs' and jobs' progress (RLS applies).
do $$
begin
  if exists (select 1 from pg_publication where pubname = 'supabase_realtime') then
    alter publication supabase_realtime add table public.runs, public.jobs;
  else
    raise notice 'publication supabase_realtime not found: runs and jobs are not published for realtime';
  end if;
end
$$;
