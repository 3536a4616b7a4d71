-- private.incremental_checkpoint(mark, overlap, sweep_every, stored_rows): the
-- first checkpoint of an incremental fetch job of the mark's type: {mode,
-- since, phase, after, finished}, since the mark less the schedule's overlap;
-- HubDB rows also hubdbSweep (hubdb_sweep_due) and, on a sweep cycle,
-- storedRows: the live rows stored per table ({tableId: count}; stored_rows
-- when the caller counted them, else counted here), which the job compares
-- with HubSpot's rowCount instead of counting them again (decision 0056).
-- Null (a full fetch) without a mark, and for HubDB tables (their whole list
-- is one request, shared with the rows job: decision 0045). create_run and
-- complete_probe_job start jobs with it; owner only.
create function private.incremental_checkpoint(p_mark public.sync_marks, p_overlap interval, p_sweep_every integer,
                                               p_stored_rows jsonb default null)
returns jsonb
language plpgsql
stable
set search_path = ''
as $$
declare
  v_sweep boolean;
begin
  if p_mark.high_water is null or p_mark.content_type = 'hubdb_tables' then
    return null;
  end if;
  if p_mark.content_type <> 'hubdb_rows' then
    return jsonb_build_object('mode', 'incremental', 'since', p_mark.high_water - p_overlap, 'phase', 'changed',
                              'after', null, 'finished', false);
  end if;
  v_sweep := private.hubdb_sweep_due(p_mark, p_sweep_every);
  return jsonb_build_object('mode', 'incremental', 'since', p_mark.high_water - p_overlap, 'phase', 'changed',
                            'after', null, 'finished', false, 'hubdbSweep', v_sweep)
    || case when v_sweep then jsonb_build_object('storedRows', coalesce(p_stored_rows,
         (select coalesce(jsonb_object_agg(s.table_id, s.live_rows), '{}'::jsonb)
            from public.stored_hubdb_rows(p_mark.portal_id) s))) else '{}'::jsonb end;
end;
$$;
