-- private.incremental_checkpoint(mark, overlap, sweep_every): the first
-- checkpoint of an incremental fetch job of the mark's type: {mode, since,
-- phase, after, finished}, since the mark less the schedule's overlap; HubDB
-- rows also hubdbSweep, whether this cycle sweeps (no sweep cadence, no sweep
-- yet, or the last sweep the cadence old, 10 s early as ticks). Null (a full
-- fetch) without a mark, and for HubDB tables (their whole list is one request,
-- shared with the rows job: decision 0045). create_run and complete_probe_job
-- start jobs with it; owner only.
create function private.incremental_checkpoint(p_mark public.sync_marks, p_overlap interval, p_sweep_every integer)
returns jsonb
language plpgsql
stable
set search_path = ''
as $$
begin
  return case when p_mark.high_water is not null and p_mark.content_type <> 'hubdb_tables' then
    jsonb_build_object('mode', 'incremental', 'since', p_mark.high_water - p_overlap, 'phase', 'changed',
                       'after', null, 'finished', false)
    || case when p_mark.content_type = 'hubdb_rows' then jsonb_build_object('hubdbSweep', coalesce(p_sweep_every, 0) = 0
         or p_mark.last_sweep_at is null
         or p_mark.last_sweep_at <= now() + interval '10 seconds' - make_interval(mins => p_sweep_every)) else '{}' end
  end;
end;
$$;
