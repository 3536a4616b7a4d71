-- private.fill_sync_schedule(): before a schedule is written, sets its owner
-- from the portal (a portal that is not the writer's fails RLS's check on
-- owner_id), every content type when none are given (else checks them), and
-- the next due times when an interval is set or changed: the first
-- incremental at once (a type without a mark runs a full fetch), the first
-- full after its interval (or at once without an incremental). Definer: the
-- type registry is private.
create function private.fill_sync_schedule() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
begin
  if tg_op = 'INSERT' then
    select p.owner_id into new.owner_id from public.portals p where p.id = new.portal_id;
    if not found then
      raise exception 'sync schedule: portal % not found', new.portal_id using errcode = 'P0002';
    end if;
  end if;
  if new.content_types is null then
    select array_agg(c.content_type order by c.created_at, c.content_type) into new.content_types from private.content_types c;
  elsif not private.are_known_content_types(new.content_types) then
    raise exception 'sync schedule: content types must be 1-8 distinct known types, got %', new.content_types using errcode = '22023';
  end if;
  if tg_op = 'INSERT' or new.incremental_every_minutes is distinct from old.incremental_every_minutes then
    new.next_incremental_at := case when new.incremental_every_minutes is not null
      then least(case when tg_op = 'UPDATE' then old.next_incremental_at end,
                 case when tg_op = 'INSERT' then now() else now() + make_interval(mins => new.incremental_every_minutes) end) end;
  end if;
  if tg_op = 'INSERT' or new.full_every_minutes is distinct from old.full_every_minutes then
    new.next_full_at := case when new.full_every_minutes is not null
      then least(case when tg_op = 'UPDATE' then old.next_full_at end,
                 case when new.incremental_every_minutes is null and tg_op = 'INSERT' then now()
                      else now() + make_interval(mins => new.full_every_minutes) end) end;
  end if;
  new.updated_at := now();
  return new;
end;
$$;

create trigger sync_schedules_fill
  before insert or update on public.sync_schedules
  for each row execute function private.fill_sync_schedule();
