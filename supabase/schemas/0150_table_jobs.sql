-- public.jobs: the queue. One row per unit of work, leased to one worker at a
-- time under a fencing token (private.fencing_token_seq, a new number at every
-- claim). Owners read their own rows (policy in 0800); only the service role
-- writes, through the claim and holder functions (0330-0352), which take a
-- run's row lock before its jobs'. The claim's indexes are partial on pending or running
-- jobs. Rationale: docs/decisions/0002, 0003, 0004 and 0009 (unindexed foreign keys).
create sequence private.fencing_token_seq as bigint;

create table public.jobs (
  id bigint generated always as identity primary key,
  run_id uuid not null references public.runs (id) on delete cascade,
  portal_id uuid not null,
  owner_id uuid not null,
  kind text not null references private.job_kinds (kind),
  content_type text,
  status text not null default 'pending',
  attempts integer not null default 0,
  max_attempts integer not null default 3,
  lease_seconds integer,
  lease_expires_at timestamptz,
  worker_id text,
  fencing_token bigint,
  run_after timestamptz not null default now(),
  progress_done integer not null default 0,
  progress_total integer,
  checkpoint jsonb,
  result jsonb,
  last_error text,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now(),
  waiting_reason text,
  claim_rank integer not null default 1,
  stalled_releases integer not null default 0 check (stalled_releases >= 0),
  released_progress integer check (released_progress >= 0),
  held_run_after timestamptz,
  held_waiting_reason text,
  retry_until timestamptz,
  failing_progress integer check (failing_progress >= 0),
  constraint jobs_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint jobs_attempts_within_max check (attempts between 0 and max_attempts),
  constraint jobs_running_has_lease check (
    (status = 'running') = (lease_expires_at is not null and worker_id is not null and fencing_token is not null)),
  constraint jobs_finished_iff_terminal check (
    (status in ('pending', 'running') and finished_at is null)
    or (status in ('completed', 'failed', 'stopped') and finished_at is not null)),
  constraint jobs_held_by_a_pause check (
    (run_after = 'infinity') = (held_run_after is not null)
    and (held_run_after is null or status = 'pending')
    and (held_waiting_reason is null or held_run_after is not null)),
  constraint jobs_content_type_fkey foreign key (content_type) references private.content_types (content_type),
  -- A probe checks all of its run's types at once (docs/decisions/0046); every other job has one.
  constraint jobs_type_unless_probe check ((kind = 'probe') = (content_type is null))
);
comment on column public.jobs.content_type is
  'The content type the job fetches or exports; null for a probe (it checks every type of its run: checkpoint.types).';
comment on column public.jobs.fencing_token is 'Issued anew at every claim; only the holder of the current token may write.';
comment on column public.jobs.checkpoint is 'Where a resumed job continues (a fetch: the HubSpot after-cursor).';
comment on column public.jobs.waiting_reason is
  'Why this pending job waits until run_after (e.g. HubSpot''s daily limit); null otherwise.';
comment on column public.jobs.claim_rank is
  'Place among the portal''s active jobs at creation (set by a trigger); claims go by (claim_rank, run_after, id).';
comment on column public.jobs.stalled_releases is
  'Releases in a row whose progress_done had not moved past the previous release''s (0 after any progress).';
comment on column public.jobs.released_progress is
  'progress_done at the job''s last release (null: never released).';
comment on column public.jobs.held_run_after is
  'While an operator''s pause holds this pending job (run_after ''infinity''): its own run_after, which resume_portal restores.';
comment on column public.jobs.held_waiting_reason is
  'While held by a pause: the job''s own waiting_reason (e.g. a park''s), which resume_portal restores.';
comment on column public.jobs.retry_until is
  'While the job keeps failing with retryable errors and no progress in between: when it gives up (fail_job: its kind''s '
  'retry_for_seconds after the first of them). Kept once it has failed or completed; null before any retryable failure.';
comment on column public.jobs.failing_progress is
  'progress_done at the job''s last retryable failure: progress past it starts a new run of failures (a new retry_until).';
comment on constraint jobs_held_by_a_pause on public.jobs is
  'run_after is ''infinity'' exactly while a pause holds the pending job, its own due time and reason kept in held_run_after and held_waiting_reason.';
comment on constraint jobs_finished_iff_terminal on public.jobs is
  'The status is one of pending, running (not finished) or completed, failed, stopped (finished).';

-- Dedup: at most one active job per portal + kind + content type (race-free with ON CONFLICT).
create unique index jobs_one_active_per_portal_kind_type
  on public.jobs (portal_id, kind, content_type)
  where status in ('pending', 'running');
-- At most one active probe per portal (its content type is null, which the index above never matches).
create unique index jobs_one_active_probe_per_portal
  on public.jobs (portal_id)
  where kind = 'probe' and status in ('pending', 'running');
-- Claiming stays O(log n) however many finished jobs pile up: only claimable rows are
-- indexed, in claim order (due ones first within a rank: the claim's scans stop early).
-- The only index of pending jobs: a second one by due time alone drew the claim's
-- scans into reading every due job and sorting them (its own cost was an entry per job).
create index jobs_pending_rank_idx on public.jobs (claim_rank, run_after, id) where status = 'pending';
-- Job lease queries only (expired job lease rescue): a probe of one portal's running
-- jobs cannot use it, it gets jobs_running_portal_idx.
create index jobs_running_lease_idx on public.jobs (lease_expires_at)
  where status = 'running' and lease_expires_at is not null;
-- Running jobs by portal and kind: the load claims order and cap by.
create index jobs_running_portal_idx on public.jobs (portal_id, kind) where status = 'running';
create index jobs_run_idx on public.jobs (run_id);
create index jobs_finished_idx on public.jobs (finished_at) where finished_at is not null;
-- A portal's jobs, by id: the portal cascade, and the Operator view's newest of one portal
-- (read down from its newest, not by walking all newer history down jobs_pkey).
create index jobs_portal_idx on public.jobs (portal_id, id);
-- The Operator view (operator_jobs): the jobs that failed or were stopped, newest first (a
-- few among all history), and jobs by creation time (a window of it, read instead of the
-- newer history above it).
create index jobs_failed_or_stopped_idx on public.jobs (status, id) where status in ('failed', 'stopped');
create index jobs_created_idx on public.jobs (created_at);
-- Not indexed, on purpose (docs/decisions/0009): every job update writes an entry in every
-- index of jobs. jobs_kind_fkey and jobs_content_type_fkey point at lookup rows that are
-- never deleted; jobs_portal_owner_fkey's cascade finds a portal's jobs by jobs_portal_idx.
alter table public.jobs enable row level security;
