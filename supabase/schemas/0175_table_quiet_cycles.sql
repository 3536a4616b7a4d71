-- public.quiet_cycles: per portal and UTC day, the quiet cycles: scheduled
-- fetch runs that completed having changed nothing, folded away (their runs
-- and jobs deleted by private.compact_quiet_cycles, the portal's last few
-- kept in full), and quiet schedule probes, which never had a run (counted by
-- report_schedule_probe, no job). Owners read their own rows (policy in 0800);
-- only settlement and the probe's report write. Rationale:
-- docs/decisions/0041-quiet-cycles-folded-at-settlement.md, 0058.
create table public.quiet_cycles (
  portal_id uuid not null,
  owner_id uuid not null,
  day date not null,
  cycles integer not null check (cycles > 0),
  jobs integer not null check (jobs >= 0),
  items_checked bigint not null check (items_checked >= 0),
  first_finished_at timestamptz not null,
  last_finished_at timestamptz not null,
  primary key (portal_id, day),
  constraint quiet_cycles_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint quiet_cycles_first_before_last check (first_finished_at <= last_finished_at)
);
comment on table public.quiet_cycles is
  'Quiet scheduled cycles folded away, per portal and UTC day (the day of their finish): how many, their jobs, the items they checked, first and last finish.';
create index quiet_cycles_owner_idx on public.quiet_cycles (owner_id);
-- Retention finds the days past keep_finished without reading the rest.
create index quiet_cycles_day_idx on public.quiet_cycles (day);
-- Not indexed (docs/decisions/0009): the portal's cascade finds its rows by the primary key, which starts with portal_id.
alter table public.quiet_cycles enable row level security;
