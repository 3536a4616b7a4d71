-- private.worker_settings: the one row of queue-wide worker settings, the cap
-- on concurrent worker invocations. Read by begin_worker_invocation (FOR
-- UPDATE: concurrent callers serialise on it); changed by operators (SQL).
create table private.worker_settings (
  id boolean primary key default true check (id),
  max_concurrent_invocations integer not null default 4 check (max_concurrent_invocations between 1 and 200)
);
comment on table private.worker_settings is
  'Worker invocation cap. max_concurrent_invocations × the worker''s pool size bounds the database connections the workers use.';
alter table private.worker_settings enable row level security;
insert into private.worker_settings default values;
