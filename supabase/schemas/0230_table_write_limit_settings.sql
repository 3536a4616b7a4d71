-- private.write_limit_settings: the one row of the orchestrator's per-user
-- write limit (at most max_writes in any rolling window_seconds). Read by
-- take_user_write; changed by operators (SQL).
create table private.write_limit_settings (
  id boolean primary key default true check (id),
  max_writes integer not null default 60 check (max_writes between 1 and 100000),
  window_seconds integer not null default 60 check (window_seconds between 1 and 86400)
);
comment on table private.write_limit_settings is
  'Per-user orchestrator write limit: max_writes in any rolling window_seconds. Change the row to change the limit.';
alter table private.write_limit_settings enable row level security;
insert into private.write_limit_settings default values;
