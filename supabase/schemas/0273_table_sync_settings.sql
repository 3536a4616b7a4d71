-- private.sync_settings: the one row of settings for the scheduled syncs:
-- how many runs one tick of public.schedule_due_syncs creates at most (the
-- oldest due first; the rest stay due for the next tick, so a burst of due
-- schedules never makes one long transaction), and how long a due
-- incremental waits for a worker lane's schedule probe before the tick makes
-- it a run (docs/decisions/0058; 0: no schedule probes, the tick makes every
-- due incremental a run at once). Changed by
-- operators (SQL).
create table private.sync_settings (
  id boolean primary key default true check (id),
  max_runs_per_tick integer not null default 1000 check (max_runs_per_tick between 1 and 100000),
  probe_grace_seconds integer not null default 60 check (probe_grace_seconds between 0 and 86400)
);
comment on table private.sync_settings is
  'Scheduled sync settings. max_runs_per_tick ÷ the tick interval (a minute) is the most runs the tick starts per minute; probe_grace_seconds: how long a due incremental waits for a lane''s schedule probe.';
alter table private.sync_settings enable row level security;
insert into private.sync_settings default values;
