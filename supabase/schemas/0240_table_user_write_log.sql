-- private.user_write_log: each user's recent counted orchestrator writes (a
-- rolling-window log, at most max_writes long). Written by take_user_write
-- only, which locks the user's row FOR UPDATE.
create table private.user_write_log (
  user_id uuid primary key,
  written_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table private.user_write_log is 'Recent orchestrator writes per user (rolling window), for the write limit.';
alter table private.user_write_log enable row level security;
