-- private.probe_checkpoint(portal, types, overlap, sweep_every): what a probe
-- asks HubSpot of each type (docs/decisions/0046): {types: {type: question}},
-- a CMS type the changes after its mark and archives after its archive mark,
-- near its last change (within twice the overlap) its overlap window instead
-- (windowAfter; decisions 0049, 0055); HubDB rows whether this cycle sweeps;
-- HubDB tables nothing (the whole list is compared). Only the types with
-- settled marks are asked about (a CMS type's archive mark set; none:
-- {types: {}}): the others count as changed. create_run (a probe job's
-- checkpoint) and claim_schedule_probe (a schedule probe's) ask it; owner only.
create function private.probe_checkpoint(p_portal_id uuid, p_types text[], p_overlap interval, p_sweep_every integer)
returns jsonb
language plpgsql
stable
set search_path = ''
-- Its statement's custom plans never beat the generic one: planned once, not at every quiet cycle.
set plan_cache_mode = force_generic_plan
as $$
begin
  return jsonb_build_object('types', coalesce((select jsonb_object_agg(m.content_type,
      case when m.content_type = 'hubdb_tables' then '{}'::jsonb
           when m.content_type = 'hubdb_rows' then jsonb_build_object('sweep', private.hubdb_sweep_due(m, p_sweep_every))
           else jsonb_build_object('updatedAfter', m.high_water, 'archivedAfter', m.archived_high_water) end
      || case when m.content_type <> 'hubdb_tables' and m.high_water >= now() - 2 * p_overlap
              then jsonb_build_object('windowAfter', m.high_water - p_overlap) else '{}' end)
    from public.sync_marks m
   where m.portal_id = p_portal_id and m.content_type = any (p_types)
     and (m.archived_high_water is not null or m.content_type in ('hubdb_tables', 'hubdb_rows'))), '{}'));
end;
$$;
