-- public.runs: one user request (fetch or export of some content types) and
-- its counters; its status follows its jobs (settled by the functions that end
-- them; a quiet scheduled cycle is marked quiet and later folded, 0307). Owners
-- read their own rows (policy in 0800); only the service role writes. Lock
-- order everywhere: a run row before any of its job rows. Rationale:
-- docs/decisions/0002-job-state-machine-and-settlement.md.
create table public.runs (
  id uuid primary key default gen_random_uuid(),
  portal_id uuid not null,
  owner_id uuid not null,
  requested_by uuid not null references auth.users (id) on delete cascade,
  kind text not null references private.job_kinds (kind),
  status text not null default 'pending',
  content_types text[] not null,
  jobs_total integer not null default 0,
  jobs_completed integer not null default 0,
  jobs_failed integer not null default 0,
  jobs_stopped integer not null default 0,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  waiting_reason text,
  fetch_mode text,
  trigger text not null default 'user',
  quiet boolean not null default false,
  constraint runs_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint runs_finished_iff_terminal check (
    (status in ('pending', 'running') and finished_at is null)
    or (status in ('completed', 'partially_failed', 'failed', 'stopped') and finished_at is not null)),
  constraint runs_fetch_mode_is_valid check (
    fetch_mode is null or (kind = 'fetch' and fetch_mode in ('full', 'incremental'))),
  constraint runs_trigger_is_valid check (trigger in ('user', 'schedule')),
  constraint runs_quiet_is_completed_schedule check (
    not quiet or (status = 'completed' and trigger = 'schedule' and kind = 'fetch')),
  constraint runs_counts_within_total check (jobs_completed + jobs_failed + jobs_stopped <= jobs_total)
);
comment on constraint runs_finished_iff_terminal on public.runs is
  'The status is one of pending, running (not finished) or completed, partially_failed, failed, stopped (finished).';
comment on column public.runs.waiting_reason is
  'Why the run is waiting (one of its jobs was parked); null once its jobs report work again or it ends.';
comment on column public.runs.fetch_mode is
  'A fetch: full (every item, unseen ones marked deleted) or incremental (what changed since the type''s mark; docs/sync.md). Null for exports.';
comment on column public.runs.trigger is 'Who asked: a user, or the portal''s sync schedule.';
comment on column public.runs.quiet is
  'A quiet cycle: a scheduled fetch whose jobs all completed having added, updated and deleted nothing. Set at settlement; the portal''s last few are kept, older ones folded into public.quiet_cycles.';
create index runs_portal_created_idx on public.runs (portal_id, created_at desc);
create index runs_owner_created_idx on public.runs (owner_id, created_at desc);
-- Unfinished runs by id: a run looked up by id "and unfinished" is found by its id
-- whichever index the planner takes (keyed by anything else, this small index was
-- read whole and filtered by id whenever statistics thought it empty).
create index runs_unfinished_idx on public.runs (id) where finished_at is null;
-- Finished runs by age: retention finds the old ones without reading the rest.
create index runs_finished_idx on public.runs (finished_at) where finished_at is not null;
-- A portal's quiet cycles, newest first: settlement keeps the last few and folds the rest.
create index runs_portal_quiet_idx on public.runs (portal_id, finished_at desc) where quiet;
-- Deleting a user cascades to the runs they requested (perhaps of another owner's portal).
create index runs_requested_by_idx on public.runs (requested_by);
-- Not indexed (docs/decisions/0009): runs_kind_fkey (job_kinds rows are never deleted) and
-- runs_portal_owner_fkey (a portal's cascade finds its runs by runs_portal_created_idx).
alter table public.runs enable row level security;
