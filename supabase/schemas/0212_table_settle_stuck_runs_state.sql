-- private.settle_stuck_runs_state: the one row saying how often the worker's
-- invocations run the stuck-run safety net (settle_stuck_runs(true): at most
-- once per `every` across all of them) and when it last ran. Read and
-- written by settle_stuck_runs; `every` changed by operators (SQL).
create table private.settle_stuck_runs_state (
  id boolean primary key default true check (id),
  every interval not null default interval '30 seconds'
    constraint settle_stuck_runs_state_every_non_negative check (every >= interval '0'),
  last_settled_at timestamptz not null default '-infinity'
);
comment on table private.settle_stuck_runs_state is
  'The stuck-run safety net''s cadence: worker invocations run settle_stuck_runs at most once per `every` between them all (last_settled_at).';
alter table private.settle_stuck_runs_state enable row level security;
insert into private.settle_stuck_runs_state default values;
