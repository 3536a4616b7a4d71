-- public.create_run(...): a run with one job per content type that has no
-- active job for the portal and kind yet (the active-job unique index and ON
-- CONFLICT DO NOTHING decide, jobs inserted in content-type order so two calls
-- never deadlock), nor a completed one in a run of that kind still in flight
-- (a second trigger joins the first run instead of redoing its finished types;
-- docs/decisions/0037); no run is left when every type is a duplicate. A fetch
-- is full or incremental (p_fetch_mode): an incremental job of a type with a
-- sync mark starts from it (private.incremental_checkpoint); a type without a
-- mark is fetched in full, and so are HubDB tables. A scheduled incremental
-- run probes first (docs/decisions/0046): its types with marks get one probe
-- job between them, which asks HubSpot whether anything changed and adds the
-- fetch jobs of the types that did (complete_probe_job); a CMS type or HubDB
-- rows changed within twice the overlap are asked for their overlap window
-- (windowAfter: the listing an incremental fetch would read, so late arrivals
-- near a change are still seen; docs/decisions/0049, 0055); a probe in flight
-- for the portal makes them duplicates. p_probed: the caller has probed
-- already (report_schedule_probe, decision 0058): the types given are the
-- changed ones and get their fetch jobs, no probe. p_trigger says who
-- asked (user or schedule); a schedule of a portal an operator paused gets
-- nothing (all its types answered as
-- duplicates). Locks only the rows it inserts. For the service role only (the
-- orchestrator, schedule_due_syncs).
create function public.create_run(
  p_portal_id uuid,
  p_requested_by uuid,
  p_kind text,
  p_content_types text[],
  p_totals integer[] default null,
  p_max_attempts integer default null,
  p_lease_seconds integer default null,
  p_fetch_mode text default 'full',
  p_trigger text default 'user',
  p_probed boolean default false
) returns table (run_id uuid, created_types text[], duplicate_types text[])
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_run uuid;
  v_created text[];
  v_kind private.job_kinds;
  v_overlap interval;
  v_sweep_every integer;
  v_done text[];
  v_probed text[];
  v_probe_id bigint;
  v_unfinished constant text[] := array['pending', 'running']; -- runs_finished_iff_terminal: finished_at is null
begin
  if p_portal_id is null or p_requested_by is null or p_kind is null or p_content_types is null then
    raise exception 'create_run: portal, requester, kind and content types are required' using errcode = '22004';
  end if;
  select * into v_kind from private.job_kinds k where k.kind = p_kind;
  if not found then
    raise exception 'create_run: unknown job kind "%"', p_kind using errcode = '22023';
  end if;
  if not private.are_known_content_types(p_content_types) then
    raise exception 'create_run: content types must be 1-8 distinct known types, got %', p_content_types using errcode = '22023';
  end if;
  if p_totals is not null and (cardinality(p_totals) <> cardinality(p_content_types)
      or exists (select 1 from unnest(p_totals) t where t < 0)) then
    raise exception 'create_run: totals must be non-negative and one per content type' using errcode = '22023';
  end if;
  if p_max_attempts is not null and p_max_attempts not between 1 and 100 then
    raise exception 'create_run: max_attempts must be between 1 and 100' using errcode = '22023';
  end if;
  if p_lease_seconds is not null and p_lease_seconds not between 1 and 3600 then
    raise exception 'create_run: lease_seconds must be between 1 and 3600' using errcode = '22023';
  end if;

  if p_kind = 'fetch' and p_fetch_mode is distinct from 'full' and p_fetch_mode is distinct from 'incremental' then
    raise exception 'create_run: a fetch is full or incremental, got %', p_fetch_mode using errcode = '22023';
  end if;
  if p_trigger is null or p_trigger not in ('user', 'schedule') then
    raise exception 'create_run: trigger must be user or schedule' using errcode = '22023';
  end if;

  select p.owner_id into v_owner from public.portals p where p.id = p_portal_id;
  if not found then
    raise exception 'create_run: portal % not found', p_portal_id using errcode = 'P0002';
  end if;

  -- An operator's pause (private.portal_pauses): the schedule creates nothing, every type stays due.
  if p_trigger = 'schedule' and exists (select 1 from private.portal_pauses pp where pp.portal_id = p_portal_id) then
    return query select null::uuid, '{}'::text[], p_content_types;
    return;
  end if;

  insert into public.runs (portal_id, owner_id, requested_by, kind, content_types, fetch_mode, trigger)
  values (p_portal_id, v_owner, p_requested_by, p_kind, p_content_types,
          case when p_kind = 'fetch' then p_fetch_mode end, p_trigger)
  returning id into v_run;
  select make_interval(secs => s.overlap_seconds), s.hubdb_sweep_every_minutes into v_overlap, v_sweep_every
    from public.sync_schedules s where s.portal_id = p_portal_id;
  v_overlap := coalesce(v_overlap, interval '120 seconds');
  v_sweep_every := coalesce(v_sweep_every, 0); -- without a schedule: every cycle sweeps

  -- Done in a run still in flight: part of that run, not redone (failed or stopped types may be asked again).
  -- In flight by status (v_unfinished), not finished_at: the portal's runs by its index, never every
  -- unfinished run read from runs_unfinished_idx (decision 0051).
  select coalesce(array_agg(distinct d.content_type), '{}') into v_done
    from public.runs r join public.jobs d on d.run_id = r.id
   where r.portal_id = p_portal_id and r.kind = p_kind and r.status = any (v_unfinished) and d.status = 'completed'
     and d.content_type = any (p_content_types);

  -- A scheduled incremental: the types with settled marks are probed first, by one job.
  if p_kind = 'fetch' and p_fetch_mode = 'incremental' and p_trigger = 'schedule' and not p_probed then
    select array_agg(t.content_type order by t.content_type) into v_probed
      from unnest(p_content_types) t(content_type)
      join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
     where m.high_water is not null
       and (m.archived_high_water is not null or t.content_type in ('hubdb_tables', 'hubdb_rows'))
       and not exists (select 1 from public.jobs a
                        where a.portal_id = p_portal_id and a.kind = 'fetch' and a.content_type = t.content_type
                          and a.status in ('pending', 'running'))
       and t.content_type <> all (v_done);
    if v_probed is not null then
      insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, max_attempts, checkpoint)
      select v_run, p_portal_id, v_owner, 'probe', null, k.default_max_attempts,
             private.probe_checkpoint(p_portal_id, v_probed, v_overlap, v_sweep_every)
        from private.job_kinds k where k.kind = 'probe'
      on conflict (portal_id) where kind = 'probe' and status in ('pending', 'running') do nothing
      returning id into v_probe_id;
    end if;
  end if;

  with inserted as (
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, progress_total, max_attempts, lease_seconds, checkpoint)
    select v_run, p_portal_id, v_owner, p_kind, t.content_type,
           case when p_totals is not null then t.total
                when p_kind = 'export' then (select count(*)::integer from public.hubspot_content c
                                             where c.portal_id = p_portal_id and c.content_type = t.content_type
                                               and c.deleted_at is null)
           end,
           coalesce(p_max_attempts, v_kind.default_max_attempts), p_lease_seconds,
           case when p_kind = 'fetch' and p_fetch_mode = 'incremental' then private.incremental_checkpoint(m, v_overlap, v_sweep_every) end
      from unnest(p_content_types, p_totals) with ordinality as t(content_type, total, ord)
      left join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
     where t.content_type is not null
       -- Probed (or a probe in flight covers them): no fetch job now.
       and t.content_type <> all (coalesce(v_probed, '{}'))
       and t.content_type <> all (v_done)
     -- One global insert order, not the caller's: two calls listing the same
     -- types in different orders would each wait on the other's uncommitted
     -- job (ON CONFLICT waits for an in-progress insert) and deadlock.
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing
    returning content_type
  )
  select array_agg(t.content_type order by t.ord) into v_created
    from unnest(p_content_types) with ordinality as t(content_type, ord)
   where t.content_type in (select i.content_type from inserted i)
      or (v_probe_id is not null and t.content_type = any (v_probed));

  if v_created is null then
    delete from public.runs r where r.id = v_run;
    return query select null::uuid, '{}'::text[], p_content_types;
    return;
  end if;

  update public.runs r set content_types = v_created,
         jobs_total = (select count(*)::integer from public.jobs j where j.run_id = v_run)
   where r.id = v_run;
  return query select v_run, v_created,
    coalesce((select array_agg(t) from unnest(p_content_types) t where t <> all (v_created)), '{}'::text[]);
end;
$$;
