-- Row-level security policies of the exposed tables: a signed-in user reads
-- only their own portals, runs, jobs, content and notifications, and may mark
-- their notifications read. anon gets nothing; the service role bypasses RLS.
-- (The exports bucket's policy on storage.objects is in 0950.)
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
create policy "owners read their sync marks" on public.sync_marks
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their quiet cycles" on public.quiet_cycles
  for select to authenticated using (owner_id = (select auth.uid()));
-- Sync schedules: the owner of the portal reads, creates, changes and deletes
-- it (the fill trigger sets owner_id from the portal, so another user's portal
-- fails the check).
create policy "owners read their sync schedules" on public.sync_schedules
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners create their sync schedules" on public.sync_schedules
  for insert to authenticated with check (owner_id = (select auth.uid()));
create policy "owners change their sync schedules" on public.sync_schedules
  for update to authenticated using (owner_id = (select auth.uid())) with check (owner_id = (select auth.uid()));
create policy "owners delete their sync schedules" on public.sync_schedules
  for delete to authenticated using (owner_id = (select auth.uid()));
-- Publish (docs/publish.md): owners read their plans and items; they write
-- their own pending edits (the fill trigger sets owner_id from the portal, so
-- another user's portal fails the check; planned edits are the plan's).
create policy "owners read their publish plans" on public.publish_plans
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their publish items" on public.publish_items
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their edits" on public.content_edits
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners create their pending edits" on public.content_edits
  for insert to authenticated with check (owner_id = (select auth.uid()) and status = 'pending' and source = 'app');
create policy "owners change their pending edits" on public.content_edits
  for update to authenticated using (owner_id = (select auth.uid()) and status = 'pending')
  with check (owner_id = (select auth.uid()) and status = 'pending');
create policy "owners delete their pending edits" on public.content_edits
  for delete to authenticated using (owner_id = (select auth.uid()) and status = 'pending');
