-- Privileges. Supabase grants everything new in public to anon, authenticated
-- and service_role: taken back, then signed-in users may only read the exposed
-- tables (RLS decides which rows) and set notifications.read_at. Every
-- function in public is the service role's API; private is for nobody but its
-- owner (SECURITY DEFINER functions use it). tests/catalog-security.test.ts checks this.
revoke all on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  from anon, authenticated;
grant select on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to authenticated;
grant update (read_at) on public.notifications to authenticated;
grant select, insert, update, delete on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to service_role;
revoke all on all sequences in schema public from anon, authenticated;

revoke all on all tables in schema private from public, anon, authenticated;
revoke all on all sequences in schema private from public, anon, authenticated;
revoke all on all functions in schema private from public, anon, authenticated;

revoke all on all functions in schema public from public, anon, authenticated;
grant execute on all functions in schema public to service_role;
