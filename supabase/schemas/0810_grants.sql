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
-- Sync: marks are read-only; a schedule's owner sets its intervals, types,
-- overlap and pause (owner and due times are the trigger's and the tick's).
revoke all on public.sync_marks, public.sync_schedules from anon, authenticated;
grant select on public.sync_marks, public.sync_schedules to authenticated;
grant insert (portal_id, content_types, incremental_every_minutes, full_every_minutes, overlap_seconds, paused,
               hubdb_sweep_every_minutes)
  on public.sync_schedules to authenticated;
grant update (content_types, incremental_every_minutes, full_every_minutes, overlap_seconds, paused, hubdb_sweep_every_minutes)
  on public.sync_schedules to authenticated;
grant delete on public.sync_schedules to authenticated;
grant select, insert, update, delete on public.sync_marks, public.sync_schedules to service_role;
-- Quiet-cycle roll-ups are read-only to their owner; settlement writes them.
revoke all on public.quiet_cycles from anon, authenticated;
grant select on public.quiet_cycles to authenticated;
grant select, insert, update, delete on public.quiet_cycles to service_role;
grant select, insert, update, delete on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to service_role;
-- Publish: plans and items are read-only to their owner; an owner writes their
-- pending edits by these columns (owner, status, plan and source are the
-- trigger's and the functions').
revoke all on public.content_edits, public.publish_plans, public.publish_items from anon, authenticated;
grant select on public.content_edits, public.publish_plans, public.publish_items to authenticated;
grant insert (portal_id, content_type, hubspot_id, base_updated_at, patch) on public.content_edits to authenticated;
grant update (base_updated_at, patch) on public.content_edits to authenticated;
grant delete on public.content_edits to authenticated;
grant select, insert, update, delete on public.content_edits, public.publish_plans, public.publish_items to service_role;
revoke all on all sequences in schema public from anon, authenticated;

revoke all on all tables in schema private from public, anon, authenticated;
revoke all on all sequences in schema private from public, anon, authenticated;
revoke all on all functions in schema private from public, anon, authenticated;

revoke all on all functions in schema public from public, anon, authenticated;
grant execute on all functions in schema public to service_role;
