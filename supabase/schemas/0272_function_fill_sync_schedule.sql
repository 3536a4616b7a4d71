-- private.fill_sync_schedule(): before a schedule is created or its owner's columns change, sets its owner
-- from the portal, every content type when none are given (else checks them), and
-- the next due times when an interval is set or changed: the first
-- incremental at once (a type without a mark runs a full fetch), else the
-- interval's first slot (private.sync_slot) at least half an interval after
-- the last due time (creation for a new schedule): a changed interval moves
-- it, and a time already due stays due. A signed-in user (auth.uid()) creates
-- one only for a portal of their own: any other id, someone else's or none,
-- is P0002 "not found" alike, so the answer does not tell which portals exist.
-- A user writing through PostgREST (request.method set, as PostgREST sets it
-- for each request; the orchestrator's own writes, already counted, set none)
-- takes one write from the per-user write limit (public.take_user_write) once
-- per request; over it, PostgREST answers 429 RATE_LIMITED with Retry-After,
-- as the orchestrator does. Definer: the type registry and the write log are private.
create function private.fill_sync_schedule() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_user uuid := auth.uid();
  v_wait_ms integer;
  v_seconds integer;
begin
  if v_user is not null and coalesce(current_setting('request.method', true), '') <> ''
     and coalesce(current_setting('queue.schedule_write_counted', true), '') <> 'yes' then
    v_wait_ms := public.take_user_write(v_user);
    if v_wait_ms > 0 then
      v_seconds := greatest(1, ceil(v_wait_ms / 1000.0)::integer);
      raise sqlstate 'PGRST' using
        message = jsonb_build_object('code', 'RATE_LIMITED',
                    'message', format('Too many changes in a short time: try again in %s s.', v_seconds))::text,
        detail = jsonb_build_object('status', 429, 'headers', jsonb_build_object('Retry-After', v_seconds::text))::text;
    end if;
    perform set_config('queue.schedule_write_counted', 'yes', true);
  end if;
  if tg_op = 'INSERT' then
    select p.owner_id into new.owner_id from public.portals p
     where p.id = new.portal_id and (v_user is null or p.owner_id = v_user);
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
    new.next_incremental_at := case
      when new.incremental_every_minutes is null then null
      when tg_op = 'INSERT' or old.incremental_every_minutes is null or old.next_incremental_at is null then now()
      when old.next_incremental_at <= now() then old.next_incremental_at
      else private.sync_slot(new.portal_id, new.incremental_every_minutes,
             old.next_incremental_at - make_interval(mins => old.incremental_every_minutes)
               + make_interval(secs => new.incremental_every_minutes * 30)) end;
  end if;
  if tg_op = 'INSERT' or new.full_every_minutes is distinct from old.full_every_minutes then
    new.next_full_at := case
      when new.full_every_minutes is null then null
      when new.incremental_every_minutes is null and (tg_op = 'INSERT' or old.next_full_at is null) then now()
      when tg_op = 'INSERT' or old.full_every_minutes is null or old.next_full_at is null
        then private.sync_slot(new.portal_id, new.full_every_minutes, now() + make_interval(secs => new.full_every_minutes * 30))
      when old.next_full_at <= now() then old.next_full_at
      else private.sync_slot(new.portal_id, new.full_every_minutes,
             old.next_full_at - make_interval(mins => old.full_every_minutes) + make_interval(secs => new.full_every_minutes * 30)) end;
  end if;
  new.updated_at := now();
  return new;
end;
$$;

-- On the columns an owner writes only: the worker's and the tick's writes (due times, schedule-probe leases) skip it.
create trigger sync_schedules_fill
  before insert or update of portal_id, content_types, incremental_every_minutes, full_every_minutes, overlap_seconds,
                             paused, hubdb_sweep_every_minutes
  on public.sync_schedules
  for each row execute function private.fill_sync_schedule();
