-- private.worker_invocation_log: how recent worker invocations ended (last
-- hour, at most 500 rows), for queue_stats. Written and trimmed by
-- finish_worker_invocation only. stop_reason is one of the stop reasons,
-- whose one list is web/stop-reasons.js (the worker's StopReason is its keys);
-- tests/stop-reasons.test.ts holds this CHECK, and 0211's, to that list.
create table private.worker_invocation_log (
  id uuid primary key,
  source text not null,
  started_at timestamptz not null,
  ended_at timestamptz not null default now(),
  stop_reason text not null constraint stop_reason_is_known
    check (stop_reason in ('queue_empty', 'time_budget', 'cpu_budget', 'shutdown', 'database_error')),
  shutdown_reason text,
  claimed integer not null default 0,
  completed integer not null default 0,
  released integer not null default 0,
  failed integer not null default 0,
  cpu_ms integer
);
create index worker_invocation_log_ended_idx on private.worker_invocation_log (ended_at desc);
alter table private.worker_invocation_log enable row level security;
