-- private.worker_invocation_minutes: every worker invocation counted, per
-- minute it ended in, source and stop reason, for the last 24 hours: the
-- figures queue_stats gives over a stated period (worker_invocation_log keeps
-- only the newest rows, at most 500, to list). Written and trimmed by
-- finish_worker_invocation only (one upsert per invocation). stop_reason: as
-- the log's (0210), the same CHECK.
create table private.worker_invocation_minutes (
  minute timestamptz not null,
  source text not null,
  stop_reason text not null constraint stop_reason_is_known
    check (stop_reason in ('queue_empty', 'time_budget', 'cpu_budget', 'shutdown', 'database_error')),
  invocations integer not null default 0 check (invocations >= 0),
  claimed integer not null default 0 check (claimed >= 0),
  completed integer not null default 0 check (completed >= 0),
  released integer not null default 0 check (released >= 0),
  failed integer not null default 0 check (failed >= 0),
  primary key (minute, source, stop_reason)
);
comment on table private.worker_invocation_minutes is
  'Worker invocations per minute ended, source and stop reason (24 hours): counts over a period, whatever the invocation log''s cap.';
alter table private.worker_invocation_minutes enable row level security;
