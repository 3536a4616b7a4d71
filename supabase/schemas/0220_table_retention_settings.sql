-- private.retention_settings: the one row saying how long finished history is
-- kept and how much one prune_queue_history call deletes at most. Read by
-- prune_queue_history; changed by operators (SQL).
create table private.retention_settings (
  id boolean primary key default true check (id),
  keep_finished interval not null default interval '30 days'
    constraint retention_settings_keep_finished_positive check (keep_finished >= interval '0'),
  batch_size integer not null default 5000
    constraint retention_settings_batch_size_range check (batch_size between 1 and 100000)
);
comment on table private.retention_settings is
  'Retention: finished jobs, runs and notifications older than keep_finished are deleted, at most batch_size jobs and batch_size runs per prune_queue_history call.';
alter table private.retention_settings enable row level security;
insert into private.retention_settings default values;
