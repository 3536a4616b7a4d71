-- private.sync_settings: the one row of settings for the scheduled syncs:
-- how many runs one tick of public.schedule_due_syncs creates at most (the
-- oldest due first; the rest stay due for the next tick, so a burst of due
-- schedules never makes one long transaction). Changed by operators (SQL).
create table private.sync_settings (
  id boolean primary key default true check (id),
  max_runs_per_tick integer not null default 1000 check (max_runs_per_tick between 1 and 100000)
);
comment on table private.sync_settings is
  'Scheduled sync settings. max_runs_per_tick ÷ the tick interval (a minute) is the most portal-cycles the schedules start per minute.';
alter table private.sync_settings enable row level security;
insert into private.sync_settings default values;
