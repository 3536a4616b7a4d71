-- public.sync_schedules: a portal's sync schedule, at most one per portal:
-- an incremental fetch every N minutes and a full reconcile (every item, an id
-- sweep that finds hard deletions, the marks reset) every M minutes, of the
-- listed content types; due times fall on the portal's own slots
-- (private.sync_slot). The owner creates, changes and deletes it under RLS
-- (policies in 0800, column grants in 0810); a trigger fills in the owner and
-- the next due times. A due incremental is probed by a worker lane from the
-- row itself (claim_schedule_probe, report_schedule_probe: a run only when
-- something changed or the probe failed; docs/decisions/0058);
-- public.schedule_due_syncs (the pg_cron tick) creates the due full runs, and
-- the incremental runs no lane probed within the grace. docs/sync.md.
create table public.sync_schedules (
  portal_id uuid primary key,
  owner_id uuid not null,
  content_types text[] not null,
  incremental_every_minutes integer default 15
    constraint sync_schedules_incremental_every check (incremental_every_minutes between 1 and 1440),
  full_every_minutes integer default 1440
    constraint sync_schedules_full_every check (full_every_minutes between 15 and 10080),
  overlap_seconds integer not null default 120
    constraint sync_schedules_overlap check (overlap_seconds between 0 and 3600),
  paused boolean not null default false,
  -- How often an incremental HubDB rows job sweeps the tables that lost rows (0: every cycle).
  hubdb_sweep_every_minutes integer not null default 60
    constraint sync_schedules_hubdb_sweep_every check (hubdb_sweep_every_minutes between 0 and 10080),
  next_incremental_at timestamptz,
  next_full_at timestamptz,
  last_scheduled_at timestamptz,
  last_run_id uuid,
  -- The schedule probe a worker lane holds (docs/decisions/0058), under the schedule-probe lease:
  -- its fencing token, when it was claimed, when the lease expires.
  schedule_probe_fencing_token bigint not null default 0,
  schedule_probe_claimed_at timestamptz,
  schedule_probe_lease_expires_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint sync_schedules_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint sync_schedules_schedule_probe_lease
    check ((schedule_probe_lease_expires_at is null) = (schedule_probe_claimed_at is null)),
  constraint sync_schedules_something_scheduled check (incremental_every_minutes is not null or full_every_minutes is not null)
);
comment on table public.sync_schedules is
  'A portal''s sync schedule (incremental every N minutes, full reconcile every M), written by its owner under RLS.';
comment on column public.sync_schedules.overlap_seconds is
  'An incremental fetch lists items updated after the type''s mark minus this (clock skew, late writes, items sharing one update time).';
comment on column public.sync_schedules.hubdb_sweep_every_minutes is
  'An incremental cycle sweeps HubDB tables for deleted rows when the last sweep (or full fetch) of hubdb_rows is this old; 0: every cycle.';
comment on column public.sync_schedules.paused is 'A paused schedule creates no runs (the due times keep moving).';
-- The tick's search: unpaused schedules by their next due time.
create index sync_schedules_due_idx on public.sync_schedules (least(next_incremental_at, next_full_at)) where not paused;
create index sync_schedules_owner_idx on public.sync_schedules (owner_id);
-- Not indexed (docs/decisions/0009): last_run_id is no foreign key (runs are pruned).
alter table public.sync_schedules enable row level security;
