-- private.worker_invocations: one row (an invocation lease) per running worker
-- invocation, so no burst of triggers runs more invocations at once than the
-- cap allows; a killed invocation's invocation lease frees itself when it expires.
-- Written by begin/end/finish_worker_invocation only.
create table private.worker_invocations (
  id uuid primary key,
  started_at timestamptz not null default now(),
  lease_expires_at timestamptz not null,
  source text not null check (char_length(source) between 1 and 40)
);
create index worker_invocations_lease_idx on private.worker_invocations (lease_expires_at);
alter table private.worker_invocations enable row level security;
