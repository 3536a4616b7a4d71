-- private.fill_content_edit(): before an edit is stored or its item or patch
-- changes: sets its owner from the portal (a portal that is not the signed-in
-- writer's is "not found", before anything about its items can show), checks
-- the patch (private.check_edit_patch) and that the item is live in the
-- portal's copy (public.hubspot_content), raising 22023 (P0002 for the portal)
-- so nothing is stored; stamps updated_at. Definer: the registry and the copy
-- are not the writer's to read. The trigger of public.content_edits.
create function private.fill_content_edit() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
begin
  if tg_op = 'INSERT' or new.portal_id is distinct from old.portal_id then
    select p.owner_id into new.owner_id from public.portals p where p.id = new.portal_id;
    if not found or (v_uid is not null and new.owner_id <> v_uid) then
      raise exception 'edit: portal % not found', new.portal_id using errcode = 'P0002';
    end if;
  end if;
  perform private.check_edit_patch(new.content_type, new.patch);
  if tg_op = 'INSERT' or new.portal_id is distinct from old.portal_id or new.content_type is distinct from old.content_type
     or new.hubspot_id is distinct from old.hubspot_id then
    -- By its key alone, then live or not: with `deleted_at is null` in the lookup the planner may read the
    -- type's partial index of live items whole (hubspot_content_live_idx) for every edit stored.
    if not coalesce((select c.deleted_at is null from public.hubspot_content c
                      where c.portal_id = new.portal_id and c.content_type = new.content_type and c.hubspot_id = new.hubspot_id
                      limit 1), false) then
      raise exception 'edit: % % is not a live item of this portal''s copy (fetch it first)', new.content_type, left(new.hubspot_id, 200)
        using errcode = '22023';
    end if;
  end if;
  new.updated_at := now();
  return new;
end;
$$;

-- On the columns an edit's writer sets: the service role's status changes (plan, discard) skip it.
create trigger content_edits_fill
  before insert or update of portal_id, content_type, hubspot_id, patch, base_updated_at
  on public.content_edits
  for each row execute function private.fill_content_edit();
