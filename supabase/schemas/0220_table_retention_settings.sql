-- private.retention_settings: the one row saying how long finished history is
-- kept, how much one prune_queue_history call deletes at most, how many
-- quiet cycles per portal settlement keeps in full, and how many older ones
-- gather before they are folded together. Read by
-- prune_queue_history and compact_quiet_cycles; changed by operators (SQL).
create table private.retention_settings (
  id boolean primary key default true check (id),
  keep_finished interval not null default interval '30 days'
    constraint retention_settings_keep_finished_positive check (keep_finished >= interval '0'),
  batch_size integer not null default 5000
    constraint retention_settings_batch_size_range check (batch_size between 1 and 100000),
  keep_quiet_cycles integer not null default 3
    constraint retention_settings_keep_quiet_cycles_range check (keep_quiet_cycles between 1 and 1000),
  quiet_cycles_per_fold integer not null default 8
    constraint retention_settings_quiet_cycles_per_fold_range check (quiet_cycles_per_fold between 1 and 100)
);
comment on table private.retention_settings is
  'Retention: finished jobs, runs, notifications and quiet-cycle roll-ups older than keep_finished are deleted, at most batch_size jobs and batch_size runs per prune_queue_history call; each portal''s last keep_quiet_cycles quiet cycles stay in full, older ones folded quiet_cycles_per_fold at a time.';
alter table private.retention_settings enable row level security;
insert into private.retention_settings default values;
