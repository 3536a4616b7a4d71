-- private.hubdb_sweep_due(mark, sweep_every): whether a cycle of the HubDB
-- rows mark sweeps (reads the tables that lost rows whole): no sweep cadence,
-- no sweep yet, or the last sweep the cadence old (10 s early, as ticks are).
-- create_run asks it for a probe, incremental_checkpoint for a fetch job
-- (plpgsql: called per cycle, decision 0052). Owner only.
create function private.hubdb_sweep_due(p_mark public.sync_marks, p_sweep_every integer)
returns boolean
language plpgsql
stable
set search_path = ''
as $$
begin
  return coalesce(p_sweep_every, 0) = 0
      or p_mark.last_sweep_at is null
      or p_mark.last_sweep_at <= now() + interval '10 seconds' - make_interval(mins => p_sweep_every);
end;
$$;
