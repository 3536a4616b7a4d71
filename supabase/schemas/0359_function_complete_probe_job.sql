-- public.complete_probe_job(job, token, answers, tables_pages): the holder of
-- a probe (docs/decisions/0046) reports what HubSpot answered, and the probe
-- decides which of its types changed: a CMS type when HubSpot counts any item
-- changed after its mark or archived after its archive mark (answers: {type:
-- {changed, archived}}, the totals of two limit=1 listings; a type asked for
-- its overlap window, near its last change: {window, archived}, window the
-- page HubSpot sent, changed when it is not one whole page of items stored
-- live as they are (same data, hence same update time), the answer its
-- incremental fetch would give); HubDB tables
-- when the tables list (tables_pages: every page of it, required when HubDB
-- is probed) is not the tables stored live, table for table with the same
-- update time; HubDB rows when
-- a table was updated after their mark (near their last change, after their
-- window: {windows: {tableId: page}}, the first page of each such table's
-- rows updated after windowAfter, changed as a CMS window is; decision 0055),
-- or, on a sweep cycle, a table holds fewer rows
-- than are stored live or a table with stored rows is gone. A type with no
-- mark counts as changed. The changed types get incremental fetch jobs in the
-- probe's run (a type with an active fetch job meanwhile gets none; a sweep
-- cycle's rows job the counts of stored rows the probe made, decision 0056), and a
-- changed HubDB type the list, stored for the run (private.
-- hubdb_tables_lists: its jobs read it no more); the others are recorded as
-- synced now (last_incremental_at, and a sweep cycle's last_sweep_at). Then
-- the probe completes (result: probed, changed) and the run settles: with
-- nothing changed, a quiet cycle of one job. False when fenced off. Locks the
-- run, then the job (and the portal's list row when it stores). The service role only.
create function public.complete_probe_job(p_job_id bigint, p_token bigint, p_answers jsonb, p_tables_pages text[] default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_types text[];
  v_changed text[];
  v_tables jsonb;
  v_windows jsonb; -- {type: page}: the overlap windows, parsed once
  v_row_windows jsonb; -- {tableId: page}: HubDB rows' windows near their last change, parsed once
  v_rows_after timestamptz; -- HubDB rows' windowAfter
  v_overlap interval;
  v_sweep_every integer;
  v_sweep boolean;
  v_stored_rows jsonb; -- a sweep cycle's live HubDB rows stored per table, counted once: the decision's and the rows job's
  v_added integer := 0;
begin
  if p_answers is null or jsonb_typeof(p_answers) <> 'object' then
    raise exception 'complete_probe_job: answers must be an object of {changed, archived} totals per CMS type' using errcode = '22023';
  end if;
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'probe'
     for update;
  if not found then
    return false;
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(v_job.checkpoint -> 'types') k;
  if exists (select 1 from unnest(v_types) t
              where t not in ('hubdb_tables', 'hubdb_rows')
                and (coalesce(jsonb_typeof(p_answers #> array[t, 'archived']), '') <> 'number'
                     or case when v_job.checkpoint #> array['types', t, 'windowAfter'] is null
                             then coalesce(jsonb_typeof(p_answers #> array[t, 'changed']), '') <> 'number'
                             else coalesce(jsonb_typeof(p_answers #> array[t, 'window']), '') <> 'string' end)) then
    raise exception 'complete_probe_job: every CMS type probed needs its {changed, archived} totals ({window, archived} near its last change)' using errcode = '22023';
  end if;
  select jsonb_object_agg(t, (p_answers #>> array[t, 'window'])::jsonb) into v_windows
    from unnest(v_types) t where jsonb_typeof(p_answers #> array[t, 'window']) = 'string';
  if exists (select 1 from jsonb_each(coalesce(v_windows, '{}')) w(type, page) where not private.is_listing_page(w.page)) then
    raise exception 'complete_probe_job: a window must be a listing page: {total, results: [{id, ...}]}' using errcode = '22023';
  end if;
  v_sweep := coalesce((v_job.checkpoint #>> '{types,hubdb_rows,sweep}')::boolean, false);
  if v_sweep then -- (set only under types.hubdb_rows: HubDB rows are probed)
    select coalesce(jsonb_object_agg(s.table_id, s.live_rows), '{}'::jsonb) into v_stored_rows
      from public.stored_hubdb_rows(v_job.portal_id) s;
  end if;
  v_rows_after := (v_job.checkpoint #>> '{types,hubdb_rows,windowAfter}')::timestamptz;
  if v_rows_after is not null then
    if jsonb_typeof(p_answers #> '{hubdb_rows,windows}') is distinct from 'object'
       or exists (select 1 from jsonb_each(p_answers #> '{hubdb_rows,windows}') w where jsonb_typeof(w.value) <> 'string') then
      raise exception 'complete_probe_job: HubDB rows near their last change need {windows: {tableId: page}}' using errcode = '22023';
    end if;
    select jsonb_object_agg(w.key, w.value::jsonb) into v_row_windows from jsonb_each_text(p_answers #> '{hubdb_rows,windows}') w;
    if exists (select 1 from jsonb_each(coalesce(v_row_windows, '{}')) w(table_id, page) where not private.is_listing_page(w.page)) then
      raise exception 'complete_probe_job: a window must be a listing page: {total, results: [{id, ...}]}' using errcode = '22023';
    end if;
  end if;

  if v_types && array['hubdb_tables', 'hubdb_rows'] then
    if p_tables_pages is null or cardinality(p_tables_pages) = 0 or array_position(p_tables_pages, null) is not null then
      raise exception 'complete_probe_job: a probe of HubDB needs every page of the tables list' using errcode = '22023';
    end if;
    select coalesce(jsonb_agg(e), '[]'::jsonb) into v_tables
      from unnest(p_tables_pages) p(page) cross join lateral jsonb_array_elements(p.page::jsonb -> 'results') e;
  end if;

  select array_agg(t.content_type order by t.content_type) into v_changed
    from unnest(v_types) t(content_type)
    left join public.sync_marks m on m.portal_id = v_job.portal_id and m.content_type = t.content_type
   where m.high_water is null
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and ((p_answers #>> array[t.content_type, 'changed'])::numeric > 0
               or (p_answers #>> array[t.content_type, 'archived'])::numeric > 0))
      -- The overlap window: more than its page holds, or an item not stored live as it is (new, updated, late).
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and exists (select 1 from (select v_windows -> t.content_type as page) w
                       where (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                          or exists (select 1 from jsonb_array_elements(w.page -> 'results') e
                                      -- The stored item as HubSpot lists it (its update time is part of it), found by
                                      -- id: a scalar subquery, never an anti join that reads the whole type (decision 0051).
                                      where (select c.data from public.hubspot_content c
                                              where c.portal_id = v_job.portal_id and c.content_type = t.content_type
                                                and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from e)))
      -- The tables list is whole: changed when a table is not stored live with its update time (HubSpot moves
      -- it at every publish; the stored one is a column, so no table's data is read), or the stored hold more.
      or (t.content_type = 'hubdb_tables'
          and (exists (select 1 from jsonb_array_elements(v_tables) e
                        where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                           or (select c.hubspot_updated_at from public.hubspot_content c
                                where c.portal_id = v_job.portal_id and c.content_type = 'hubdb_tables'
                                  and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from (e ->> 'updatedAt')::timestamptz)
               or jsonb_array_length(v_tables) <> (select count(*) from public.hubspot_content c
                                                    where c.portal_id = v_job.portal_id and c.content_type = 'hubdb_tables'
                                                      and c.deleted_at is null)))
      or (t.content_type = 'hubdb_rows' and v_rows_after is null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                       where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                          or (e ->> 'updatedAt')::timestamptz > m.high_water))
      -- Near their last change: each table updated after the window, by its window's page (as a CMS window;
      -- a row is stored as listed with its table's id merged in). No window for such a table: changed.
      or (t.content_type = 'hubdb_rows' and v_rows_after is not null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                        cross join lateral (select v_row_windows -> (e ->> 'id') as page) w
                       where (jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                              or (e ->> 'updatedAt')::timestamptz > v_rows_after)
                         and (w.page is null
                              or (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                              or exists (select 1 from jsonb_array_elements(w.page -> 'results') r
                                          where (select c.data from public.hubspot_content c
                                                  where c.portal_id = v_job.portal_id and c.content_type = 'hubdb_rows'
                                                    and c.hubspot_id = (e ->> 'id') || ':' || (r ->> 'id') and c.deleted_at is null)
                                                is distinct from r || jsonb_build_object('tableId', e ->> 'id')))))
      or (t.content_type = 'hubdb_rows' and v_sweep
          and exists (select 1 from jsonb_each_text(v_stored_rows) s(table_id, live_rows)
                        left join jsonb_array_elements(v_tables) e on e ->> 'id' = s.table_id
                       where e is null or coalesce((e ->> 'rowCount')::numeric, 0) < s.live_rows::numeric));

  if v_changed is not null then
    select make_interval(secs => s.overlap_seconds), s.hubdb_sweep_every_minutes into v_overlap, v_sweep_every
      from public.sync_schedules s where s.portal_id = v_job.portal_id;
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, max_attempts, checkpoint)
    select v_job.run_id, v_job.portal_id, v_job.owner_id, 'fetch', t.content_type, k.default_max_attempts,
           private.incremental_checkpoint(m, coalesce(v_overlap, interval '120 seconds'), coalesce(v_sweep_every, 0),
                                          case when t.content_type = 'hubdb_rows' then v_stored_rows end)
      from unnest(v_changed) t(content_type)
      left join public.sync_marks m on m.portal_id = v_job.portal_id and m.content_type = t.content_type
      cross join private.job_kinds k
     where k.kind = 'fetch'
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing;
    get diagnostics v_added = row_count;
    update public.runs r set jobs_total = r.jobs_total + v_added where r.id = v_job.run_id;
    -- The list the probe read, for the run's HubDB jobs (take_hubdb_tables_list answers 'use').
    if v_changed && array['hubdb_tables', 'hubdb_rows'] then
      insert into private.hubdb_tables_lists as l (portal_id, run_id, pages, read_at)
      values (v_job.portal_id, v_job.run_id, p_tables_pages, now())
      on conflict (portal_id) do update
         set run_id = excluded.run_id, pages = excluded.pages, read_at = excluded.read_at, reader_job_id = null, read_until = null;
    end if;
  end if;

  update public.sync_marks m
     set last_incremental_at = now(), updated_at = now(),
         last_sweep_at = case when m.content_type = 'hubdb_rows' and v_sweep then v_job.created_at else m.last_sweep_at end
   where m.portal_id = v_job.portal_id and m.content_type = any (v_types)
     and m.content_type <> all (coalesce(v_changed, '{}'));

  return public.complete_job(p_job_id, p_token,
    jsonb_build_object('mode', 'probe', 'probed', to_jsonb(v_types), 'changed', to_jsonb(coalesce(v_changed, '{}')),
                       'fetched', 0, 'added', 0, 'updated', 0, 'deleted', 0));
end;
$$;
