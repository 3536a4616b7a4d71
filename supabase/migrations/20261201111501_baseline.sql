-- GENERATED FILE: do not edit. The baseline migration, made by scripts/schema-baseline.ts
-- (npm run schema:baseline) from supabase/schemas/, whose files it concatenates in
-- lexical order, all but the cron jobs' (09xx_cron_*.sql: the next migration).
-- Change the schema files and regenerate it; docs/decisions/0001.

-- ==== supabase/schemas/0000_extensions.sql ====
-- Extensions the schedules use: pg_cron (in pg_catalog, where it must live; its
-- objects are in its own `cron` schema) and pg_net (in `extensions`, never in
-- public). Created only where both can be, and Vault is there too (a Supabase
-- project); elsewhere nothing is scheduled (0900-0920 say so).
do $$
begin
  if not exists (select 1 from pg_available_extensions where name = 'pg_cron')
     or not exists (select 1 from pg_available_extensions where name = 'pg_net')
     or not exists (select 1 from pg_namespace where nspname = 'vault') then
    raise notice 'pg_cron, pg_net or vault is not available: the worker is not scheduled (invoke it yourself, or use npm start)';
    return;
  end if;
  execute 'create extension if not exists pg_cron with schema pg_catalog';
  execute 'create extension if not exists pg_net with schema extensions';
end
$$;

-- ==== supabase/schemas/0010_schemas.sql ====
-- The schemas: user-visible tables and the queue API live in `public` (the
-- only schema the API exposes); secrets and queue internals in `private`,
-- which no API role may use (SECURITY DEFINER functions reach it).
create schema if not exists private;
revoke all on schema private from public;

-- ==== supabase/schemas/0100_table_job_kinds.sql ====
-- private.job_kinds: one row per job kind (fetch, export, probe; plan, publish,
-- restore: docs/publish.md) with its job lease,
-- retries, backoff, portal cap bound (portal_cap_max: the portal cap, computed
-- per portal by private.portal_cap, is at most this) and stalled-release limit.
-- Read by the queue functions; changed by operators (SQL), never by the API.
-- Rationale for the fetch cap: docs/decisions/0003-claiming.md.
create table private.job_kinds (
  kind text primary key,
  lease_seconds integer not null check (lease_seconds between 5 and 3600),
  default_max_attempts integer not null check (default_max_attempts between 1 and 100),
  backoff_base_seconds integer not null check (backoff_base_seconds between 0 and 3600),
  backoff_max_seconds integer not null check (backoff_max_seconds >= backoff_base_seconds),
  portal_cap_max integer
    constraint job_kinds_portal_cap_max_range check (portal_cap_max between 1 and 1000),
  job_request_rate numeric check (job_request_rate > 0),
  retry_for_seconds integer not null default 1800 check (retry_for_seconds between 0 and 604800),
  max_stalled_releases integer not null default 5 check (max_stalled_releases between 1 and 1000)
);
comment on table private.job_kinds is 'Per-kind queue settings: job lease length, default max attempts, retry backoff, portal cap bound, stalled-release limit.';
comment on column private.job_kinds.portal_cap_max is
  'Upper bound of the portal cap (private.portal_cap): running jobs of this kind per portal at most (null: no cap).';
comment on column private.job_kinds.job_request_rate is
  'HubSpot requests per second one running job of this kind sends (null: it sends none); a portal''s cap is its learned limit per second ÷ this, rounded up (private.portal_cap). fetch: 3, a CMS page taking HubSpot 150–300 ms plus storing it.';
comment on column private.job_kinds.retry_for_seconds is
  'How long a job keeps retrying retryable failures (HubSpot not answering, 5xx, timeouts, a 429 that outlasted the waits) '
  'that come without progress in between before fail_job fails it for good: the give-up time is this long after the first '
  'of them (jobs.retry_until). 0: the first retryable failure fails the job. Default 30 minutes (docs/reliability.md).';
comment on column private.job_kinds.max_stalled_releases is
  'Releases in a row without progress after which release_job fails the job instead.';
alter table private.job_kinds enable row level security;

insert into private.job_kinds (kind, lease_seconds, default_max_attempts, backoff_base_seconds, backoff_max_seconds, portal_cap_max, job_request_rate,
                               max_stalled_releases)
values ('fetch', 300, 3, 10, 600, 8, 3, 5),
       ('export', 120, 3, 5, 300, null, null, 5),
       -- A scheduled cycle's probe (docs/decisions/0046): about 13 small requests at once. It has no
       -- progress to show, so every release counts as stalled: one cut off by invocations' ends may try again.
       -- Its lease_seconds is also the schedule-probe lease's length (claim_schedule_probe).
       ('probe', 60, 3, 10, 600, 1, 13, 20),
       -- A publish's three kinds, one job per content type (the active-job index: one per portal, kind and
       -- type at a time): a plan reads its items in batches, a publish re-reads and writes each batch, a
       -- restore writes the pre-images back; about 2 requests a second each (a batch request takes HubSpot
       -- about half a second).
       ('plan', 120, 3, 5, 300, 8, 2, 5),
       ('publish', 120, 3, 5, 300, 8, 2, 5),
       ('restore', 120, 3, 5, 300, 8, 2, 5);

-- ==== supabase/schemas/0110_table_content_types.sql ====
-- private.content_types: the registry of HubSpot content types the queue
-- knows, the only list of them in SQL. jobs and hubspot_content reference it;
-- create_run checks runs.content_types against it. Adding a type is one row in
-- a migration (plus its TypeScript record). No API role reads it.
create table private.content_types (
  content_type text primary key
    constraint content_types_name_is_valid check (content_type ~ '^[a-z][a-z0-9_]{0,62}$'),
  created_at timestamptz not null default now()
);
comment on table private.content_types is
  'Registry of the HubSpot content types the queue knows; jobs and content reference it. Add a type with a migration row.';
alter table private.content_types enable row level security;

insert into private.content_types (content_type)
values ('site_pages'), ('landing_pages'), ('blog_posts'), ('blog_authors'),
       ('blog_tags'), ('hubdb_tables'), ('hubdb_rows'), ('url_redirects');

-- ==== supabase/schemas/0120_table_portals.sql ====
-- public.portals: a HubSpot portal connected by a user (its credentials are in
-- private.portal_credentials). Owners read their own rows (policy in 0800);
-- only the service role writes, through connect_portal_with_tokens and
-- disconnect_portal.
create table public.portals (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  hubspot_portal_id bigint not null check (hubspot_portal_id > 0),
  name text not null check (char_length(name) between 1 and 200),
  -- No control characters and no invisible format characters (the API's rule;
  -- joiners U+200C/U+200D stay allowed, as inside emoji and joining scripts).
  constraint portals_name_visible
    check (name !~ '[\x01-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]'),
  created_at timestamptz not null default now(),
  auth_kind text not null default 'private_app',
  disconnected_at timestamptz,
  disconnected_reason text,
  constraint portals_one_per_owner_and_hubspot_portal unique (owner_id, hubspot_portal_id),
  -- target of the (portal_id, owner_id) foreign keys of runs, jobs and
  -- hubspot_content, which keep denormalised owners consistent with their portal
  constraint portals_id_owner_key unique (id, owner_id),
  constraint portals_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  constraint portals_disconnected_has_reason check ((disconnected_at is null) = (disconnected_reason is null)),
  constraint portals_disconnected_reason_length check (char_length(disconnected_reason) <= 500)
);
comment on table public.portals is 'A HubSpot portal connected by a user. The access token is in private.portal_credentials.';
comment on column public.portals.auth_kind is 'How the portal was connected: a private-app token or the OAuth app.';
comment on column public.portals.disconnected_at is 'Set when HubSpot access was removed (app uninstalled, refresh refused): reconnect the portal.';
comment on column public.portals.disconnected_reason is 'Why the portal is disconnected (shown to its owner).';
alter table public.portals enable row level security;

-- ==== supabase/schemas/0130_table_portal_credentials.sql ====
-- private.portal_credentials: one portal's HubSpot credentials, sealed by the
-- functions (AES-GCM; the keys are a function secret, never in the database),
-- with the refresh lease (refresh_holder, refresh_lease_expires_at). Service
-- role only, through the credential functions (0380-0390), which lock the row
-- FOR UPDATE. The trigger refusing plaintext tokens is in 0380. Rationale: docs/decisions/0007-credentials-and-oauth.md.
create table private.portal_credentials (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  access_token text check (char_length(access_token) between 1 and 4096),
  updated_at timestamptz not null default now(),
  auth_kind text not null default 'private_app',
  key_id text,
  access_token_enc text,
  refresh_token_enc text,
  access_token_hash text,
  access_expires_at timestamptz,
  refresh_after timestamptz,
  scopes text[],
  token_version bigint not null default 1,
  refresh_holder text,
  refresh_lease_expires_at timestamptz,
  refresh_started_at timestamptz,
  rotation_attempted_at timestamptz,
  constraint portal_credentials_auth_kind_is_valid check (auth_kind in ('private_app', 'oauth')),
  constraint portal_credentials_has_a_token check (access_token is not null or access_token_enc is not null),
  constraint portal_credentials_sealed_with_a_key check ((access_token_enc is null) = (key_id is null)),
  constraint portal_credentials_sealed_form check (
    (access_token_enc like 'v1.%' or access_token_enc like 'v2.%') and char_length(access_token_enc) <= 8192
    and (refresh_token_enc is null
         or ((refresh_token_enc like 'v1.%' or refresh_token_enc like 'v2.%') and char_length(refresh_token_enc) <= 8192))),
  constraint portal_credentials_oauth_complete check (
    auth_kind <> 'oauth' or (access_token_enc is not null and refresh_token_enc is not null
                             and access_expires_at is not null and refresh_after is not null)),
  constraint portal_credentials_refresh_lease_pairs check ((refresh_holder is null) = (refresh_lease_expires_at is null)),
  constraint portal_credentials_key_id_form check (key_id ~ '^[A-Za-z0-9_-]{1,32}$'),
  constraint portal_credentials_holder_length check (char_length(refresh_holder) <= 200)
);
comment on table private.portal_credentials is
  'HubSpot credentials, sealed by the functions (AES-GCM, keys in the HUBSPOT_TOKEN_KEYS secret). Service role only.';
comment on column private.portal_credentials.access_token is
  'LEGACY plaintext token of rows from before encryption, never written any more (trigger portal_credentials_no_plaintext); '
  'the rotation step seals it and sets this to null. Dropped once no row has one.';
comment on column private.portal_credentials.access_token_hash is
  'HMAC of the access token under a key derived from key_id ("<keyId>.<mac>"), for "same token" lookups.';
comment on column private.portal_credentials.token_version is
  'Increases with every new access token (connect, refresh); a 401 refreshes only if the caller''s version is current.';
comment on column private.portal_credentials.refresh_after is
  'When the OAuth access token is due for refresh (its expiry minus a margin).';
create index portal_credentials_rotation_idx on private.portal_credentials (rotation_attempted_at nulls first, portal_id);
create index portal_credentials_token_hash_idx on private.portal_credentials (access_token_hash) where access_token_hash is not null;
alter table private.portal_credentials enable row level security;

-- ==== supabase/schemas/0140_table_runs.sql ====
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

-- ==== supabase/schemas/0150_table_jobs.sql ====
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

-- ==== supabase/schemas/0160_table_hubspot_content.sql ====
-- public.hubspot_content: the fetched HubSpot items, one row per portal,
-- content type and HubSpot id (written by private.save_page; marked deleted,
-- never removed, when a fetch no longer sees them or lists them archived:
-- tombstones). Owners read their own rows (policy in 0800); only the service
-- role writes. change_seq orders every insert, change and deletion: the change
-- feed (docs/sync.md). Storage choices (lz4, or inline without it):
-- docs/decisions/0005-fetched-pages.md.
create sequence private.content_change_seq as bigint;

create table public.hubspot_content (
  id bigint generated always as identity primary key,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null,
  hubspot_id text not null check (char_length(hubspot_id) between 1 and 200),
  data jsonb not null,
  hubspot_updated_at timestamptz,
  fetched_at timestamptz not null default now(),
  last_seen_job_id bigint,
  deleted_at timestamptz,
  -- Drawn while the writer holds the type's one active fetch job FOR UPDATE, so
  -- within a portal and type the numbers follow commit order. Other writers take
  -- the same locks: the rows of a deleted HubDB table (its tables job, holding the
  -- portal's claim lock and the running rows job; tombstone_rows_of_gone_tables),
  -- and a publish or restore writing HubSpot's answers (that lock and the portal's
  -- claim lock, so that no fetch starts meanwhile: private.write_published_copy).
  -- save_page gives a new row one number for both (the defaults are for other writers).
  change_seq bigint not null default nextval('private.content_change_seq'),
  inserted_seq bigint not null default nextval('private.content_change_seq'),
  constraint hubspot_content_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint hubspot_content_one_per_item unique (portal_id, content_type, hubspot_id),
  constraint hubspot_content_content_type_fkey foreign key (content_type) references private.content_types (content_type)
);
-- A portal's live items by type, in id order (exports page by it). owner_id is carried
-- so the owner's count per type (shared/sql/content.ts, the page's content overview)
-- is an index-only scan under RLS (`owner_id = auth.uid()`): ~7 ms for a 41,705-item
-- portal, against ~250 ms reading the heap without it (docs/decisions/0066).
create index hubspot_content_live_idx on public.hubspot_content (portal_id, content_type, id) include (owner_id)
  where deleted_at is null;
create index hubspot_content_owner_idx on public.hubspot_content (owner_id);
-- The change feed: a portal and type's changes after a cursor, in order.
-- Partial on a predicate always true (numbers start at 1) so that only a
-- query saying `change_seq > 0` can use it: as a plain index, save_page's
-- generic-plan lookup by (portal, type, hubspot_id) chose it over the unique
-- index and scanned the whole type per item (4-6x the CPU per stored item, bench 9).
create index hubspot_content_changes_idx on public.hubspot_content (portal_id, content_type, change_seq) where change_seq > 0;
-- A portal's live HubDB rows by table (ids `<tableId>:<rowId>`): counted per table, and a
-- table's ids for its sweep, by index-only scans (hubspot_id included: rows are wide).
create index hubspot_content_hubdb_table_idx on public.hubspot_content (portal_id, (split_part(hubspot_id, ':', 1))) include (hubspot_id)
  where content_type = 'hubdb_rows' and deleted_at is null;
-- Not indexed (docs/decisions/0009): hubspot_content_content_type_fkey (registry rows are never
-- deleted) and hubspot_content_portal_owner_fkey (a portal's cascade finds its items by
-- hubspot_content_one_per_item, which starts with portal_id).
comment on column public.hubspot_content.fetched_at is
  'When a fetch last wrote the row (inserted, changed or deleted it); an unchanged item is not written again.';
comment on column public.hubspot_content.last_seen_job_id is
  'The fetch job that last wrote the row; what a full fetch saw is in private.full_fetch_pages.';
comment on column public.hubspot_content.deleted_at is
  'When a fetch found the item deleted (listed archived, absent from a full listing, or a HubDB row of a table found deleted); the row stays as a tombstone.';
comment on column public.hubspot_content.change_seq is
  'Position of the row''s last insert, change or deletion in the change feed (per portal and type in commit order).';
comment on column public.hubspot_content.inserted_seq is
  'Position of the row''s insert: a change after cursor c with inserted_seq > c is an insert.';
alter table public.hubspot_content enable row level security;

-- Items are ~2.4 KB of JSON: compressed with lz4 where the server has it,
-- else stored inline and uncompressed up to a full page (pglz costs too much CPU).
do $$
begin
  if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table public.hubspot_content alter column data set compression lz4;
  else
    alter table public.hubspot_content set (toast_tuple_target = 8160);
  end if;
end
$$;

-- ==== supabase/schemas/0161_table_full_fetch_pages.sql ====
-- private.full_fetch_pages: per portal, type and position (the cursor a page
-- was read at), the page a full fetch last saved there: its body's digest and
-- context, the content ids stored from it and what it set next. The items a
-- full fetch saw (complete_fetch_job tombstones the rest), and a page HubSpot
-- sends again byte for byte, whose items nothing wrote since, is saved without
-- being parsed (save_fetched_page_raw). Nobody but the owner reads it.
-- docs/decisions/0042-unchanged-pages-by-digest.md.
create table private.full_fetch_pages (
  portal_id uuid not null references public.portals (id) on delete cascade,
  content_type text not null references private.content_types (content_type),
  -- The job checkpoint's `after` when the page was read ('' for the first page), and for HubDB rows its table.
  page_key text not null,
  job_id bigint not null,
  -- sha256 of the body as HubSpot sent it; null: not to be re-read unparsed (a re-read in one job gave another body).
  digest bytea,
  context jsonb,
  content_ids bigint[] not null,
  -- The greatest change_seq among content_ids once the page was saved: a later write to one moves it past.
  content_seq bigint not null,
  next_after text,
  max_updated timestamptz,
  primary key (portal_id, content_type, page_key)
);
comment on table private.full_fetch_pages is
  'What each page of a portal and type''s last full fetch held: the items it saw, and its digest for re-reading it unparsed.';
-- Not indexed (docs/decisions/0009): the content type key (registry rows are never deleted); the
-- portal's cascade and every lookup start with portal_id, the primary key's first column.
alter table private.full_fetch_pages enable row level security;

-- ==== supabase/schemas/0162_table_hubdb_tables_lists.sql ====
-- private.hubdb_tables_lists: per portal, the HubDB tables list (every page of
-- GET /cms/v3/hubdb/tables as HubSpot sent it) read for one fetch run, so that
-- run's hubdb_tables and hubdb_rows jobs make one request for it between them,
-- whichever comes first: the run, the job reading it now and until when (its
-- read lease), then the pages and when they were read. Only jobs of that run
-- use it; the next run to need a list takes the row over. Nobody but the owner
-- reads it (take_hubdb_tables_list, store_hubdb_tables_list).
-- docs/decisions/0045-one-tables-list-per-cycle.md.
create table private.hubdb_tables_lists (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  -- The run the list is (being) read for. No foreign key: a row of a run since deleted is never used.
  run_id uuid not null,
  reader_job_id bigint,
  read_lease_expires_at timestamptz,
  pages text[],
  read_at timestamptz,
  constraint hubdb_tables_lists_reader_has_lease check ((reader_job_id is null) = (read_lease_expires_at is null)),
  constraint hubdb_tables_lists_pages_have_time check ((pages is null) = (read_at is null)),
  constraint hubdb_tables_lists_read_or_stored check (pages is null or reader_job_id is null),
  constraint hubdb_tables_lists_has_pages check (pages is null or cardinality(pages) >= 1)
);
comment on table private.hubdb_tables_lists is
  'Per portal, the HubDB tables list read for one fetch run, shared by its hubdb_tables and hubdb_rows jobs (one request).';
alter table private.hubdb_tables_lists enable row level security;

-- ==== supabase/schemas/0170_table_notifications.sql ====
-- public.notifications: one message per finished run for its owner (written
-- by the settlement code, unique per run). Users read theirs and may set only
-- read_at (policies in 0800, column grant in 0810); the service role writes.
create table public.notifications (
  id bigint generated always as identity primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  run_id uuid not null references public.runs (id) on delete cascade,
  kind text not null,
  message text not null,
  created_at timestamptz not null default now(),
  read_at timestamptz,
  constraint notifications_one_per_run unique (run_id)
);
create index notifications_user_unread_idx on public.notifications (user_id, created_at desc) where read_at is null;
alter table public.notifications enable row level security;

-- ==== supabase/schemas/0175_table_quiet_cycles.sql ====
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

-- ==== supabase/schemas/0180_table_hubspot_request_budgets.sql ====
-- private.hubspot_request_budgets: the HubSpot request budget every worker
-- shares per HubSpot portal: a rolling-window log of grant times, and the
-- portal's limits as last learned (HubSpot's X-HubSpot-RateLimit-* headers, else
-- the auth kind's documented limit), what other apps spent of the current
-- interval, the day's remaining quota and the account's time zone. Written only
-- by acquire_hubspot_requests, record_hubspot_request,
-- record_hubspot_rate_headers and record_hubspot_time_zone, which serialise on
-- the portal's row (FOR UPDATE / ON CONFLICT).
create table private.hubspot_request_budgets (
  hubspot_portal_id bigint primary key,
  granted_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now(),
  max_per_interval integer check (max_per_interval > 0),
  interval_ms integer check (interval_ms > 0),
  limit_source text check (limit_source in ('headers', 'auth_kind')),
  limit_learned_at timestamptz,
  configured_max integer check (configured_max > 0),
  other_apps_requests integer not null default 0 check (other_apps_requests >= 0),
  other_apps_until timestamptz,
  daily_limit integer check (daily_limit > 0),
  daily_remaining integer check (daily_remaining >= 0),
  daily_seen_at timestamptz,
  time_zone text check (char_length(time_zone) <= 64),
  time_zone_learned_at timestamptz,
  constraint hubspot_request_budgets_limit_complete check ((max_per_interval is null) = (interval_ms is null) and (max_per_interval is null) = (limit_source is null))
);
comment on table private.hubspot_request_budgets is 'Grant times of recent HubSpot requests per portal (rolling window) and the portal''s learned limits, shared by all workers.';
comment on column private.hubspot_request_budgets.max_per_interval is 'HubSpot''s limit per interval for this portal: X-HubSpot-RateLimit-Max, or the auth kind''s documented limit until HubSpot has answered.';
comment on column private.hubspot_request_budgets.limit_source is 'Where max_per_interval comes from: HubSpot''s headers, or the auth kind (private app 100, OAuth 110 per 10 s).';
comment on column private.hubspot_request_budgets.configured_max is 'HUBSPOT_RATE_LIMIT_PER_10S as the last grant saw it (a ceiling over the learned limit); null: none.';
comment on column private.hubspot_request_budgets.other_apps_requests is 'Requests of other apps in HubSpot''s current interval, estimated from X-HubSpot-RateLimit-Remaining; counted until other_apps_until.';
comment on column private.hubspot_request_budgets.daily_remaining is 'X-HubSpot-RateLimit-Daily-Remaining as last seen, less our grants since (private apps only; OAuth apps have no daily limit).';
comment on column private.hubspot_request_budgets.time_zone is 'The account''s time zone (GET /account-info/v3/details timeZone): its daily limit resets at midnight there.';
alter table private.hubspot_request_budgets enable row level security;

-- ==== supabase/schemas/0190_table_worker_settings.sql ====
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

-- ==== supabase/schemas/0200_table_worker_invocations.sql ====
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

-- ==== supabase/schemas/0210_table_worker_invocation_log.sql ====
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

-- ==== supabase/schemas/0211_table_worker_invocation_minutes.sql ====
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

-- ==== supabase/schemas/0212_table_settle_stuck_runs_state.sql ====
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

-- ==== supabase/schemas/0214_table_cron_jobs_scheduled.sql ====
-- private.cron_jobs_scheduled: one row per pg_cron job the schema schedules
-- (supabase/schemas/09xx_cron_*.sql, through private.record_cron_job): when
-- it was last scheduled, and whether public.heal_cron_jobs has since settled
-- it (a run seen in cron.job_run_details, or the jobs touched once because
-- none came within heal_after). Written by the cron migration and
-- heal_cron_jobs; heal_after changed by operators (SQL).
create table private.cron_jobs_scheduled (
  jobname text primary key,
  scheduled_at timestamptz not null default now(),
  heal_after interval not null default interval '3 minutes'
    constraint cron_jobs_scheduled_heal_after_non_negative check (heal_after >= interval '0'),
  settled_at timestamptz,
  touched_at timestamptz,
  constraint cron_jobs_scheduled_touched_when_settled check (touched_at is null or settled_at is not null)
);
comment on table private.cron_jobs_scheduled is
  'The schema''s pg_cron jobs, when each was last scheduled, and when heal_cron_jobs settled it: a run seen since, or the jobs touched (touched_at) because none came within heal_after.';
alter table private.cron_jobs_scheduled enable row level security;

-- ==== supabase/schemas/0220_table_retention_settings.sql ====
-- private.retention_settings: the one row saying how long finished history is
-- kept, how much one prune_queue_history call deletes at most, how many
-- quiet cycles per portal settlement keeps in full, and how many older ones
-- gather before they are folded together. Read by
-- prune_queue_history and compact_quiet_cycles; changed by operators (SQL).
create table private.retention_settings (
  id boolean primary key default true check (id),
  keep_finished interval not null default interval '30 days'
    constraint retention_settings_keep_finished_positive check (keep_finished >= interval '0'),
  batch_size integer not null default 5000
    constraint retention_settings_batch_size_range check (batch_size between 1 and 100000),
  keep_quiet_cycles integer not null default 3
    constraint retention_settings_keep_quiet_cycles_range check (keep_quiet_cycles between 1 and 1000),
  quiet_cycles_per_fold integer not null default 8
    constraint retention_settings_quiet_cycles_per_fold_range check (quiet_cycles_per_fold between 1 and 100)
);
comment on table private.retention_settings is
  'Retention: finished jobs, runs, notifications and quiet-cycle roll-ups older than keep_finished are deleted, at most batch_size jobs and batch_size runs per prune_queue_history call; each portal''s last keep_quiet_cycles quiet cycles stay in full, older ones folded quiet_cycles_per_fold at a time.';
alter table private.retention_settings enable row level security;
insert into private.retention_settings default values;

-- ==== supabase/schemas/0230_table_write_limit_settings.sql ====
-- private.write_limit_settings: the one row of the orchestrator's per-user
-- write limit (at most max_writes in any rolling window_seconds). Read by
-- take_user_write; changed by operators (SQL).
create table private.write_limit_settings (
  id boolean primary key default true check (id),
  max_writes integer not null default 60 check (max_writes between 1 and 100000),
  window_seconds integer not null default 60 check (window_seconds between 1 and 86400)
);
comment on table private.write_limit_settings is
  'Per-user orchestrator write limit: max_writes in any rolling window_seconds. Change the row to change the limit.';
alter table private.write_limit_settings enable row level security;
insert into private.write_limit_settings default values;

-- ==== supabase/schemas/0240_table_user_write_log.sql ====
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

-- ==== supabase/schemas/0250_table_oauth_install_settings.sql ====
-- private.oauth_install_settings: the one row saying how long an OAuth install
-- state stays valid, how many open states one user may hold and how many
-- expired states one prune call deletes. Read by the install-state functions
-- (0430-0432); changed by operators (SQL).
create table private.oauth_install_settings (
  id boolean primary key default true check (id),
  state_ttl interval not null default interval '10 minutes'
    constraint oauth_install_settings_state_ttl_range check (state_ttl between interval '1 minute' and interval '1 hour'),
  max_open_states integer not null default 5
    constraint oauth_install_settings_max_open_states_range check (max_open_states between 1 and 100),
  prune_batch_size integer not null default 5000
    constraint oauth_install_settings_prune_batch_size_range check (prune_batch_size between 1 and 100000)
);
comment on table private.oauth_install_settings is
  'OAuth install states: valid for state_ttl, at most max_open_states open per user (a new one drops the oldest), prune_batch_size expired states deleted per prune call.';
alter table private.oauth_install_settings enable row level security;
insert into private.oauth_install_settings default values;

-- ==== supabase/schemas/0260_table_oauth_install_states.sql ====
-- private.oauth_install_states: open HubSpot OAuth installs, only sha256(state)
-- bound to the user who started it, single-use and expiring (the PKCE verifier
-- is derived, never stored). Written by the install-state functions (0430-0432)
-- only. Rationale: docs/decisions/0007-credentials-and-oauth.md.
create table private.oauth_install_states (
  state_hash bytea primary key
    constraint oauth_install_states_state_hash_is_sha256 check (octet_length(state_hash) = 32),
  user_id uuid not null references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  constraint oauth_install_states_expires_after_created check (expires_at > created_at)
);
comment on table private.oauth_install_states is
  'Open HubSpot OAuth installs: sha256(state) of each, the user it is bound to and when it expires. Consumed (deleted) by the one callback that presents it.';
create index oauth_install_states_user_idx on private.oauth_install_states (user_id, created_at);
create index oauth_install_states_expires_idx on private.oauth_install_states (expires_at);
alter table private.oauth_install_states enable row level security;

-- ==== supabase/schemas/0270_table_sync_marks.sql ====
-- public.sync_marks: per portal and content type, the high-water mark of
-- incremental sync (the newest HubSpot update time a completed fetch stored,
-- never past an item it did not save) and when the type was last synced.
-- Written only by complete_fetch_job (so a mark moves only when its job
-- completes); create_run starts an incremental job at high_water minus the
-- schedule's overlap. Owners read their own rows (policy in 0800).
-- Rationale: docs/decisions/0010-incremental-sync.md.
create table public.sync_marks (
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  high_water timestamptz not null,
  last_full_at timestamptz,
  last_incremental_at timestamptz,
  -- HubDB rows: when the last completed fetch that swept every table for deleted rows (a full one, or a sweep cycle) was created.
  last_sweep_at timestamptz,
  -- The newest archive time a completed fetch stored (at least its since; a full one: its start). A probe asks for archives after it.
  archived_high_water timestamptz,
  last_job_id bigint,
  updated_at timestamptz not null default now(),
  primary key (portal_id, content_type),
  constraint sync_marks_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade
);
comment on table public.sync_marks is
  'High-water mark of incremental sync per portal and content type; moved only by a completed fetch job.';
comment on column public.sync_marks.archived_high_water is
  'The newest archive time a completed fetch stored (an incremental: at least its since; a full: its start); a probe asks HubSpot for archives after it. Null: not known yet (the type is fetched, not probed).';
comment on column public.sync_marks.high_water is
  'A full fetch: its newest stored update time, capped at when it started; an incremental one: the newest update time it stored (never lowered).';
create index sync_marks_owner_idx on public.sync_marks (owner_id);
-- Not indexed (docs/decisions/0009): sync_marks_content_type_fkey (registry rows are never deleted);
-- the portal's cascade finds its marks by the primary key, which starts with portal_id.
alter table public.sync_marks enable row level security;

-- ==== supabase/schemas/0271_table_sync_schedules.sql ====
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

-- ==== supabase/schemas/0272_function_fill_sync_schedule.sql ====
-- private.fill_sync_schedule(): before a schedule is created or its owner's columns change, sets its owner
-- from the portal, every content type when none are given (else checks them), and
-- the next due times when an interval is set or changed: the first
-- incremental at once (a type without a mark runs a full fetch), else the
-- interval's first slot (private.sync_slot) at least half an interval after
-- the last due time (creation for a new schedule): a changed interval moves
-- it, and a time already due stays due. A signed-in user (auth.uid()) creates
-- one only for a portal of their own: any other id, someone else's or none,
-- is P0002 "not found" alike, so the answer does not tell which portals exist.
-- A user writing through PostgREST (request.method set, as PostgREST sets it
-- for each request; the orchestrator's own writes, already counted, set none)
-- takes one write from the per-user write limit (public.take_user_write) once
-- per request; over it, PostgREST answers 429 RATE_LIMITED with Retry-After,
-- as the orchestrator does. Definer: the type registry and the write log are private.
create function private.fill_sync_schedule() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_user uuid := auth.uid();
  v_wait_ms integer;
  v_seconds integer;
begin
  if v_user is not null and coalesce(current_setting('request.method', true), '') <> ''
     and coalesce(current_setting('queue.schedule_write_counted', true), '') <> 'yes' then
    v_wait_ms := public.take_user_write(v_user);
    if v_wait_ms > 0 then
      v_seconds := greatest(1, ceil(v_wait_ms / 1000.0)::integer);
      raise sqlstate 'PGRST' using
        message = jsonb_build_object('code', 'RATE_LIMITED',
                    'message', format('Too many changes in a short time: try again in %s s.', v_seconds))::text,
        detail = jsonb_build_object('status', 429, 'headers', jsonb_build_object('Retry-After', v_seconds::text))::text;
    end if;
    perform set_config('queue.schedule_write_counted', 'yes', true);
  end if;
  if tg_op = 'INSERT' then
    select p.owner_id into new.owner_id from public.portals p
     where p.id = new.portal_id and (v_user is null or p.owner_id = v_user);
    if not found then
      raise exception 'sync schedule: portal % not found', new.portal_id using errcode = 'P0002';
    end if;
  end if;
  if new.content_types is null then
    select array_agg(c.content_type order by c.created_at, c.content_type) into new.content_types from private.content_types c;
  elsif not private.are_known_content_types(new.content_types) then
    raise exception 'sync schedule: content types must be 1-8 distinct known types, got %', new.content_types using errcode = '22023';
  end if;
  if tg_op = 'INSERT' or new.incremental_every_minutes is distinct from old.incremental_every_minutes then
    new.next_incremental_at := case
      when new.incremental_every_minutes is null then null
      when tg_op = 'INSERT' or old.incremental_every_minutes is null or old.next_incremental_at is null then now()
      when old.next_incremental_at <= now() then old.next_incremental_at
      else private.sync_slot(new.portal_id, new.incremental_every_minutes,
             old.next_incremental_at - make_interval(mins => old.incremental_every_minutes)
               + make_interval(secs => new.incremental_every_minutes * 30)) end;
  end if;
  if tg_op = 'INSERT' or new.full_every_minutes is distinct from old.full_every_minutes then
    new.next_full_at := case
      when new.full_every_minutes is null then null
      when new.incremental_every_minutes is null and (tg_op = 'INSERT' or old.next_full_at is null) then now()
      when tg_op = 'INSERT' or old.full_every_minutes is null or old.next_full_at is null
        then private.sync_slot(new.portal_id, new.full_every_minutes, now() + make_interval(secs => new.full_every_minutes * 30))
      when old.next_full_at <= now() then old.next_full_at
      else private.sync_slot(new.portal_id, new.full_every_minutes,
             old.next_full_at - make_interval(mins => old.full_every_minutes) + make_interval(secs => new.full_every_minutes * 30)) end;
  end if;
  new.updated_at := now();
  return new;
end;
$$;

-- On the columns an owner writes only: the worker's and the tick's writes (due times, schedule-probe leases) skip it.
create trigger sync_schedules_fill
  before insert or update of portal_id, content_types, incremental_every_minutes, full_every_minutes, overlap_seconds,
                             paused, hubdb_sweep_every_minutes
  on public.sync_schedules
  for each row execute function private.fill_sync_schedule();

-- ==== supabase/schemas/0273_table_sync_settings.sql ====
-- private.sync_settings: the one row of settings for the scheduled syncs:
-- how many runs one tick of public.schedule_due_syncs creates at most (the
-- oldest due first; the rest stay due for the next tick, so a burst of due
-- schedules never makes one long transaction), and how long a due
-- incremental waits for a worker lane's schedule probe before the tick makes
-- it a run (docs/decisions/0058; 0: no schedule probes, the tick makes every
-- due incremental a run at once). Changed by
-- operators (SQL).
create table private.sync_settings (
  id boolean primary key default true check (id),
  max_runs_per_tick integer not null default 1000 check (max_runs_per_tick between 1 and 100000),
  probe_grace_seconds integer not null default 60 check (probe_grace_seconds between 0 and 86400)
);
comment on table private.sync_settings is
  'Scheduled sync settings. max_runs_per_tick ÷ the tick interval (a minute) is the most runs the tick starts per minute; probe_grace_seconds: how long a due incremental waits for a lane''s schedule probe.';
alter table private.sync_settings enable row level security;
insert into private.sync_settings default values;

-- ==== supabase/schemas/0274_function_sync_slot.sql ====
-- private.sync_slot(portal, every minutes, after): the portal's first slot
-- after `after` for an interval: the times a whole number of intervals from
-- the portal's phase (a hash of its id, within the interval). Schedules due
-- on their slots keep their exact interval, and portals created together
-- spread over it. Immutable; owner only (fill_sync_schedule, schedule_due_syncs).
create function private.sync_slot(p_portal_id uuid, p_every_minutes integer, p_after timestamptz) returns timestamptz
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v_period bigint := p_every_minutes * 60::bigint;
  v_phase bigint := mod(mod(hashtextextended(p_portal_id::text, 0), p_every_minutes * 60::bigint) + p_every_minutes * 60::bigint,
                        p_every_minutes * 60::bigint);
begin
  return to_timestamp(v_phase + v_period * ((floor(extract(epoch from p_after))::bigint - v_phase) / v_period + 1));
end;
$$;

-- ==== supabase/schemas/0280_table_publish_settings.sql ====
-- private.publish_settings: the one row of the publish feature's limits: how
-- long a plan may be approved after its plan run settled, how many items one
-- HubSpot batch request carries, the largest CSV an import takes and the most
-- edits one plan holds. Read by create_publish_plan, import_csv_edits and
-- settlement (private.settle_publish_run); changed by operators (SQL), never
-- by the API. docs/publish.md.
create table private.publish_settings (
  id boolean primary key default true check (id),
  plan_fresh_minutes integer not null default 30
    constraint publish_settings_plan_fresh_minutes_range check (plan_fresh_minutes between 1 and 1440),
  batch_size integer not null default 100
    constraint publish_settings_batch_size_range check (batch_size between 1 and 100),
  max_csv_bytes integer not null default 5242880
    constraint publish_settings_max_csv_bytes_range check (max_csv_bytes between 1024 and 104857600),
  max_edits_per_plan integer not null default 50000
    constraint publish_settings_max_edits_per_plan_range check (max_edits_per_plan between 1 and 1000000)
);
comment on table private.publish_settings is
  'Publish limits: a plan is approvable plan_fresh_minutes after its plan run settled; batch_size items per HubSpot batch request (HubSpot''s limit: 100); max_csv_bytes per CSV import; max_edits_per_plan.';
alter table private.publish_settings enable row level security;
insert into private.publish_settings default values;

-- ==== supabase/schemas/0281_table_editable_fields.sql ====
-- private.editable_fields: the registry of what a publish may write, per
-- content type: the fields of HubSpot's published update request schemas we
-- accept in an edit's patch, with their JSON type (`string` fields take null
-- too; `object` is a HubDB row's `values`, sparse by column key). Every other
-- field, and every field of a type without rows here (HubDB tables), is
-- read-only. The TypeScript side (shared/publish-fields.ts) mirrors it
-- (tests/publish-sql.test.ts keeps them equal). Read by
-- private.check_edit_patch and import_csv_edits; changed by a migration only.
create table private.editable_fields (
  content_type text not null references private.content_types (content_type),
  field text not null constraint editable_fields_field_name check (field ~ '^[A-Za-z][A-Za-z0-9_]{0,99}$'),
  json_type text not null
    constraint editable_fields_json_type_is_valid
    check (json_type in ('string', 'integer', 'number', 'boolean', 'array_of_integers', 'object')),
  primary key (content_type, field)
);
comment on table private.editable_fields is
  'The fields an edit may change, per content type, with their JSON type; everything else is read-only.';
alter table private.editable_fields enable row level security;

insert into private.editable_fields (content_type, field, json_type)
select t.content_type, f.field, f.json_type
  from (values ('site_pages'), ('landing_pages')) t(content_type)
 cross join (values ('name', 'string'), ('slug', 'string'), ('htmlTitle', 'string'), ('metaDescription', 'string'),
                    ('authorName', 'string')) f(field, json_type)
union all
select 'blog_posts', f.field, f.json_type
  from (values ('name', 'string'), ('slug', 'string'), ('htmlTitle', 'string'), ('metaDescription', 'string'),
               ('postSummary', 'string'), ('blogAuthorId', 'string'), ('tagIds', 'array_of_integers')) f(field, json_type)
union all
select 'blog_authors', f.field, 'string'
  from (values ('fullName'), ('displayName'), ('email'), ('bio'), ('website')) f(field)
union all
select 'blog_tags', 'name', 'string'
union all
select 'hubdb_rows', f.field, f.json_type
  from (values ('path', 'string'), ('name', 'string'), ('values', 'object')) f(field, json_type)
union all
select 'url_redirects', f.field, f.json_type
  from (values ('routePrefix', 'string'), ('destination', 'string'), ('redirectStyle', 'integer'), ('precedence', 'integer'),
               ('isMatchFullUrl', 'boolean'), ('isMatchQueryString', 'boolean'), ('isPattern', 'boolean')) f(field, json_type);

-- ==== supabase/schemas/0282_table_export_columns.sql ====
-- private.export_columns: the CSV columns of each content type's export after
-- our own hubspot_id and hubspot_updated_at, in order: the SQL copy of the
-- TypeScript registry's exportColumns (shared/content-types.ts, which an export
-- pins in its checkpoint; tests/publish-sql.test.ts keeps the two equal). An
-- import (import_csv_edits) takes these columns and no other. Changed by a
-- migration only, with the registry.
create table private.export_columns (
  content_type text not null references private.content_types (content_type),
  position integer not null constraint export_columns_position_range check (position between 1 and 200),
  column_name text not null constraint export_columns_name_length check (char_length(column_name) between 1 and 200),
  primary key (content_type, column_name),
  constraint export_columns_one_per_position unique (content_type, position)
);
comment on table private.export_columns is
  'The export''s CSV columns per content type (after hubspot_id, hubspot_updated_at), as shared/content-types.ts lists them.';
alter table private.export_columns enable row level security;

insert into private.export_columns (content_type, position, column_name)
select t.content_type, c.position, c.column_name
  from (values ('site_pages'), ('landing_pages')) t(content_type)
 cross join unnest(array['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'domain', 'authorName',
                         'publishDate', 'created', 'updated', 'archivedAt']) with ordinality c(column_name, position)
union all
select v.content_type, c.position, c.column_name
  from (values
    ('blog_posts', array['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'authorName', 'blogAuthorId',
                         'contentGroupId', 'tagIds', 'postSummary', 'publishDate', 'created', 'updated']),
    ('blog_authors', array['fullName', 'displayName', 'email', 'slug', 'bio', 'website', 'language', 'created', 'updated']),
    ('blog_tags', array['name', 'slug', 'language', 'created', 'updated']),
    ('hubdb_tables', array['name', 'label', 'rowCount', 'columnCount', 'published', 'publishedAt', 'createdAt', 'updatedAt']),
    ('hubdb_rows', array['tableId', 'path', 'name', 'values', 'childTableId', 'createdAt', 'updatedAt']),
    ('url_redirects', array['routePrefix', 'destination', 'redirectStyle', 'isMatchFullUrl', 'isMatchQueryString', 'isPattern',
                            'precedence', 'created', 'updated'])
  ) v(content_type, columns)
 cross join unnest(v.columns) with ordinality c(column_name, position);

-- ==== supabase/schemas/0283_table_publish_plans.sql ====
-- public.publish_plans: a plan, a dry run over a portal's pending edits
-- (public.content_edits) that a person or an app approves by its id while it is
-- fresh; its items are public.publish_items. `planning` while its plan run
-- (kind plan, one job per content type) reads the items from HubSpot, then
-- `ready` (approvable until fresh_until) or `failed` (its edits pending again),
-- `approved` once approve_publish_plan made its publish run, `discarded` when
-- a newer plan or discard_publish_plan replaced it. The audit trail: who
-- planned, approved and rolled back, and when; the counts kept when the plan
-- run settled (private.settle_publish_run). Owners read their own (policy in
-- 0800); only the service role writes, through the functions of 0483-0499.
-- docs/publish.md, docs/decisions/0070-publish.md.
create table public.publish_plans (
  id uuid primary key default gen_random_uuid(),
  portal_id uuid not null,
  owner_id uuid not null,
  created_by uuid not null,
  created_at timestamptz not null default now(),
  content_types text[] not null,
  status text not null default 'planning',
  mode text not null default 'live',
  publish_at timestamptz,
  plan_run_id uuid references public.runs (id) on delete set null,
  planned_at timestamptz,
  fresh_until timestamptz,
  approved_by uuid,
  approved_at timestamptz,
  publish_run_id uuid references public.runs (id) on delete set null,
  restored_by uuid,
  restored_at timestamptz,
  restore_run_id uuid references public.runs (id) on delete set null,
  items_total integer not null default 0,
  items_ready integer not null default 0,
  items_conflict integer not null default 0,
  items_invalid integer not null default 0,
  items_unchanged integer not null default 0,
  items_missing integer not null default 0,
  constraint publish_plans_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint publish_plans_status_is_valid check (status in ('planning', 'ready', 'approved', 'failed', 'discarded')),
  constraint publish_plans_mode_is_valid check (mode in ('live', 'draft', 'schedule')),
  constraint publish_plans_schedule_has_time check ((mode = 'schedule') = (publish_at is not null)),
  constraint publish_plans_types_not_empty check (cardinality(content_types) >= 1),
  -- Settled (the plan run finished) exactly when no longer planning; approvable only with a time limit.
  constraint publish_plans_settled_iff_not_planning check ((status = 'planning') = (planned_at is null)),
  constraint publish_plans_ready_is_fresh_until check (status not in ('ready', 'approved') or fresh_until is not null),
  constraint publish_plans_approved_iff_approval check (
    (status = 'approved') = (approved_at is not null) and (approved_at is null) = (approved_by is null)),
  constraint publish_plans_restored_after_approval check (
    (restored_at is null) = (restored_by is null) and (restored_at is null or status = 'approved')),
  constraint publish_plans_counts_within_total check (
    least(items_ready, items_conflict, items_invalid, items_unchanged, items_missing) >= 0
    and items_ready + items_conflict + items_invalid + items_unchanged + items_missing <= items_total)
);
comment on table public.publish_plans is
  'A plan: the dry run over a portal''s pending edits, approved by its id while fresh; then its publish run and perhaps its restore run.';
comment on column public.publish_plans.status is
  'planning (its plan run reads HubSpot), ready (approvable until fresh_until), approved, failed (edits pending again), discarded.';
comment on column public.publish_plans.mode is
  'How pages and posts are written: live (the live object), draft (the draft, then pushed live), schedule (the draft, published at publish_at).';
comment on column public.publish_plans.fresh_until is
  'Approvable until then: the plan run''s end plus private.publish_settings.plan_fresh_minutes.';
comment on column public.publish_plans.created_by is
  'Who planned (the portal''s owner). No foreign key, nor on approved_by and restored_by: the audit trail names who acted; deleting the owner deletes the portal and its plans.';
-- Run lookups (a plan's job finds its plan by its run): one plan per run, and the runs' prune sets them null by these.
create unique index publish_plans_plan_run_idx on public.publish_plans (plan_run_id);
create unique index publish_plans_publish_run_idx on public.publish_plans (publish_run_id);
create unique index publish_plans_restore_run_idx on public.publish_plans (restore_run_id);
-- A portal's plans newest first (the page's list, a new plan's look at the open ones, the portal cascade).
create index publish_plans_portal_created_idx on public.publish_plans (portal_id, created_at desc);
create index publish_plans_owner_created_idx on public.publish_plans (owner_id, created_at desc);
-- Not indexed (docs/decisions/0009): publish_plans_portal_owner_fkey (the cascade finds a portal's plans by
-- publish_plans_portal_created_idx, which starts with portal_id).
alter table public.publish_plans enable row level security;

-- ==== supabase/schemas/0284_table_content_edits.sql ====
-- public.content_edits: an edit, a sparse patch of one stored item (portal,
-- content type, HubSpot id) based on the item's hubspot_updated_at as the
-- editor saw it (base_updated_at). Written by apps through supabase-js under
-- RLS (owners insert, change and delete their own pending edits: policies in
-- 0800, column grants in 0810) and by the service role (import_csv_edits:
-- source csv). At most one pending edit per item. The trigger
-- private.fill_content_edit (0475) sets the owner from the portal and refuses
-- (22023) a patch that is not a non-empty object of editable fields
-- (private.editable_fields) with values of their JSON type, or an item not
-- live in the portal's copy: nothing is stored. create_publish_plan takes the
-- pending edits into a plan (`planned`); a failed or discarded plan gives
-- them back (`pending`, or `discarded` when a newer pending edit of the item
-- exists). docs/publish.md.
create table public.content_edits (
  id bigint generated always as identity primary key,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  hubspot_id text not null constraint content_edits_hubspot_id_length check (char_length(hubspot_id) between 1 and 200),
  base_updated_at timestamptz not null,
  patch jsonb not null,
  source text not null default 'app',
  status text not null default 'pending',
  plan_id uuid references public.publish_plans (id) on delete cascade,
  created_by uuid default auth.uid(),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint content_edits_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint content_edits_source_is_valid check (source in ('app', 'csv')),
  constraint content_edits_status_is_valid check (status in ('pending', 'planned', 'discarded')),
  -- Pending edits belong to no plan; planned ones to theirs (a discarded one keeps the plan that gave it back).
  constraint content_edits_plan_iff_planned check (
    (status = 'pending' and plan_id is null) or (status = 'planned' and plan_id is not null) or status = 'discarded'),
  constraint content_edits_patch_is_object check (jsonb_typeof(patch) = 'object')
);
comment on table public.content_edits is
  'An edit: a sparse patch of one stored item, based on its hubspot_updated_at; owners write their pending edits under RLS.';
comment on column public.content_edits.base_updated_at is
  'The item''s hubspot_updated_at the edit is based on: a plan finds a conflict when HubSpot''s update time differs.';
comment on column public.content_edits.patch is
  'The fields to change and their new values: editable fields of the type only (private.editable_fields); a HubDB row''s values hold only the changed columns.';
comment on column public.content_edits.created_by is
  'Who wrote the edit (auth.uid(), or the importing user). No foreign key: see publish_plans.created_by.';
-- One pending edit per item (an import replaces it; an app updates it).
create unique index content_edits_one_pending_per_item on public.content_edits (portal_id, content_type, hubspot_id)
  where status = 'pending';
-- A plan's edits (given back when it fails or is discarded; the plan's cascade).
create index content_edits_plan_idx on public.content_edits (plan_id) where plan_id is not null;
-- An owner's edits (RLS reads, and the portal cascade: its (portal_id, owner_id) rows are among the owner's).
create index content_edits_owner_idx on public.content_edits (owner_id, id);
-- Not indexed (docs/decisions/0009): content_edits_content_type_fkey (registry rows are never deleted) and
-- content_edits_portal_owner_fkey (the cascade finds the owner's edits by content_edits_owner_idx).
alter table public.content_edits enable row level security;

-- ==== supabase/schemas/0285_table_publish_items.sql ====
-- public.publish_items: one item of a plan (one edit), and everything its plan,
-- publish and restore runs learned and did: the fields before → after, the
-- plan status (ready, conflict, invalid, unchanged, missing), the apply's
-- outcome (writing → applied, scheduled, unchanged, conflict, invalid, failed,
-- overwritten), the pre-image kept for rollback, HubSpot's answers and the
-- restore outcome. `scheduled`: a plan of mode schedule wrote the item's
-- draft and HubSpot publishes it at the plan's publish_at (nothing live yet). Written only by the holders of its plan's jobs (0489-0496)
-- and settlement (private.fail_publish_items); the CHECKs pair each status
-- with the fields it needs. `writes` counts our write requests that carried
-- the item, recorded before each is sent (prepare_publish_batch): a measured
-- property, which ends at most 1 unless a write HubSpot never applied had to
-- be sent again. Owners read their own (policy in 0800). The item state
-- machine: docs/publish.md.
create table public.publish_items (
  id bigint generated always as identity primary key,
  plan_id uuid not null references public.publish_plans (id) on delete cascade,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  hubspot_id text not null,
  edit_id bigint references public.content_edits (id) on delete set null,
  base_updated_at timestamptz not null,
  after jsonb not null,
  before jsonb,
  planned_updated_at timestamptz,
  plan_status text,
  plan_message text,
  current jsonb,
  outcome text,
  outcome_message text,
  pre_image jsonb,
  pre_updated_at timestamptz,
  reread_at timestamptz,
  applied_updated_at timestamptz,
  answer jsonb,
  writer_user_id text,
  overwritten_by jsonb,
  overwritten_revision_id text,
  restore_outcome text,
  restore_message text,
  restored_updated_at timestamptz,
  restore_answer jsonb,
  writes integer not null default 0 constraint publish_items_writes_non_negative check (writes >= 0),
  restore_writes integer not null default 0 constraint publish_items_restore_writes_non_negative check (restore_writes >= 0),
  updated_at timestamptz not null default now(),
  constraint publish_items_one_per_item unique (plan_id, content_type, hubspot_id),
  constraint publish_items_plan_status_is_valid check (plan_status in ('ready', 'conflict', 'invalid', 'unchanged', 'missing')),
  constraint publish_items_outcome_is_valid
    check (outcome in ('writing', 'applied', 'scheduled', 'unchanged', 'conflict', 'invalid', 'failed', 'overwritten')),
  constraint publish_items_restore_outcome_is_valid
    check (restore_outcome in ('restoring', 'restored', 'conflict', 'invalid', 'failed')),
  -- What each plan status carries: HubSpot's values (before) and update time when read, HubSpot's
  -- values beside ours for a conflict, a message for an invalid item, nothing read for a missing one.
  constraint publish_items_plan_status_fields check (
    plan_status is null
    or (plan_status in ('ready', 'unchanged') and before is not null and planned_updated_at is not null)
    or (plan_status = 'conflict' and current is not null and plan_message is not null)
    or (plan_status = 'invalid' and plan_message is not null)
    or (plan_status = 'missing' and before is null and plan_message is not null)),
  -- Only a ready item is applied; only an applied (or scheduled) one restored.
  constraint publish_items_outcome_needs_ready check (outcome is null or plan_status is not distinct from 'ready'),
  constraint publish_items_restore_needs_applied check (restore_outcome is null or outcome in ('applied', 'scheduled')),
  -- A write is under way or done: the pre-image and its update time are kept, and the write was counted first.
  constraint publish_items_written_has_pre_image check (
    outcome is null or outcome not in ('writing', 'applied', 'scheduled', 'overwritten')
    or (pre_image is not null and pre_updated_at is not null and writes >= 1)),
  constraint publish_items_applied_has_answer check (
    outcome is null or outcome not in ('applied', 'scheduled', 'overwritten') or (applied_updated_at is not null and answer is not null)),
  constraint publish_items_overwritten_has_events check ((outcome is not distinct from 'overwritten') = (overwritten_by is not null)),
  constraint publish_items_revision_needs_overwritten check (
    overwritten_revision_id is null or outcome is not distinct from 'overwritten'),
  constraint publish_items_outcome_message check (
    outcome is null or outcome not in ('conflict', 'invalid', 'failed') or outcome_message is not null),
  constraint publish_items_restored_has_time check (
    restore_outcome is null or restore_outcome <> 'restored' or restored_updated_at is not null),
  constraint publish_items_restore_message check (
    restore_outcome is null or restore_outcome not in ('conflict', 'invalid', 'failed') or restore_message is not null),
  constraint publish_items_writes_need_outcome check (writes = 0 or outcome is not null),
  constraint publish_items_restore_writes_need_outcome check (restore_writes = 0 or restore_outcome is not null)
);
comment on table public.publish_items is
  'One item of a plan: before → after, plan status, apply outcome, pre-image, HubSpot''s answers, restore outcome.';
comment on column public.publish_items.after is 'The edit''s patch: the target values of the patched fields.';
comment on column public.publish_items.before is 'HubSpot''s values of the patched fields when the plan read the item.';
comment on column public.publish_items.current is 'HubSpot''s values of the patched fields when a conflict was found (plan, apply or restore), shown beside ours.';
comment on column public.publish_items.pre_image is 'The whole item as HubSpot had it at the apply''s re-read: what a rollback writes back (its patched fields).';
comment on column public.publish_items.pre_updated_at is 'HubSpot''s update time of the pre-image (T0).';
comment on column public.publish_items.reread_at is
  'HubSpot''s time of the re-read that decided the write (the batch/read answer''s startedAt, or the read''s Date header): where the window starts.';
comment on column public.publish_items.applied_updated_at is
  'HubSpot''s update time after our write (T2): a restore''s conflict base; for a scheduled item, its draft''s.';
comment on column public.publish_items.answer is
  'HubSpot''s per-item answer to our write (or its error); while writing, the answer to the write''s first step when the rest was lost (a draft).';
comment on column public.publish_items.writer_user_id is
  'HubSpot''s user of our write''s own audit event (on the item at applied_updated_at): in a draft''s window, that user''s events are ours.';
comment on column public.publish_items.overwritten_by is 'The foreign audit-log events that landed between the re-read and our write.';
comment on column public.publish_items.writes is 'Our write requests that carried this item, counted before each was sent.';
-- A job's batches, in id order; and the items each phase still has to handle.
create index publish_items_batch_idx on public.publish_items (plan_id, content_type, id);
create index publish_items_to_plan_idx on public.publish_items (plan_id, content_type, id) where plan_status is null;
create index publish_items_to_publish_idx on public.publish_items (plan_id, content_type, id)
  where plan_status = 'ready' and (outcome is null or outcome in ('writing', 'failed'));
create index publish_items_to_restore_idx on public.publish_items (plan_id, content_type, id)
  where outcome in ('applied', 'scheduled') and (restore_outcome is null or restore_outcome in ('restoring', 'failed'));
-- An edit's items (an edit deleted sets them null).
create index publish_items_edit_idx on public.publish_items (edit_id) where edit_id is not null;
create index publish_items_owner_idx on public.publish_items (owner_id, plan_id);
-- Not indexed (docs/decisions/0009): publish_items_content_type_fkey (registry rows are never deleted).
-- No (portal_id, owner_id) key of its own: the plan's cascade removes the items; the columns are its copies, for RLS.
alter table public.publish_items enable row level security;

-- ==== supabase/schemas/0301_function_are_known_content_types.sql ====
-- private.are_known_content_types(ts): whether ts is a non-empty array of
-- distinct registered content types: create_run's check of runs.content_types,
-- which no foreign key can reference. Stable, reads only; for the owner only.
create function private.are_known_content_types(ts text[]) returns boolean
language plpgsql
stable
parallel safe
set search_path = ''
as $$
begin
  return cardinality(ts) >= 1
     and (select count(distinct t.t) = count(*) and count(c.content_type) = count(*)
            from unnest(ts) as t(t)
            left join private.content_types c on c.content_type = t.t);
end;
$$;

-- ==== supabase/schemas/0302_function_is_listing_page.sql ====
-- private.is_listing_page(page): whether a probe's window answer has the
-- shape of a HubSpot listing page: a number `total` and a `results` array of
-- objects, each with a string or number `id` (complete_probe_job: the CMS
-- windows and HubDB rows' windows). Immutable; owner only.
create function private.is_listing_page(p_page jsonb) returns boolean
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return jsonb_typeof(p_page -> 'total') is not distinct from 'number'
     and jsonb_typeof(p_page -> 'results') is not distinct from 'array'
     and not exists (select 1 from jsonb_array_elements(p_page -> 'results') e
                      where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') not in ('string', 'number'));
end;
$$;

-- ==== supabase/schemas/0303_function_probe_checkpoint.sql ====
-- private.probe_checkpoint(portal, types, overlap, sweep_every): what a probe
-- asks HubSpot of each type (docs/decisions/0046): {types: {type: question}},
-- a CMS type the changes after its mark and archives after its archive mark,
-- near its last change (within twice the overlap) its overlap window instead
-- (windowAfter; decisions 0049, 0055); HubDB rows whether this cycle sweeps;
-- HubDB tables nothing (the whole list is compared). Only the types with
-- settled marks are asked about (a CMS type's archive mark set; none:
-- {types: {}}): the others count as changed. create_run (a probe job's
-- checkpoint) and claim_schedule_probe (a schedule probe's) ask it; owner only.
create function private.probe_checkpoint(p_portal_id uuid, p_types text[], p_overlap interval, p_sweep_every integer)
returns jsonb
language plpgsql
stable
set search_path = ''
-- Its statement's custom plans never beat the generic one: planned once, not at every quiet cycle.
set plan_cache_mode = force_generic_plan
as $$
begin
  return jsonb_build_object('types', coalesce((select jsonb_object_agg(m.content_type,
      case when m.content_type = 'hubdb_tables' then '{}'::jsonb
           when m.content_type = 'hubdb_rows' then jsonb_build_object('sweep', private.hubdb_sweep_due(m, p_sweep_every))
           else jsonb_build_object('updatedAfter', m.high_water, 'archivedAfter', m.archived_high_water) end
      || case when m.content_type <> 'hubdb_tables' and m.high_water >= now() - 2 * p_overlap
              then jsonb_build_object('windowAfter', m.high_water - p_overlap) else '{}' end)
    from public.sync_marks m
   where m.portal_id = p_portal_id and m.content_type = any (p_types)
     and (m.archived_high_water is not null or m.content_type in ('hubdb_tables', 'hubdb_rows'))), '{}'));
end;
$$;

-- ==== supabase/schemas/0304_function_probe_changed_types.sql ====
-- private.probe_changed_types(caller, portal, checkpoint, answers, tables_pages):
-- a probe's decision (docs/decisions/0046), the same for a probe job
-- (complete_probe_job) and a schedule probe (report_schedule_probe, 0058):
-- which of the checkpoint's types changed, by what HubSpot answered. A CMS
-- type changed when HubSpot counts any item changed after its mark or
-- archived after its archive mark (answers: {type: {changed, archived}}, the
-- totals of two limit=1 listings; a type asked for its overlap window, near
-- its last change: {window, archived}, window the page HubSpot sent, changed
-- when it is not one whole page of items stored live as they are (same data,
-- hence same update time), the answer its incremental fetch would give);
-- HubDB tables when the tables list (its summary in the answers:
-- {hubdb_tables: {tables: [{id, updatedAt, rowCount}]}}, one entry per table
-- of its pages; tables_pages: every page, required when HubDB is probed, kept
-- for a run's HubDB jobs) is not the tables stored live, table for table with
-- the same update time; HubDB rows when a table was updated after their mark
-- (near their last change, after their window: {windows: {tableId: page}},
-- the first page of each such table's rows updated after windowAfter, changed
-- as a CMS window is; decision 0055), or, on a sweep cycle, a table holds
-- fewer rows than are stored live or a table with stored rows is gone. A
-- type with no mark counts as changed (changed_types null: none). stored_rows: a sweep cycle's live
-- HubDB rows stored per table, counted once for the decision and the rows
-- job (decision 0056). Bad answers raise 22023, named after the caller.
-- Reads only; owner only.
create function private.probe_changed_types(p_caller text, p_portal_id uuid, p_checkpoint jsonb, p_answers jsonb,
                                            p_tables_pages text[], out changed_types text[], out stored_rows jsonb)
language plpgsql
stable
set search_path = ''
as $$
declare
  v_types text[];
  v_tables jsonb;
  v_windows jsonb; -- {type: page}: the overlap windows, parsed once
  v_row_windows jsonb; -- {tableId: page}: HubDB rows' windows near their last change, parsed once
  v_rows_after timestamptz; -- HubDB rows' windowAfter
  v_sweep boolean;
begin
  if p_answers is null or jsonb_typeof(p_answers) <> 'object' then
    raise exception '%: answers must be an object of {changed, archived} totals per CMS type', p_caller using errcode = '22023';
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(p_checkpoint -> 'types') k;
  if exists (select 1 from unnest(v_types) t
              where t not in ('hubdb_tables', 'hubdb_rows')
                and (coalesce(jsonb_typeof(p_answers #> array[t, 'archived']), '') <> 'number'
                     or case when p_checkpoint #> array['types', t, 'windowAfter'] is null
                             then coalesce(jsonb_typeof(p_answers #> array[t, 'changed']), '') <> 'number'
                             else coalesce(jsonb_typeof(p_answers #> array[t, 'window']), '') <> 'string' end)) then
    raise exception '%: every CMS type probed needs its {changed, archived} totals ({window, archived} near its last change)', p_caller using errcode = '22023';
  end if;
  -- (An expression first: most cycles have no window, and a query costs a quiet cycle more than its work.)
  if jsonb_path_exists(p_answers, '$.*.window') then
    select jsonb_object_agg(t, (p_answers #>> array[t, 'window'])::jsonb) into v_windows
      from unnest(v_types) t where jsonb_typeof(p_answers #> array[t, 'window']) = 'string';
    if exists (select 1 from jsonb_each(coalesce(v_windows, '{}')) w(type, page) where not private.is_listing_page(w.page)) then
      raise exception '%: a window must be a listing page: {total, results: [{id, ...}]}', p_caller using errcode = '22023';
    end if;
  end if;
  v_sweep := coalesce((p_checkpoint #>> '{types,hubdb_rows,sweep}')::boolean, false);
  if v_sweep then -- (set only under types.hubdb_rows: HubDB rows are probed)
    select coalesce(jsonb_object_agg(s.table_id, s.live_rows), '{}'::jsonb) into stored_rows
      from public.stored_hubdb_rows(p_portal_id) s;
  end if;
  v_rows_after := (p_checkpoint #>> '{types,hubdb_rows,windowAfter}')::timestamptz;
  if v_rows_after is not null then
    if jsonb_typeof(p_answers #> '{hubdb_rows,windows}') is distinct from 'object'
       or exists (select 1 from jsonb_each(p_answers #> '{hubdb_rows,windows}') w where jsonb_typeof(w.value) <> 'string') then
      raise exception '%: HubDB rows near their last change need {windows: {tableId: page}}', p_caller using errcode = '22023';
    end if;
    select jsonb_object_agg(w.key, w.value::jsonb) into v_row_windows from jsonb_each_text(p_answers #> '{hubdb_rows,windows}') w;
    if exists (select 1 from jsonb_each(coalesce(v_row_windows, '{}')) w(table_id, page) where not private.is_listing_page(w.page)) then
      raise exception '%: a window must be a listing page: {total, results: [{id, ...}]}', p_caller using errcode = '22023';
    end if;
  end if;

  if v_types && array['hubdb_tables', 'hubdb_rows'] then
    if p_tables_pages is null or cardinality(p_tables_pages) = 0 or array_position(p_tables_pages, null) is not null then
      raise exception '%: a probe of HubDB needs every page of the tables list', p_caller using errcode = '22023';
    end if;
    -- The decision reads the tables' summary, never the pages (a table with its columns is ~2 KB of JSON:
    -- parsing them cost a quiet cycle more than the rest of its decision; decision 0062).
    v_tables := p_answers #> '{hubdb_tables,tables}';
    if jsonb_typeof(v_tables) is distinct from 'array' then
      raise exception '%: a probe of HubDB needs the tables list''s summary: {hubdb_tables: {tables: [{id, updatedAt, rowCount}]}}', p_caller using errcode = '22023';
    end if;
  end if;

  select array_agg(t.content_type order by t.content_type) into changed_types
    from unnest(v_types) t(content_type)
    left join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
   where m.high_water is null
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and ((p_answers #>> array[t.content_type, 'changed'])::numeric > 0
               or (p_answers #>> array[t.content_type, 'archived'])::numeric > 0))
      -- The overlap window: more than its page holds, or an item not stored live as it is (new, updated, late).
      or (t.content_type not in ('hubdb_tables', 'hubdb_rows')
          and exists (select 1 from (select v_windows -> t.content_type as page) w
                       where (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                          or exists (select 1 from jsonb_array_elements(w.page -> 'results') e
                                      -- The stored item as HubSpot lists it (its update time is part of it), found by
                                      -- id: a scalar subquery, never an anti join that reads the whole type (decision 0051).
                                      where (select c.data from public.hubspot_content c
                                              where c.portal_id = p_portal_id and c.content_type = t.content_type
                                                and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from e)))
      -- The tables list is whole: changed when a table is not stored live with its update time (HubSpot moves
      -- it at every publish; the stored one is a column, so no table's data is read), or the stored hold more.
      or (t.content_type = 'hubdb_tables'
          and (exists (select 1 from jsonb_array_elements(v_tables) e
                        where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                           or (select c.hubspot_updated_at from public.hubspot_content c
                                where c.portal_id = p_portal_id and c.content_type = 'hubdb_tables'
                                  and c.hubspot_id = e ->> 'id' and c.deleted_at is null) is distinct from (e ->> 'updatedAt')::timestamptz)
               or jsonb_array_length(v_tables) <> (select count(*) from public.hubspot_content c
                                                    where c.portal_id = p_portal_id and c.content_type = 'hubdb_tables'
                                                      and c.deleted_at is null)))
      or (t.content_type = 'hubdb_rows' and v_rows_after is null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                       where jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                          or (e ->> 'updatedAt')::timestamptz > m.high_water))
      -- Near their last change: each table updated after the window, by its window's page (as a CMS window;
      -- a row is stored as listed with its table's id merged in). No window for such a table: changed.
      or (t.content_type = 'hubdb_rows' and v_rows_after is not null
          and exists (select 1 from jsonb_array_elements(v_tables) e
                        cross join lateral (select v_row_windows -> (e ->> 'id') as page) w
                       where (jsonb_typeof(e -> 'updatedAt') is distinct from 'string'
                              or (e ->> 'updatedAt')::timestamptz > v_rows_after)
                         and (w.page is null
                              or (w.page ->> 'total')::numeric <> jsonb_array_length(w.page -> 'results')
                              or exists (select 1 from jsonb_array_elements(w.page -> 'results') r
                                          where (select c.data from public.hubspot_content c
                                                  where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows'
                                                    and c.hubspot_id = (e ->> 'id') || ':' || (r ->> 'id') and c.deleted_at is null)
                                                is distinct from r || jsonb_build_object('tableId', e ->> 'id')))))
      or (t.content_type = 'hubdb_rows' and v_sweep
          and exists (select 1 from jsonb_each_text(stored_rows) s(table_id, live_rows)
                        left join jsonb_array_elements(v_tables) e on e ->> 'id' = s.table_id
                       where e is null or coalesce((e ->> 'rowCount')::numeric, 0) < s.live_rows::numeric));
end;
$$;

-- ==== supabase/schemas/0305_function_run_is_quiet.sql ====
-- private.run_is_quiet(run): whether every job of the run completed having
-- added, updated and deleted nothing (by their results). Settlement asks it
-- only for a scheduled fetch finishing with no failed or stopped job, to set
-- runs.quiet. plpgsql on purpose (docs/decisions/0002); for the owner only.
create function private.run_is_quiet(p_run_id uuid) returns boolean
language plpgsql stable
set search_path = ''
as $$
begin
  return not exists (
    select 1 from public.jobs j
     where j.run_id = p_run_id
       and (j.status <> 'completed'
            or coalesce((j.result ->> 'added')::integer, 0) <> 0
            or coalesce((j.result ->> 'updated')::integer, 0) <> 0
            or coalesce((j.result ->> 'deleted')::integer, 0) <> 0));
end;
$$;

-- ==== supabase/schemas/0306_function_run_notifies.sql ====
-- private.run_notifies(run): the notification rule, for a run that just
-- finished: a run a person started always; a scheduled one only when it failed
-- (failed / partially_failed) and the portal's previous finished scheduled run
-- of its kind (stopped ones aside) did not: the first failure after successes.
-- Quiet or changed scheduled successes send none. For the owner only.
create function private.run_notifies(p_run public.runs) returns boolean
language plpgsql stable
set search_path = ''
as $$
begin
  if p_run.trigger = 'user' then
    return true;
  end if;
  if p_run.status not in ('failed', 'partially_failed') then
    return false;
  end if;
  return coalesce((
    select prev.status not in ('failed', 'partially_failed')
      from public.runs prev
     where prev.portal_id = p_run.portal_id and prev.id <> p_run.id and prev.kind = p_run.kind
       and prev.trigger = 'schedule' and prev.finished_at is not null and prev.status <> 'stopped'
     order by prev.created_at desc
     limit 1), true);
end;
$$;

-- ==== supabase/schemas/0307_function_compact_quiet_cycles.sql ====
-- private.compact_quiet_cycles(portal): once quiet_cycles_per_fold of the
-- portal's quiet cycles have gathered beyond its last keep_quiet_cycles
-- (private.retention_settings), folds them (at most 100 a call) into
-- public.quiet_cycles and deletes their runs, jobs with them; until then one
-- look at the portal's quiet runs, no write (docs/decisions/0053). Runs are
-- taken FOR UPDATE SKIP LOCKED: a run another settlement holds waits for the
-- next call; only the roll-up row is waited for. Called at settlement; owner only.
create function private.compact_quiet_cycles(p_portal_id uuid) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_keep integer;
  v_per_fold integer;
  v_folded integer;
begin
  select s.keep_quiet_cycles, s.quiet_cycles_per_fold into v_keep, v_per_fold from private.retention_settings s where s.id;
  v_keep := coalesce(v_keep, 3);
  if not exists (select 1 from public.runs r
                  where r.portal_id = p_portal_id and r.quiet
                  order by r.finished_at desc
                 offset v_keep + coalesce(v_per_fold, 1) - 1) then
    return 0;
  end if;
  with doomed as (
    select r.id from public.runs r
     where r.portal_id = p_portal_id and r.quiet
     order by r.finished_at desc
     offset v_keep limit 100
       for update skip locked
  ), checked as (
    -- The jobs as they were before this statement's delete cascades to them.
    select j.run_id, count(*)::integer as jobs, coalesce(sum((j.result ->> 'fetched')::bigint), 0)::bigint as items
      from public.jobs j join doomed d on d.id = j.run_id
     group by j.run_id
  ), gone as (
    delete from public.runs r using doomed d where r.id = d.id
    returning r.id, r.portal_id, r.owner_id, r.finished_at
  ), folded as (
    insert into public.quiet_cycles as q (portal_id, owner_id, day, cycles, jobs, items_checked, first_finished_at, last_finished_at)
    select g.portal_id, g.owner_id, (g.finished_at at time zone 'UTC')::date, count(*)::integer,
           coalesce(sum(c.jobs), 0)::integer, coalesce(sum(c.items), 0)::bigint, min(g.finished_at), max(g.finished_at)
      from gone g left join checked c on c.run_id = g.id
     group by g.portal_id, g.owner_id, (g.finished_at at time zone 'UTC')::date
     order by 3
    on conflict (portal_id, day) do update
       set cycles = q.cycles + excluded.cycles, jobs = q.jobs + excluded.jobs,
           items_checked = q.items_checked + excluded.items_checked,
           first_finished_at = least(q.first_finished_at, excluded.first_finished_at),
           last_finished_at = greatest(q.last_finished_at, excluded.last_finished_at)
  )
  select count(*)::integer into v_folded from gone;
  return v_folded;
end;
$$;

-- ==== supabase/schemas/0308_function_settle_finished_run.sql ====
-- private.settle_finished_run(run, compact): what follows a run's finish, the
-- one place for it: a plan, publish or restore run's own settlement first
-- (private.settle_publish_run: its plan, its items, its status by items), its
-- notification when private.run_notifies says so (the first error in the
-- message; for those kinds private.publish_run_message, with item counts),
-- and, for a quiet cycle with p_compact, the portal's older quiet cycles
-- folded (compact_quiet_cycles). Called by count_finished_jobs and
-- settle_run, which hold the run's lock; owner only.
create function private.settle_finished_run(p_run public.runs, p_compact boolean) returns void
language plpgsql
set search_path = ''
as $$
begin
  if p_run.kind in ('plan', 'publish', 'restore') then
    p_run := private.settle_publish_run(p_run);
  end if;
  if private.run_notifies(p_run) then
    insert into public.notifications (user_id, run_id, kind, message)
    values (p_run.owner_id, p_run.id, 'run_' || p_run.status,
            case when p_run.kind in ('plan', 'publish', 'restore') then private.publish_run_message(p_run)
            else private.run_notification_message(p_run.kind, p_run.status, p_run.jobs_total, p_run.jobs_completed,
              p_run.jobs_failed, p_run.jobs_stopped,
              case when p_run.jobs_failed > 0 then
                (select f.last_error from public.jobs f
                  where f.run_id = p_run.id and f.status = 'failed' order by f.finished_at, f.id limit 1) end) end)
    on conflict (run_id) do nothing;
  end if;
  if p_run.quiet and p_compact then
    perform private.compact_quiet_cycles(p_run.portal_id);
  end if;
end;
$$;

-- ==== supabase/schemas/0309_function_count_finished_jobs.sql ====
-- private.count_finished_jobs(run, completed, failed): settlement by counters:
-- adds jobs that just finished to their unfinished run's counters; when they
-- were its last, finishes the run (status, quiet) and settles it
-- (settle_finished_run). A publish or restore run that goes on fails the
-- items of its jobs that failed (private.fail_publish_items). The caller holds
-- the run's lock and has already finished the jobs. True when this call
-- finished the run; owner only.
create function private.count_finished_jobs(p_run_id uuid, p_completed integer, p_failed integer) returns boolean
language plpgsql
set search_path = ''
as $$
declare
  v_run public.runs;
begin
  update public.runs r
     set jobs_completed = r.jobs_completed + p_completed,
         jobs_failed = r.jobs_failed + p_failed,
         status = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then 'running'
                       when r.jobs_stopped > 0 then 'stopped'
                       when r.jobs_failed + p_failed = 0 then 'completed'
                       when r.jobs_completed + p_completed = 0 then 'failed'
                       else 'partially_failed' end,
         finished_at = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then null else now() end,
         started_at = coalesce(r.started_at, now()),
         waiting_reason = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped < r.jobs_total then r.waiting_reason end,
         quiet = case when r.jobs_completed + p_completed + r.jobs_failed + p_failed + r.jobs_stopped >= r.jobs_total
                           and r.trigger = 'schedule' and r.kind = 'fetch' and r.jobs_stopped = 0 and r.jobs_failed + p_failed = 0
                      then private.run_is_quiet(r.id) else false end
   where r.id = p_run_id and r.finished_at is null
  returning r.* into v_run;
  if not found or v_run.finished_at is null then
    if p_failed > 0 and v_run.kind in ('publish', 'restore') then
      perform private.fail_publish_items(p_run_id, false);
    end if;
    return false;
  end if;
  perform private.settle_finished_run(v_run, true);
  return true;
end;
$$;

-- ==== supabase/schemas/0310_function_run_notification_message.sql ====
-- private.run_notification_message(...): the text of a finished run's
-- notification. Immutable; called by the settling functions (settle_run,
-- complete_job, complete_jobs, fail_job), for the owner only. plpgsql on
-- purpose: docs/decisions/0002-job-state-machine-and-settlement.md.
create function private.run_notification_message(
  p_kind text, p_status text, p_total integer, p_completed integer, p_failed integer, p_stopped integer, p_first_error text
) returns text
language plpgsql immutable
set search_path = ''
as $$
begin
  return case p_status
    when 'completed' then format('%s run completed: all %s jobs succeeded.', initcap(p_kind), p_total)
    when 'partially_failed' then format('%s run partially failed: %s of %s jobs completed, %s failed.%s',
      initcap(p_kind), p_completed, p_total, p_failed, coalesce(' First error: ' || left(p_first_error, 500), ''))
    when 'failed' then format('%s run failed: all %s jobs failed.%s',
      initcap(p_kind), p_total, coalesce(' First error: ' || left(p_first_error, 500), ''))
    else format('%s run stopped: %s of %s jobs had completed, %s stopped.', initcap(p_kind), p_completed, p_total, p_stopped)
  end;
end;
$$;

-- ==== supabase/schemas/0311_function_settle_run.sql ====
-- private.settle_run(run): recounts a run's jobs; when all are terminal it
-- finishes the run and settles it as counting does (settle_finished_run; its
-- quiet cycles are folded by the portal's next counted one). The caller holds
-- the run's lock (stop_run, fail_exhausted_jobs, disconnect_portal,
-- settle_stuck_runs). A publish or restore run that goes on fails the items
-- of its jobs that failed or were stopped (private.fail_publish_items). True
-- when this call finished the run.
create function private.settle_run(p_run_id uuid) returns boolean
language plpgsql
set search_path = ''
as $$
declare
  v_total integer;
  v_completed integer;
  v_failed integer;
  v_stopped integer;
  v_active integer;
  v_started integer;
  v_status text;
  v_run public.runs;
begin
  select count(*),
         count(*) filter (where j.status = 'completed'),
         count(*) filter (where j.status = 'failed'),
         count(*) filter (where j.status = 'stopped'),
         count(*) filter (where j.status in ('pending', 'running')),
         count(*) filter (where j.started_at is not null)
    into v_total, v_completed, v_failed, v_stopped, v_active, v_started
    from public.jobs j
   where j.run_id = p_run_id;

  if v_total = 0 then
    return false;
  end if;

  if v_active > 0 then
    update public.runs r
       set jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped,
           status = case when r.status = 'pending' and v_started > 0 then 'running' else r.status end,
           started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end
     where r.id = p_run_id and r.finished_at is null;
    if v_failed + v_stopped > 0
       and exists (select 1 from public.runs r where r.id = p_run_id and r.kind in ('publish', 'restore') and r.finished_at is null) then
      perform private.fail_publish_items(p_run_id, false);
    end if;
    return false;
  end if;

  v_status := case
    when v_stopped > 0 then 'stopped'
    when v_failed = 0 then 'completed'
    when v_completed = 0 then 'failed'
    else 'partially_failed'
  end;

  update public.runs r
     set status = v_status, finished_at = now(),
         started_at = case when v_started > 0 then coalesce(r.started_at, now()) else r.started_at end,
         jobs_total = v_total, jobs_completed = v_completed, jobs_failed = v_failed, jobs_stopped = v_stopped,
         quiet = v_status = 'completed' and r.trigger = 'schedule' and r.kind = 'fetch' and private.run_is_quiet(r.id)
   where r.id = p_run_id and r.finished_at is null
  returning r.* into v_run;
  if not found then
    return false;
  end if;
  -- Compaction waits for a counted settlement: this may run for many portals in one call, in no portal order.
  perform private.settle_finished_run(v_run, false);
  return true;
end;
$$;

-- ==== supabase/schemas/0312_function_fail_exhausted_jobs.sql ====
-- private.fail_exhausted_jobs(limit): fails running jobs whose job lease expired
-- on their last attempt, settling their runs; returns the runs it finished.
-- Called by claim_jobs and settle_stuck_runs, which may already hold a run
-- and a job: run rows are taken FOR UPDATE SKIP LOCKED (a busy run waits for
-- the next call), never waited for.
create function private.fail_exhausted_jobs(p_limit integer default 50) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_job record;
  v_finished integer := 0;
begin
  for v_job in
    select j.id, j.run_id
      from public.jobs j
     where j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts
     order by j.lease_expires_at
     limit p_limit
  loop
    perform 1 from public.runs r where r.id = v_job.run_id for update skip locked;
    if not found then
      continue;
    end if;
    update public.jobs j
       set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           last_error = format('Job lease expired on attempt %s of %s; the worker stopped responding (%s).',
                               j.attempts, j.max_attempts, coalesce(left(j.last_error, 200), 'no error recorded'))
     where j.id = v_job.id and j.status = 'running' and j.lease_expires_at <= now() and j.attempts >= j.max_attempts;
    if found and private.settle_run(v_job.run_id) then
      v_finished := v_finished + 1;
    end if;
  end loop;
  return v_finished;
end;
$$;

-- ==== supabase/schemas/0313_function_settle_stuck_runs.sql ====
-- public.settle_stuck_runs(when_due): the stuck-run safety net: fails jobs
-- whose last job lease expired, then settles unfinished runs that have jobs
-- and none active (run rows FOR UPDATE SKIP LOCKED, at most 1,000). With
-- p_when_due (the worker, at the start of every invocation) it runs only when
-- private.settle_stuck_runs_state.every has passed since it last ran, and only
-- in one caller at a time (the state row FOR UPDATE SKIP LOCKED): a fleet's
-- invocations start every second, and the scan reads every run in flight.
-- Returns the runs it settled. For the service role only.
create function public.settle_stuck_runs(p_when_due boolean default false) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_settled integer := 0;
begin
  if p_when_due then
    perform 1 from private.settle_stuck_runs_state s
     where s.id and s.last_settled_at <= now() - s.every
       for update skip locked;
    if not found then
      return 0;
    end if;
    update private.settle_stuck_runs_state s set last_settled_at = now() where s.id;
  end if;
  v_settled := private.fail_exhausted_jobs(1000);
  for v_run_id in
    select r.id
      from public.runs r
     where r.finished_at is null
       and exists (select 1 from public.jobs j where j.run_id = r.id)
       and not exists (select 1 from public.jobs j where j.run_id = r.id and j.status in ('pending', 'running'))
     order by r.created_at
     limit 1000
       for update of r skip locked
  loop
    if private.settle_run(v_run_id) then
      v_settled := v_settled + 1;
    end if;
  end loop;
  return v_settled;
end;
$$;
comment on function public.settle_stuck_runs(boolean) is
  'Settles runs left pending/running after all their jobs ended (and fails jobs whose last job lease expired). Returns runs settled. p_when_due: only when private.settle_stuck_runs_state.every has passed since the last time (the worker''s call).';

-- ==== supabase/schemas/0314_function_probe_requests.sql ====
-- private.probe_requests(checkpoint): how many HubSpot requests a probe's
-- first round sends for its questions (askHubSpot, functions/worker/change-questions.ts):
-- two listings per CMS type (changed and archived, or the overlap window and
-- archived), and the first page of the HubDB tables list when HubDB is probed.
-- Later pages and HubDB rows' windows are asked for as they come.
-- claim_schedule_probe grants them with the claim; owner only.
create function private.probe_requests(p_checkpoint jsonb)
returns integer
language plpgsql
immutable
set search_path = ''
as $$
begin
  -- (plpgsql: its plan is kept; a sql function with its own search_path is planned at every call)
  return (select coalesce(sum(case when k in ('hubdb_tables', 'hubdb_rows') then 0 else 2 end), 0)::integer
                 + case when p_checkpoint -> 'types' ?| array['hubdb_tables', 'hubdb_rows'] then 1 else 0 end
            from jsonb_object_keys(p_checkpoint -> 'types') k);
end;
$$;

-- ==== supabase/schemas/0315_function_record_probe.sql ====
-- private.record_probe(portal, run, types, changed, sweep_from, tables_pages):
-- what a probe leaves besides its changed types' fetch jobs: a changed HubDB
-- type's tables list, stored for the run (private.hubdb_tables_lists: its
-- jobs read it no more; take_hubdb_tables_list answers 'use'); the types that
-- did not change recorded as synced now (last_incremental_at, and on a sweep
-- cycle HubDB rows' last_sweep_at: sweep_from, when the probe was set). Locks
-- the portal's list row when it stores. complete_probe_job and
-- report_schedule_probe call it; owner only.
create function private.record_probe(p_portal_id uuid, p_run_id uuid, p_types text[], p_changed text[],
                                     p_sweep_from timestamptz, p_tables_pages text[])
returns void
language plpgsql
set search_path = ''
-- Its statement's custom plans never beat the generic one: planned once, not at every quiet cycle.
set plan_cache_mode = force_generic_plan
as $$
begin
  if p_run_id is not null and p_changed && array['hubdb_tables', 'hubdb_rows'] then
    insert into private.hubdb_tables_lists as l (portal_id, run_id, pages, read_at)
    values (p_portal_id, p_run_id, p_tables_pages, now())
    on conflict (portal_id) do update
       set run_id = excluded.run_id, pages = excluded.pages, read_at = excluded.read_at, reader_job_id = null, read_lease_expires_at = null;
  end if;
  update public.sync_marks m
     set last_incremental_at = now(), updated_at = now(),
         last_sweep_at = case when m.content_type = 'hubdb_rows' and p_sweep_from is not null then p_sweep_from else m.last_sweep_at end
   where m.portal_id = p_portal_id and m.content_type = any (p_types)
     and m.content_type <> all (coalesce(p_changed, '{}'));
end;
$$;

-- ==== supabase/schemas/0316_function_tombstone_rows_of_gone_tables.sql ====
-- private.tombstone_rows_of_gone_tables(job): a HubDB tables fetch job that has
-- just tombstoned tables (complete_fetch_job, its holder, in the same
-- transaction) takes their rows with them: the portal's live HubDB rows whose
-- table (the `<tableId>` of `<tableId>:<rowId>`) is one this job tombstoned
-- (deleted_at set, last_seen_job_id the job) become tombstones (deleted_at
-- now, seen by the job, a new change_seq, data kept), as a sweep does for the
-- rows of a table no longer live. So they go in the cycle that tombstones the
-- table, whether or not a HubDB rows job runs in it, at no HubSpot request.
-- Their change_seq follows the rows' commit order as every rows writer's
-- does: the portal's claim lock (claim_jobs' advisory lock) is taken first,
-- so no job of the portal is claimed (no rows job starts writing) until this
-- transaction ends; then the portal's running HubDB rows fetch job, if any,
-- is locked FOR UPDATE (a page of it being saved commits first, its next
-- waits). Neither wait can deadlock: a claim holding the claim lock only
-- tries locks and skips locked rows, and no transaction waits for a run row
-- while it holds a job row (decision 0068). Returns how many rows. Called
-- only when the job tombstoned a table: no statement otherwise. Owner only.
create function private.tombstone_rows_of_gone_tables(p_job public.jobs) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  perform pg_advisory_xact_lock(1903520117, hashtext(p_job.portal_id::text));
  perform 1 from public.jobs r
   where r.portal_id = p_job.portal_id and r.kind = 'fetch' and r.content_type = 'hubdb_rows'
     and r.status = 'running'
     for update;
  update public.hubspot_content c
     set deleted_at = now(), last_seen_job_id = p_job.id, change_seq = nextval('private.content_change_seq')
   where c.portal_id = p_job.portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
     and split_part(c.hubspot_id, ':', 1) = any (array(
           select t.hubspot_id from public.hubspot_content t
            where t.portal_id = p_job.portal_id and t.content_type = 'hubdb_tables'
              and t.last_seen_job_id = p_job.id and t.deleted_at is not null));
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;

-- ==== supabase/schemas/0317_function_stored_hubdb_row_ids.sql ====
-- public.stored_hubdb_row_ids(portal, table): the row ids (without the
-- `<tableId>:` prefix) of the table's live HubDB rows stored. A sweep page
-- compares them with every row HubSpot lists in the table and saves the
-- missing ones as tombstones (save_swept_table): the comparison runs in the
-- worker, as Postgres' part of a sweep is then one index-only read per table
-- (decision 0057). plpgsql: called once per swept table, its plan is cached
-- (decision 0052). The service role only (the worker).
create function public.stored_hubdb_row_ids(p_portal_id uuid, p_table_id text)
returns text[]
language plpgsql
stable
set search_path = ''
as $$
begin
  return array(
    select substr(c.hubspot_id, char_length(p_table_id) + 2)
      from public.hubspot_content c
     where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
       and split_part(c.hubspot_id, ':', 1) = p_table_id);
end;
$$;

-- ==== supabase/schemas/0318_function_hubdb_sweep_due.sql ====
-- private.hubdb_sweep_due(mark, sweep_every): whether a cycle of the HubDB
-- rows mark sweeps (reads the tables that lost rows whole): no sweep cadence,
-- no sweep yet, or the last sweep the cadence old (10 s early, as ticks are).
-- create_run asks it for a probe, incremental_checkpoint for a fetch job
-- (plpgsql: called per cycle, decision 0052). Owner only.
create function private.hubdb_sweep_due(p_mark public.sync_marks, p_sweep_every integer)
returns boolean
language plpgsql
stable
set search_path = ''
as $$
begin
  return coalesce(p_sweep_every, 0) = 0
      or p_mark.last_sweep_at is null
      or p_mark.last_sweep_at <= now() + interval '10 seconds' - make_interval(mins => p_sweep_every);
end;
$$;

-- ==== supabase/schemas/0319_function_incremental_checkpoint.sql ====
-- private.incremental_checkpoint(mark, overlap, sweep_every, stored_rows): the
-- first checkpoint of an incremental fetch job of the mark's type: {mode,
-- since, phase, after, finished}, since the mark less the schedule's overlap;
-- HubDB rows also hubdbSweep (hubdb_sweep_due) and, on a sweep cycle,
-- storedRows: the live rows stored per table ({tableId: count}; stored_rows
-- when the caller counted them, else counted here), which the job compares
-- with HubSpot's rowCount instead of counting them again (decision 0056).
-- Null (a full fetch) without a mark, and for HubDB tables (their whole list
-- is one request, shared with the rows job: decision 0045). create_run and
-- complete_probe_job start jobs with it; owner only.
create function private.incremental_checkpoint(p_mark public.sync_marks, p_overlap interval, p_sweep_every integer,
                                               p_stored_rows jsonb default null)
returns jsonb
language plpgsql
stable
set search_path = ''
as $$
declare
  v_sweep boolean;
begin
  if p_mark.high_water is null or p_mark.content_type = 'hubdb_tables' then
    return null;
  end if;
  if p_mark.content_type <> 'hubdb_rows' then
    return jsonb_build_object('mode', 'incremental', 'since', p_mark.high_water - p_overlap, 'phase', 'changed',
                              'after', null, 'finished', false);
  end if;
  v_sweep := private.hubdb_sweep_due(p_mark, p_sweep_every);
  return jsonb_build_object('mode', 'incremental', 'since', p_mark.high_water - p_overlap, 'phase', 'changed',
                            'after', null, 'finished', false, 'hubdbSweep', v_sweep)
    || case when v_sweep then jsonb_build_object('storedRows', coalesce(p_stored_rows,
         (select coalesce(jsonb_object_agg(s.table_id, s.live_rows), '{}'::jsonb)
            from public.stored_hubdb_rows(p_mark.portal_id) s))) else '{}'::jsonb end;
end;
$$;

-- ==== supabase/schemas/0320_function_create_run.sql ====
-- public.create_run(...): a run with one job per content type that has no
-- active job for the portal and kind yet (the active-job unique index and ON
-- CONFLICT DO NOTHING decide, jobs inserted in content-type order so two calls
-- never deadlock), nor a completed one in a run of that kind still in flight
-- (a second trigger joins the first run instead of redoing its finished types;
-- docs/decisions/0037); no run is left when every type is a duplicate. A fetch
-- is full or incremental (p_fetch_mode): an incremental job of a type with a
-- sync mark starts from it (private.incremental_checkpoint); a type without a
-- mark is fetched in full, and so are HubDB tables. A scheduled incremental
-- run probes first (docs/decisions/0046): its types with marks get one probe
-- job between them, which asks HubSpot whether anything changed and adds the
-- fetch jobs of the types that did (complete_probe_job); a CMS type or HubDB
-- rows changed within twice the overlap are asked for their overlap window
-- (windowAfter: the listing an incremental fetch would read, so late arrivals
-- near a change are still seen; docs/decisions/0049, 0055); a probe in flight
-- for the portal makes them duplicates. p_probed: the caller has probed
-- already (report_schedule_probe, decision 0058): the types given are the
-- changed ones and get their fetch jobs, no probe. p_trigger says who
-- asked (user or schedule); a schedule of a portal an operator paused gets
-- nothing (all its types answered as
-- duplicates). Locks only the rows it inserts. For the service role only (the
-- orchestrator, schedule_due_syncs).
create function public.create_run(
  p_portal_id uuid,
  p_requested_by uuid,
  p_kind text,
  p_content_types text[],
  p_totals integer[] default null,
  p_max_attempts integer default null,
  p_lease_seconds integer default null,
  p_fetch_mode text default 'full',
  p_trigger text default 'user',
  p_probed boolean default false
) returns table (run_id uuid, created_types text[], duplicate_types text[])
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_run uuid;
  v_created text[];
  v_kind private.job_kinds;
  v_overlap interval;
  v_sweep_every integer;
  v_done text[];
  v_probed text[];
  v_probe_id bigint;
  v_unfinished constant text[] := array['pending', 'running']; -- runs_finished_iff_terminal: finished_at is null
begin
  if p_portal_id is null or p_requested_by is null or p_kind is null or p_content_types is null then
    raise exception 'create_run: portal, requester, kind and content types are required' using errcode = '22004';
  end if;
  select * into v_kind from private.job_kinds k where k.kind = p_kind;
  if not found then
    raise exception 'create_run: unknown job kind "%"', p_kind using errcode = '22023';
  end if;
  if not private.are_known_content_types(p_content_types) then
    raise exception 'create_run: content types must be 1-8 distinct known types, got %', p_content_types using errcode = '22023';
  end if;
  if p_totals is not null and (cardinality(p_totals) <> cardinality(p_content_types)
      or exists (select 1 from unnest(p_totals) t where t < 0)) then
    raise exception 'create_run: totals must be non-negative and one per content type' using errcode = '22023';
  end if;
  if p_max_attempts is not null and p_max_attempts not between 1 and 100 then
    raise exception 'create_run: max_attempts must be between 1 and 100' using errcode = '22023';
  end if;
  if p_lease_seconds is not null and p_lease_seconds not between 1 and 3600 then
    raise exception 'create_run: lease_seconds must be between 1 and 3600' using errcode = '22023';
  end if;

  if p_kind = 'fetch' and p_fetch_mode is distinct from 'full' and p_fetch_mode is distinct from 'incremental' then
    raise exception 'create_run: a fetch is full or incremental, got %', p_fetch_mode using errcode = '22023';
  end if;
  if p_trigger is null or p_trigger not in ('user', 'schedule') then
    raise exception 'create_run: trigger must be user or schedule' using errcode = '22023';
  end if;

  select p.owner_id into v_owner from public.portals p where p.id = p_portal_id;
  if not found then
    raise exception 'create_run: portal % not found', p_portal_id using errcode = 'P0002';
  end if;

  -- An operator's pause (private.portal_pauses): the schedule creates nothing, every type stays due.
  if p_trigger = 'schedule' and exists (select 1 from private.portal_pauses pp where pp.portal_id = p_portal_id) then
    return query select null::uuid, '{}'::text[], p_content_types;
    return;
  end if;

  insert into public.runs (portal_id, owner_id, requested_by, kind, content_types, fetch_mode, trigger)
  values (p_portal_id, v_owner, p_requested_by, p_kind, p_content_types,
          case when p_kind = 'fetch' then p_fetch_mode end, p_trigger)
  returning id into v_run;
  select make_interval(secs => s.overlap_seconds), s.hubdb_sweep_every_minutes into v_overlap, v_sweep_every
    from public.sync_schedules s where s.portal_id = p_portal_id;
  v_overlap := coalesce(v_overlap, interval '120 seconds');
  v_sweep_every := coalesce(v_sweep_every, 0); -- without a schedule: every cycle sweeps

  -- Done in a run still in flight: part of that run, not redone (failed or stopped types may be asked again).
  -- In flight by status (v_unfinished), not finished_at: the portal's runs by its index, never every
  -- unfinished run read from runs_unfinished_idx (decision 0051).
  select coalesce(array_agg(distinct d.content_type), '{}') into v_done
    from public.runs r join public.jobs d on d.run_id = r.id
   where r.portal_id = p_portal_id and r.kind = p_kind and r.status = any (v_unfinished) and d.status = 'completed'
     and d.content_type = any (p_content_types);

  -- A scheduled incremental: the types with settled marks are probed first, by one job.
  if p_kind = 'fetch' and p_fetch_mode = 'incremental' and p_trigger = 'schedule' and not p_probed then
    select array_agg(t.content_type order by t.content_type) into v_probed
      from unnest(p_content_types) t(content_type)
      join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
     where m.high_water is not null
       and (m.archived_high_water is not null or t.content_type in ('hubdb_tables', 'hubdb_rows'))
       and not exists (select 1 from public.jobs a
                        where a.portal_id = p_portal_id and a.kind = 'fetch' and a.content_type = t.content_type
                          and a.status in ('pending', 'running'))
       and t.content_type <> all (v_done);
    if v_probed is not null then
      insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, max_attempts, checkpoint)
      select v_run, p_portal_id, v_owner, 'probe', null, k.default_max_attempts,
             private.probe_checkpoint(p_portal_id, v_probed, v_overlap, v_sweep_every)
        from private.job_kinds k where k.kind = 'probe'
      on conflict (portal_id) where kind = 'probe' and status in ('pending', 'running') do nothing
      returning id into v_probe_id;
    end if;
  end if;

  with inserted as (
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, progress_total, max_attempts, lease_seconds, checkpoint)
    select v_run, p_portal_id, v_owner, p_kind, t.content_type,
           case when p_totals is not null then t.total
                when p_kind = 'export' then (select count(*)::integer from public.hubspot_content c
                                             where c.portal_id = p_portal_id and c.content_type = t.content_type
                                               and c.deleted_at is null)
           end,
           coalesce(p_max_attempts, v_kind.default_max_attempts), p_lease_seconds,
           case when p_kind = 'fetch' and p_fetch_mode = 'incremental' then private.incremental_checkpoint(m, v_overlap, v_sweep_every) end
      from unnest(p_content_types, p_totals) with ordinality as t(content_type, total, ord)
      left join public.sync_marks m on m.portal_id = p_portal_id and m.content_type = t.content_type
     where t.content_type is not null
       -- Probed (or a probe in flight covers them): no fetch job now.
       and t.content_type <> all (coalesce(v_probed, '{}'))
       and t.content_type <> all (v_done)
     -- One global insert order, not the caller's: two calls listing the same
     -- types in different orders would each wait on the other's uncommitted
     -- job (ON CONFLICT waits for an in-progress insert) and deadlock.
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing
    returning content_type
  )
  select array_agg(t.content_type order by t.ord) into v_created
    from unnest(p_content_types) with ordinality as t(content_type, ord)
   where t.content_type in (select i.content_type from inserted i)
      or (v_probe_id is not null and t.content_type = any (v_probed));

  if v_created is null then
    delete from public.runs r where r.id = v_run;
    return query select null::uuid, '{}'::text[], p_content_types;
    return;
  end if;

  update public.runs r set content_types = v_created,
         jobs_total = (select count(*)::integer from public.jobs j where j.run_id = v_run)
   where r.id = v_run;
  return query select v_run, v_created,
    coalesce((select array_agg(t) from unnest(p_content_types) t where t <> all (v_created)), '{}'::text[]);
end;
$$;

-- ==== supabase/schemas/0321_function_stop_run.sql ====
-- public.stop_run(run): stops a run: its pending and running jobs become
-- stopped at once (a running holder finds out at its next write) and the run
-- is settled. Locks the run FOR UPDATE, then its jobs. False when the run had
-- finished or does not exist. For the service role only (the orchestrator).
create function public.stop_run(p_run_id uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  perform 1 from public.runs r where r.id = p_run_id and r.finished_at is null for update;
  if not found then
    return false;
  end if;
  update public.jobs j
     set status = 'stopped', finished_at = now(), lease_expires_at = null, updated_at = now()
   where j.run_id = p_run_id and j.status in ('pending', 'running');
  perform private.settle_run(p_run_id);
  return true;
end;
$$;

-- ==== supabase/schemas/0329_function_portal_cap.sql ====
-- private.portal_cap(portal, kind): the portal cap, running jobs of a kind one
-- portal may hold at once (null: none). For a kind that calls HubSpot
-- (job_request_rate set), the portal's learned limit per second (at most the
-- configured ceiling) ÷ the requests per second one job sends, rounded up,
-- between 1 and job_kinds.portal_cap_max: a Professional portal runs more jobs at once than
-- a Starter one. Unknown limit: a private app's 100 per 10 s. Reads only; owner only.
create function private.portal_cap(p_portal_id uuid, p_kind text)
returns integer
language plpgsql
stable
set search_path = ''
as $$
begin
  -- plpgsql, not sql: claims call it per candidate, and a sql function with a SET clause is
  -- planned anew at every call (decision 0052).
  return (
    select case when k.portal_cap_max is null or k.job_request_rate is null then k.portal_cap_max
                else least(k.portal_cap_max, greatest(1, ceil(coalesce(
                       (select least(b.max_per_interval * 1000.0 / b.interval_ms, coalesce(b.configured_max / 10.0, 'infinity'))
                          from public.portals p
                          join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
                         where p.id = p_portal_id and b.max_per_interval is not null),
                       10.0) / k.job_request_rate)::integer))
           end
      from private.job_kinds k
     where k.kind = p_kind);
end;
$$;

-- ==== supabase/schemas/0330_function_set_claim_rank.sql ====
-- Trigger jobs_set_claim_rank: before each job insert, sets claim_rank to 1 +
-- the portal's active jobs, so claims (by claim_rank, run_after, id) interleave
-- portals. Reads only; the trigger function is for the owner only.
-- Rationale: docs/decisions/0003-claiming.md.
create function private.set_claim_rank() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.claim_rank := 1 + (select count(*) from public.jobs j
                          where j.portal_id = new.portal_id and j.status in ('pending', 'running'));
  return new;
end;
$$;
create trigger jobs_set_claim_rank before insert on public.jobs
  for each row execute function private.set_claim_rank();

-- ==== supabase/schemas/0331_function_claimable.sql ====
-- private.claimable(portal, kind, type, nth): whether a pending job may be
-- claimed now as its portal's nth of that kind in one claim: its portal
-- cap leaves room, and no conflicting fetch or export is in flight.
-- Called by claim_jobs holding the portal's claim lock; reads only; owner only.
-- The other claim sites write this check out, not call it (decision 0003,
-- "The claimable check, written out").
create function private.claimable(p_portal_id uuid, p_kind text, p_content_type text, p_nth bigint default 1)
returns boolean
language plpgsql
stable
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  if p_nth + (select count(*) from public.jobs r
                where r.portal_id = p_portal_id and r.kind = p_kind and r.status = 'running')
     > coalesce(private.portal_cap(p_portal_id, p_kind), 2147483647) then
    return false;
  end if;
  if p_kind = 'export' then
    return not exists (select 1 from public.jobs x
                        where x.portal_id = p_portal_id and x.kind = 'fetch' and x.content_type = p_content_type
                          and x.status in ('pending', 'running'));
  end if;
  if p_kind = 'fetch' then
    return not exists (select 1 from public.jobs x
                        where x.portal_id = p_portal_id and x.kind = 'export' and x.content_type = p_content_type
                          and x.status = 'running');
  end if;
  return true;
end;
$$;

-- ==== supabase/schemas/0332_function_claim_jobs.sql ====
-- public.claim_jobs(worker, n, kinds): claims up to n jobs, expired job leases
-- first, then due pending jobs fairly across portals within their portal cap and
-- the fetch/export exclusion; each gets a new fencing token and job lease. Locks:
-- job rows FOR UPDATE SKIP LOCKED, the portal's claim lock (advisory, xact, tried
-- never waited for). The worker's claim; the service role only. docs/decisions/0003.
create function public.claim_jobs(p_worker_id text, p_max_jobs integer, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  -- A row picked by id is checked against v_pending, which a generic plan keeps as a
  -- parameter: no partial index of pending jobs can then be read whole for it (decisions 0030, 0050).
  v_pending constant text := 'pending';
  v_want integer := p_max_jobs;
  v_ids bigint[];      -- picked this round: rows locked, pending ones' portals locked
  v_more bigint[];
  v_order bigint[];
  v_portals uuid[];
  v_loads bigint[];
  v_bound bigint;
  v_id bigint;
  v_candidate record;
  v_seen uuid;
  v_usable boolean;
  v_expired boolean;
  v_exhausted boolean;
  v_claimed integer;
  v_locked boolean := false; -- this transaction holds a portal's claim lock
  v_busy boolean;            -- a claimable job's portal was busy with another claimer
  v_retries integer := 0;
begin
  if p_worker_id is null or char_length(p_worker_id) not between 1 and 200 then
    raise exception 'worker_id must be 1-200 characters' using errcode = '22023';
  end if;
  if p_max_jobs is null or p_max_jobs not between 1 and 1000 then
    raise exception 'max_jobs must be between 1 and 1000, got %', p_max_jobs using errcode = '22023';
  end if;
  -- (Nested IFs: with no kinds given, no query runs at all.)
  if p_kinds is not null then
    if exists (select 1 from unnest(p_kinds) k
                where k is null or not exists (select 1 from private.job_kinds jk where jk.kind = k)) then
      raise exception 'unknown job kind in %', p_kinds using errcode = '22023';
    end if;
  end if;

  -- Expired job leases: a job on its last attempt fails (not claimed); the others are rescued first.
  select coalesce(bool_or(e.attempts >= e.max_attempts), false), coalesce(bool_or(e.attempts < e.max_attempts), false)
    into v_exhausted, v_expired
    from (select j.attempts, j.max_attempts from public.jobs j
           where j.status = 'running' and j.lease_expires_at <= now()
           order by j.lease_expires_at
           limit 1000) e;
  if v_exhausted then
    perform private.fail_exhausted_jobs(50);
  end if;

  -- Another round when the claim took fewer jobs than were picked (a picked
  -- job's portal changed between the pick and the claim), or after the 2 ms
  -- pause below.
  for v_round in 1 .. 5 loop
    v_ids := '{}';
    v_busy := false;

    -- Rescue (already running: no cap, exclusion or portal lock to check).
    if v_expired then
      select coalesce(array_agg(e.id order by e.lease_expires_at), '{}') into v_ids
        from (select e.id, e.lease_expires_at from public.jobs e
               where e.status = 'running' and e.lease_expires_at <= now() and e.attempts < e.max_attempts
                 and (p_kinds is null or e.kind = any (p_kinds))
               order by e.lease_expires_at
               limit v_want
                 for update skip locked) e;
    end if;

    if v_want - cardinality(v_ids) = 1 then
      -- 1. The first job, among the 128 first, of a portal with no running job
      --    (no cap or fetch to wait for there; an export still checks for its
      --    fetch). Per candidate, in order: idle portal, then its claim lock (the
      --    CASE keeps that order), then its row.
      select coalesce(array_agg(c.id), '{}') into v_more
        from (select j.id
                from (select p.id, p.claim_rank, p.run_after from public.jobs p
                       where p.status = 'pending' and p.run_after <= now()
                         and (p_kinds is null or p.kind = any (p_kinds))
                       order by p.claim_rank, p.run_after, p.id
                       limit 128) w
                join public.jobs j on j.id = w.id
               where j.status = v_pending and j.run_after <= now()
                 and case when (select 1 from public.jobs r
                                 where r.portal_id = j.portal_id and r.status = 'running' limit 1) is not null
                            then false -- (LIMIT: a probe per candidate, never a hash of every running job)
                          when j.kind = 'export' and (select 1 from public.jobs x
                                                       where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                         and x.content_type = j.content_type
                                                         and x.status in ('pending', 'running') limit 1) is not null
                            then false
                          else pg_try_advisory_xact_lock(1903520117, hashtext(j.portal_id::text))
                     end
               order by w.claim_rank, w.run_after, w.id
               limit 1
                 for update of j skip locked) c;
      v_ids := v_ids || v_more;

      -- 2. No idle portal: among the 32 first claimable jobs, the portal with
      --    the fewest running jobs (each portal's load read once).
      if cardinality(v_more) = 0 then
        with w as materialized (
          select p.id, p.portal_id, p.kind, p.content_type, p.claim_rank, p.run_after
            from public.jobs p
           where p.status = 'pending' and p.run_after <= now()
             and (p_kinds is null or p.kind = any (p_kinds))
             and p.id <> all (v_ids)
           order by p.claim_rank, p.run_after, p.id
           limit 32
        ), load as (
          select d.portal_id, l.n, l.fetching, l.exporting
            from (select distinct w.portal_id from w) d
           cross join lateral (
                 select count(*) as n,
                        count(*) filter (where r.kind = 'fetch') as fetching,
                        coalesce(array_agg(r.content_type) filter (where r.kind = 'export'), '{}') as exporting
                   from public.jobs r where r.portal_id = d.portal_id and r.status = 'running') l
        )
        select coalesce(array_agg(w.id order by l.n, w.claim_rank, w.run_after, w.id), '{}'),
               coalesce(array_agg(w.portal_id order by l.n, w.claim_rank, w.run_after, w.id), '{}'),
               coalesce(array_agg(l.n order by l.n, w.claim_rank, w.run_after, w.id), '{}')
          into v_order, v_portals, v_loads
          from w
          join load l on l.portal_id = w.portal_id
         where (case w.kind when 'fetch' then l.fetching else l.n - l.fetching end)
                 < coalesce(private.portal_cap(w.portal_id, w.kind), 2147483647)
           and not (w.kind = 'fetch' and w.content_type = any (l.exporting))
           and not (w.kind = 'export' and (select 1 from public.jobs x
                                            where x.portal_id = w.portal_id and x.kind = 'fetch'
                                              and x.content_type = w.content_type
                                              and x.status in ('pending', 'running') limit 1) is not null);
        -- A portal being claimed in by someone else right now is skipped, but
        -- only for a portal no more loaded than it will be after that claim.
        v_bound := null;
        for i in 1 .. cardinality(v_order) loop
          exit when v_loads[i] > v_bound;
          if pg_try_advisory_xact_lock(1903520117, hashtext(v_portals[i]::text)) then
            v_locked := true;
            select j.id into v_id from public.jobs j
             where j.id = v_order[i] and j.status = v_pending and j.run_after <= now()
               for update skip locked;
            if found then
              v_ids := v_ids || v_id;
              exit;
            end if;
          else
            v_busy := true;
            v_bound := coalesce(v_bound, v_loads[i] + 1);
          end if;
        end loop;
      end if;
    elsif v_want > cardinality(v_ids) then
      -- A batch: claimable jobs in scan order (a portal's cap counting the
      -- batch is checked at the claim), then the claim locks of their portals
      -- (tried: a job whose portal another claimer is claiming in is left for
      -- the next claim; waiting would queue batches behind each other).
      select coalesce(array_agg(c.id order by c.claim_rank, c.run_after, c.id), '{}'),
             coalesce(array_agg(c.portal_id order by c.claim_rank, c.run_after, c.id), '{}')
        into v_order, v_portals
        from (select p.id, p.portal_id, p.claim_rank, p.run_after
                from public.jobs p
               where p.status = 'pending' and p.run_after <= now()
                 and (p_kinds is null or p.kind = any (p_kinds))
                 and p.id <> all (v_ids)
                 -- private.claimable(p.portal_id, p.kind, p.content_type), written out (decision 0003)
                 and (select case when count(*) = 0 then true
                                  else count(*) < coalesce(private.portal_cap(p.portal_id, p.kind), 2147483647) end
                        from public.jobs r
                       where r.portal_id = p.portal_id and r.kind = p.kind and r.status = 'running')
                 and not (p.kind = 'fetch' and (select 1 from public.jobs x
                                                 where x.portal_id = p.portal_id and x.kind = 'export'
                                                   and x.content_type = p.content_type and x.status = 'running'
                                                 limit 1) is not null)
                 and not (p.kind = 'export' and (select 1 from public.jobs x
                                                  where x.portal_id = p.portal_id and x.kind = 'fetch'
                                                    and x.content_type = p.content_type
                                                    and x.status in ('pending', 'running') limit 1) is not null)
               order by p.claim_rank, p.run_after, p.id
               limit v_want - cardinality(v_ids)
                 for update of p skip locked) c;
      select coalesce(array_agg(x.id order by x.ord), '{}') into v_more
        from unnest(v_order, v_portals) with ordinality as x(id, portal_id, ord)
       where pg_try_advisory_xact_lock(1903520117, hashtext(x.portal_id::text));
      v_locked := v_locked or cardinality(v_more) > 0;
      v_ids := v_ids || v_more;
    end if;

    -- 3. One job wanted and still none, and no fairer portal just busy (or
    --    tried twice already): the next claimable job in scan order. A
    --    portal's jobs are looked at under one try of its lock.
    if cardinality(v_ids) < v_want and p_max_jobs = 1 and (not v_busy or v_retries >= 2) then
      v_seen := null;
      for v_candidate in
        select p.id, p.portal_id, p.kind, p.content_type
          from public.jobs p
         where p.status = 'pending' and p.run_after <= now()
           and (p_kinds is null or p.kind = any (p_kinds))
           and p.id <> all (v_ids)
         order by p.claim_rank, p.run_after, p.id
         limit 2000 -- bounded work (and an index scan, never a sort of every pending job)
      loop
        exit when cardinality(v_ids) >= v_want;
        if v_candidate.portal_id is distinct from v_seen then
          v_seen := v_candidate.portal_id;
          v_usable := pg_try_advisory_xact_lock(1903520117, hashtext(v_candidate.portal_id::text));
          if v_usable then
            v_locked := true;
          elsif private.claimable(v_candidate.portal_id, v_candidate.kind, v_candidate.content_type) then
            v_busy := true;
          end if;
        end if;
        continue when not v_usable
                   or not private.claimable(v_candidate.portal_id, v_candidate.kind, v_candidate.content_type,
                                            1 + (select count(*) from public.jobs c
                                                  where c.id = any (v_ids) and c.portal_id = v_candidate.portal_id
                                                    and c.kind = v_candidate.kind and c.status = 'pending'));
        select j.id into v_id from public.jobs j
         where j.id = v_candidate.id and j.status = v_pending and j.run_after <= now()
           for update skip locked;
        if found then
          v_ids := v_ids || v_id;
        end if;
      end loop;
    end if;

    if cardinality(v_ids) = 0 then
      -- Nothing picked though a job is claimable: its portal was being claimed
      -- in by someone else at that moment (a claim holds its portal for about a
      -- millisecond). Pick again after 2 ms — at most twice, and never while
      -- holding a portal, which would keep others out of it. (Waiting for the
      -- busy portal's lock instead would herd every waiter onto that portal.)
      exit when not v_busy or v_retries >= 2 or v_locked;
      perform pg_sleep(0.002);
      v_retries := v_retries + 1;
      continue;
    end if;

    -- Claim; a pending job only if private.claimable still says so now, in a
    -- snapshot taken after its portal's claim lock (any earlier claim is seen).
    if cardinality(v_ids) = 1 then
      return query
      update public.jobs j
         set status = 'running',
             attempts = j.attempts + 1,
             worker_id = p_worker_id,
             fencing_token = nextval('private.fencing_token_seq'),
             lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds,
                                  (select k.lease_seconds from private.job_kinds k where k.kind = j.kind))),
             started_at = coalesce(j.started_at, now()),
             waiting_reason = null,
             updated_at = now()
       where j.id = v_ids[1]
         and (j.status = 'running'
              -- private.claimable(j.portal_id, j.kind, j.content_type), written out: this is the hot path
              -- (a portal's first running job is within any cap, which is at least 1: not looked up).
              -- Not a function call: decision 0003, "The claimable check, written out".
              or ((select case when count(*) = 0 then true
                               else count(*) < coalesce(private.portal_cap(j.portal_id, j.kind), 2147483647) end
                     from public.jobs r
                    where r.portal_id = j.portal_id and r.kind = j.kind and r.status = 'running')
                  and not (j.kind = 'export' and (select 1 from public.jobs x
                                                   where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                     and x.content_type = j.content_type
                                                     and x.status in ('pending', 'running') limit 1) is not null)
                  and not (j.kind = 'fetch' and (select 1 from public.jobs x
                                                  where x.portal_id = j.portal_id and x.kind = 'export'
                                                    and x.content_type = j.content_type and x.status = 'running'
                                                  limit 1) is not null)))
      returning j.*;
    else
      -- A portal's n-th pending job of a kind in the batch must fit as the n-th.
      return query
      with picked as (
        select j.id, j.status,
               row_number() over (partition by j.portal_id, j.kind, j.status order by c.ord) as nth
          from unnest(v_ids) with ordinality as c(id, ord)
          join public.jobs j on j.id = c.id
      )
      update public.jobs j
         set status = 'running',
             attempts = j.attempts + 1,
             worker_id = p_worker_id,
             fencing_token = nextval('private.fencing_token_seq'),
             lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
             started_at = coalesce(j.started_at, now()),
             waiting_reason = null,
             updated_at = now()
        from picked p, private.job_kinds k
       where j.id = p.id and k.kind = j.kind
         and (p.status = 'running'
              -- private.claimable(j.portal_id, j.kind, j.content_type, p.nth), written out: no function call per
              -- claimed job (the cap, at least 1, is not looked up for a portal's first running job)
              or ((select case when p.nth + count(*) <= 1 then true
                               else p.nth + count(*) <= coalesce(private.portal_cap(j.portal_id, j.kind), 2147483647) end
                     from public.jobs r
                    where r.portal_id = j.portal_id and r.kind = j.kind and r.status = 'running')
                  and not (j.kind = 'export' and (select 1 from public.jobs x
                                                   where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                     and x.content_type = j.content_type
                                                     and x.status in ('pending', 'running') limit 1) is not null)
                  and not (j.kind = 'fetch' and (select 1 from public.jobs x
                                                  where x.portal_id = j.portal_id and x.kind = 'export'
                                                    and x.content_type = j.content_type and x.status = 'running'
                                                  limit 1) is not null)))
      returning j.*;
    end if;
    get diagnostics v_claimed = row_count;
    v_want := v_want - v_claimed;
    exit when v_want = 0 or v_claimed = cardinality(v_ids);
  end loop;
end;
$$;
comment on function public.claim_jobs(text, integer, text[]) is
  'Claims up to N jobs: expired job leases first, then due pending jobs, portals with fewer running jobs first, within their portal cap and the fetch/export exclusion (FOR UPDATE SKIP LOCKED; a new fencing token each).';

-- ==== supabase/schemas/0334_function_claimable_jobs_exist.sql ====
-- public.claimable_jobs_exist(kinds, schedules): whether a claim would find work now (an
-- expired job lease, a due schedule probe unless schedules is false, or one of the first 64 due pending
-- jobs within its portal's cap and the fetch/export exclusion). Reads only, no locks; polled by idle
-- worker lanes, asked at every invocation's end, and by report_and_claim_schedule_probes (jobs only).
-- The service role only.
create function public.claimable_jobs_exist(p_kinds text[] default null, p_schedules boolean default true)
returns boolean
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
begin
  -- claim_jobs's rescue test, due-pending window and claimable check, written
  -- out here too rather than shared (decision 0003, "The claimable check, written out").
  if exists (select 1 from public.jobs e
              where e.status = 'running' and e.lease_expires_at <= now() and e.attempts < e.max_attempts
                and (p_kinds is null or e.kind = any (p_kinds))) then
    return true;
  end if;
  -- A schedule probe a lane could claim (claim_schedule_probe; decision 0058). The arguments' test on
  -- its own: in one condition with the query, the query's plan is set up even when the test is false.
  if p_schedules and (p_kinds is null or 'probe' = any (p_kinds)) then
    if exists (select 1 from public.sync_schedules s
                where not s.paused and least(s.next_incremental_at, s.next_full_at) <= now() + interval '10 seconds'
                  and private.schedule_probe_due(s, now() + interval '10 seconds')) then
      return true;
    end if;
  end if;
  return exists (
    select 1
      from (select p.portal_id, p.kind, p.content_type from public.jobs p
             where p.status = 'pending' and p.run_after <= now()
               and (p_kinds is null or p.kind = any (p_kinds))
             order by p.claim_rank, p.run_after, p.id
             limit 64) w
     -- private.claimable(w.portal_id, w.kind, w.content_type), written out
     where (select case when count(*) = 0 then true -- within any cap (at least 1): not looked up
                        else count(*) < coalesce(private.portal_cap(w.portal_id, w.kind), 2147483647) end
              from public.jobs r
             where r.portal_id = w.portal_id and r.kind = w.kind and r.status = 'running')
       and not (w.kind = 'export' and (select 1 from public.jobs x
                                        where x.portal_id = w.portal_id and x.kind = 'fetch'
                                          and x.content_type = w.content_type
                                          and x.status in ('pending', 'running') limit 1) is not null)
       and not (w.kind = 'fetch' and (select 1 from public.jobs x
                                       where x.portal_id = w.portal_id and x.kind = 'export'
                                         and x.content_type = w.content_type and x.status = 'running'
                                       limit 1) is not null));
end;
$$;
comment on function public.claimable_jobs_exist(text[], boolean) is
  'True when claim_jobs (or claim_schedule_probe, unless p_schedules is false) would find work now: an expired job lease, a due schedule probe, or among the first 64 due pending jobs (claim order) one within its portal''s cap and the fetch/export exclusion.';

-- ==== supabase/schemas/0340_function_mark_run_started.sql ====
-- private.mark_run_started(run): marks a pending run running (and clears its
-- waiting reason) once one of its jobs reports work. Its callers
-- (heartbeat_job, save_page) hold a job row, so the run row is taken FOR UPDATE
-- SKIP LOCKED, never waited for. For the owner only.
create function private.mark_run_started(p_run_id uuid) returns void
language plpgsql
set search_path = ''
as $$
begin
  if exists (select 1 from public.runs r
              where r.id = p_run_id and r.finished_at is null and (r.status = 'pending' or r.waiting_reason is not null)) then
    update public.runs r
       set status = 'running', started_at = coalesce(r.started_at, now()), waiting_reason = null
     where r.id in (select rr.id from public.runs rr
                     where rr.id = p_run_id and rr.finished_at is null and (rr.status = 'pending' or rr.waiting_reason is not null)
                       for update skip locked);
  end if;
end;
$$;

-- ==== supabase/schemas/0341_function_heartbeat_job.sql ====
-- public.heartbeat_job(job, fencing_token, ...): the holder extends its job lease and
-- records progress; false when it no longer holds the job (stop working). Locks
-- the held job row (by jobs_pkey: v_running is compared as a constant, see
-- docs/decisions/0003); the run only SKIP LOCKED. The service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.heartbeat_job(
  p_job_id bigint, p_fencing_token bigint,
  p_progress_done integer default null, p_progress_total integer default null, p_checkpoint jsonb default null
) returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if p_progress_done < 0 or p_progress_total < 0 then
    raise exception 'progress must be non-negative' using errcode = '22023';
  end if;
  update public.jobs j
     set lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         progress_done = coalesce(p_progress_done, j.progress_done),
         progress_total = coalesce(p_progress_total, j.progress_total),
         checkpoint = coalesce(p_checkpoint, j.checkpoint),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running
     and j.lease_expires_at > now() and k.kind = j.kind
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  perform private.mark_run_started(v_run_id);
  return true;
end;
$$;

-- ==== supabase/schemas/0342_function_release_job.sql ====
-- public.release_job(job, fencing_token, progress, checkpoint): the holder hands the
-- job back (pending, due now) without using an attempt; 'released', 'failed'
-- when it was the kind's max_stalled_releases-th release in a row without
-- progress (failed for good via fail_job: run, then job), null when not the
-- holder. Locks the held job row. For the service role only (the worker).
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.release_job(
  p_job_id bigint, p_fencing_token bigint, p_progress_done integer default null, p_checkpoint jsonb default null
) returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running';
  v_done integer;
  v_stalled integer;
  v_limit integer;
  v_kind text;
begin
  if p_progress_done < 0 then
    raise exception 'progress must be non-negative' using errcode = '22023';
  end if;
  select coalesce(p_progress_done, j.progress_done),
         case when coalesce(p_progress_done, j.progress_done) > coalesce(j.released_progress, -1) then 0
              else j.stalled_releases + 1 end,
         k.max_stalled_releases, j.kind
    into v_done, v_stalled, v_limit, v_kind
    from public.jobs j join private.job_kinds k on k.kind = j.kind
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now();
  if not found then
    return null;
  end if;
  if v_stalled >= v_limit then
    -- fail_job locks the run before the job, as every settling path does.
    if public.fail_job(p_job_id, p_fencing_token,
         format('Released %s times in a row without progress: one unit of work of this %s job (a page, an export '
                'chunk) needs more CPU or wall clock than a worker invocation has. Raise the worker''s budget '
                '(WORKER_CPU_BUDGET_MS, the edge runtime''s limits) or lower the unit''s size, then run it again.',
                v_stalled, v_kind),
         false) is null then
      return null;
    end if;
    update public.jobs j set stalled_releases = v_stalled where j.id = p_job_id;
    return 'failed';
  end if;
  update public.jobs j
     set status = 'pending', run_after = now(), lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         progress_done = v_done,
         checkpoint = coalesce(p_checkpoint, j.checkpoint),
         stalled_releases = v_stalled,
         released_progress = v_done,
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now();
  return case when found then 'released' end;
end;
$$;

-- ==== supabase/schemas/0343_function_park_job.sql ====
-- public.park_job(job, fencing_token, until, reason): the holder puts its job back to
-- pending until `until` (at most 7 days) without using an attempt, the reason
-- on the job and its run (HubSpot's daily limit). Locks the run FOR UPDATE,
-- then the job (v_running: see docs/decisions/0003). The service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.park_job(p_job_id bigint, p_fencing_token bigint, p_until timestamptz, p_reason text)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if p_until is null or p_reason is null then
    raise exception 'park_job: until and reason are required' using errcode = '22004';
  end if;
  if p_until <= now() or p_until > now() + interval '7 days' then
    raise exception 'park_job: until must be in the future and at most 7 days ahead, got %', p_until using errcode = '22023';
  end if;
  if char_length(p_reason) not between 1 and 500 then
    raise exception 'park_job: reason must be 1-500 characters' using errcode = '22023';
  end if;
  if private.lock_run_of_job(p_job_id) is null then
    return false;
  end if;
  update public.jobs j
     set status = 'pending', run_after = p_until, lease_expires_at = null,
         attempts = greatest(j.attempts - 1, 0),
         waiting_reason = p_reason,
         updated_at = now()
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
  returning j.run_id into v_run_id;
  if not found then
    return false;
  end if;
  update public.runs r set waiting_reason = p_reason where r.id = v_run_id and r.finished_at is null;
  return true;
end;
$$;
comment on function public.park_job(bigint, bigint, timestamptz, text) is
  'Holder only: back to pending until p_until without using an attempt; the reason goes on the job and its run.';

-- ==== supabase/schemas/0344_function_lock_run_of_job.sql ====
-- private.lock_run_of_job(job): locks the job's run FOR NO KEY UPDATE (the
-- lock order: run, then job) and returns its id, null for an unknown job. The
-- one preamble of the holder calls that settle or park (complete_job,
-- fail_job, park_job, complete_fetch_job); for the owner only. NO KEY: it
-- excludes every other locker of the run as FOR UPDATE would, but not the
-- foreign-key check (FOR KEY SHARE of the run) that a job's second update in
-- one transaction makes (a sweep's page: its counts, then its deletions). So
-- a holder saving a page never waits for a settlement that holds the run,
-- and a settlement may wait for a job row (tombstone_rows_of_gone_tables:
-- decision 0068).
-- The holder calls' one shared opening; their fence stays written out in each (decision 0030).
create function private.lock_run_of_job(p_job_id bigint) returns uuid
language plpgsql
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if v_run_id is not null then
    perform 1 from public.runs r where r.id = v_run_id for no key update;
    if not found then
      return null;
    end if;
  end if;
  return v_run_id;
end;
$$;

-- ==== supabase/schemas/0345_function_complete_job.sql ====
-- public.complete_job(job, fencing_token, result): the holder completes its job and
-- settles the run by counters (private.count_finished_jobs: the last job
-- finishes it); false for anyone else. Locks the run FOR UPDATE, then the job
-- (v_running: see docs/decisions/0003). For the service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.complete_job(p_job_id bigint, p_fencing_token bigint, p_result jsonb default null)
returns boolean
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_run_id uuid;
begin
  if private.lock_run_of_job(p_job_id) is null then
    return false;
  end if;
  -- A CTE named done, as in complete_jobs: the holder-plan check (tests/queue-plans.test.ts) reads its scan by that name.
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now(),
           result = case when p_result is null then j.result else coalesce(j.result, '{}'::jsonb) || p_result end
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id
  )
  select d.run_id into v_run_id from done d;
  if v_run_id is null then
    return false;
  end if;
  perform private.count_finished_jobs(v_run_id, 1, 0);
  return true;
end;
$$;

-- ==== supabase/schemas/0346_function_complete_jobs.sql ====
-- public.complete_jobs(ids, fencing tokens): completes many held jobs at once and
-- settles their runs by counters (count_finished_jobs, portals in id order so
-- that quiet-cycle roll-ups are taken in one order); returns how many were
-- still held. Locks the runs FOR UPDATE in id order, then the jobs (v_running:
-- see docs/decisions/0003). For the service role only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.complete_jobs(p_job_ids bigint[], p_fencing_tokens bigint[])
returns integer
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_runs uuid[];
  v_counts integer[];
  v_i integer;
begin
  if p_job_ids is null or p_fencing_tokens is null or cardinality(p_job_ids) <> cardinality(p_fencing_tokens) then
    raise exception 'complete_jobs: job ids and fencing tokens must be arrays of the same length' using errcode = '22023';
  end if;
  perform 1 from public.runs r
   where r.id in (select j.run_id from public.jobs j where j.id = any (p_job_ids))
   order by r.id
     for update;
  with done as (
    update public.jobs j
       set status = 'completed', finished_at = now(), lease_expires_at = null, updated_at = now()
      from unnest(p_job_ids, p_fencing_tokens) as t(id, fencing_token)
     where j.id = t.id and j.fencing_token = t.fencing_token and j.status = v_running and j.lease_expires_at > now()
    returning j.run_id, j.portal_id
  ), per_run as (
    select d.run_id, d.portal_id, count(*)::integer as n from done d group by d.run_id, d.portal_id
  )
  select array_agg(p.run_id order by p.portal_id, p.run_id), array_agg(p.n order by p.portal_id, p.run_id)
    into v_runs, v_counts from per_run p;
  for v_i in 1 .. coalesce(cardinality(v_runs), 0) loop
    perform private.count_finished_jobs(v_runs[v_i], v_counts[v_i], 0);
  end loop;
  return coalesce((select sum(n)::integer from unnest(v_counts) as n), 0);
end;
$$;

-- ==== supabase/schemas/0347_function_tables_list_holder.sql ====
-- private.tables_list_holder(job, fencing_token, caller): the job, when the caller
-- holds it (its fencing token, running, lease not expired) and it may use its
-- run's HubDB tables list (a fetch of HubDB tables or rows);
-- null when fenced off; raises for any other job. The shared check of
-- take_hubdb_tables_list and store_hubdb_tables_list; owner only.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function private.tables_list_holder(p_job_id bigint, p_fencing_token bigint, p_caller text)
returns public.jobs
language plpgsql
stable
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now();
  if not found then
    return null;
  end if;
  if v_job.kind <> 'fetch' or v_job.content_type not in ('hubdb_tables', 'hubdb_rows') then
    raise exception '%: job % is not a fetch of HubDB tables or rows', p_caller, p_job_id using errcode = '22023';
  end if;
  return v_job;
end;
$$;

-- ==== supabase/schemas/0348_function_fail_job.sql ====
-- public.fail_job(job, fencing_token, error, retryable): records the holder's failure
-- and returns the outcome: 'pending' (retried after a backoff with jitter, the
-- attempt given back), 'failed' (for good; the run settled by counters,
-- count_finished_jobs) or null (not the holder).
-- A retryable failure is retried until the job has failed for its kind's
-- job_kinds.retry_for_seconds without progress (retry_until: set at the first
-- failure of such a run of them, kept while progress_done stays at or below
-- failing_progress). Each wait is about as long as the job has been failing
-- (at least backoff_base_seconds, at most backoff_max_seconds, 50–100 %
-- jitter), so the waits double, and never runs past retry_until: the last try
-- is at the give-up time. It gives the attempt back, as release and park do:
-- attempts count claims that ended without an answer (a killed worker, whose
-- job lease expired), so an outage costs time, never attempts. A permanent
-- failure fails the job at once. Locks the run FOR UPDATE, then the job
-- (v_running: see docs/decisions/0003). For the service role only (the
-- worker; release_job). Decision: docs/decisions/0072.
-- Its fence is written out, not shared: a helper adds a statement or a per-row call (decision 0030).
create function public.fail_job(p_job_id bigint, p_fencing_token bigint, p_error text, p_retryable boolean default true)
returns text
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  v_running constant text := 'running'; -- see the top of this file
  v_job record;
  v_until timestamptz;
  v_retry boolean;
  v_wait double precision;
begin
  if p_error is null or p_retryable is null then
    raise exception 'fail_job: error and retryable are required' using errcode = '22004';
  end if;
  if private.lock_run_of_job(p_job_id) is null then
    return null;
  end if;
  select j.run_id, j.progress_done, j.retry_until, j.failing_progress,
         k.retry_for_seconds, k.backoff_base_seconds, k.backoff_max_seconds
    into v_job
    from public.jobs j
    join private.job_kinds k on k.kind = j.kind
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = v_running and j.lease_expires_at > now()
     for update of j;
  if not found then
    return null;
  end if;
  -- The run of failures goes on while nothing progressed since the last one; else it starts now.
  v_until := case when v_job.retry_until is not null and v_job.progress_done <= v_job.failing_progress then v_job.retry_until
                  else now() + make_interval(secs => v_job.retry_for_seconds) end;
  v_retry := p_retryable and now() < v_until;
  -- As long as it has failed so far (now - (v_until - retry_for)), within the kind's bounds, with jitter.
  v_wait := least(v_job.backoff_max_seconds,
                  greatest(v_job.backoff_base_seconds, extract(epoch from now() - v_until) + v_job.retry_for_seconds))
            * (0.5 + random() / 2);
  update public.jobs j
     set status = case when v_retry then 'pending' else 'failed' end,
         attempts = case when v_retry then greatest(j.attempts - 1, 0) else j.attempts end,
         run_after = case when v_retry then least(v_until, now() + make_interval(secs => v_wait)) else j.run_after end,
         finished_at = case when v_retry then null else now() end,
         retry_until = case when p_retryable then v_until else j.retry_until end,
         failing_progress = case when p_retryable then j.progress_done else j.failing_progress end,
         lease_expires_at = null,
         last_error = left(p_error, 4000),
         updated_at = now()
   where j.id = p_job_id;
  if not v_retry then
    perform private.count_finished_jobs(v_job.run_id, 0, 1);
  end if;
  return case when v_retry then 'pending' else 'failed' end;
end;
$$;

-- ==== supabase/schemas/0349_function_tombstone_items.sql ====
-- private.tombstone_items(job, ids): the job's portal and type's live items
-- among `ids` become tombstones (deleted_at now, seen by the job, a new
-- change_seq, data kept); unknown and already deleted ids are skipped.
-- Returns how many. For the job's holder, which its caller has checked
-- (save_archived_page, save_swept_table); owner only.
create function private.tombstone_items(p_job public.jobs, p_ids text[]) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  update public.hubspot_content c
     set deleted_at = now(), last_seen_job_id = p_job.id, change_seq = nextval('private.content_change_seq')
   where c.portal_id = p_job.portal_id and c.content_type = p_job.content_type
     and c.hubspot_id = any (p_ids) and c.deleted_at is null;
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;

-- ==== supabase/schemas/0350_function_save_page.sql ====
-- private.save_page(job, ids, times, data, checkpoint, total, page): stores a
-- validated page for the job row its caller holds FOR UPDATE (after checking
-- the fence): new items inserted, changed ones rewritten (both take a new
-- change_seq), unchanged ones not written at all; a full fetch records the
-- page's items in private.full_fetch_pages (what it saw; `page` adds the
-- body's digest and what it set next); then private.advance_fetch_job.
-- Called by save_fetched_page_raw; owner only. docs/decisions/0005, 0042.
create function private.save_page(
  p_job public.jobs, p_ids text[], p_updated timestamptz[], p_data jsonb[], p_checkpoint jsonb, p_progress_total integer,
  p_page private.full_fetch_pages default null
) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_counts jsonb;
  v_content_ids bigint[];
  v_content_seq bigint;
begin
  with incoming as (
    select distinct on (x.id) x.id, x.updated_at, x.data
      from unnest(p_ids, p_updated, p_data) as x(id, updated_at, data)
     order by x.id
  ), classified as (
    -- One probe of the unique index per item (LIMIT 1 keeps the lookup a
    -- parameterised index scan: a join would let the planner hash-join the
    -- page with every stored item of the portal and type).
    select i.id, i.updated_at, i.data, c.content_id, c.change_seq,
           c.content_id is null as is_new,
           (c.content_id is not null and (c.deleted_at is not null
              or c.hubspot_updated_at is distinct from i.updated_at or c.data is distinct from i.data)) as is_changed
      from incoming i
      left join lateral (
        select s.id as content_id, s.deleted_at, s.hubspot_updated_at, s.data, s.change_seq
          from public.hubspot_content s
         where s.portal_id = p_job.portal_id and s.content_type = p_job.content_type and s.hubspot_id = i.id
         limit 1) c on true
  ), inserted as (
    -- One number per new row for both change_seq and inserted_seq (two column defaults would draw two).
    insert into public.hubspot_content as c
           (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, fetched_at, last_seen_job_id, deleted_at,
            change_seq, inserted_seq)
    select p_job.portal_id, p_job.owner_id, p_job.content_type, k.id, k.data, k.updated_at, now(), p_job.id, null, k.seq, k.seq
      from (select k0.*, nextval('private.content_change_seq') as seq from classified k0 where k0.is_new) k
    on conflict (portal_id, content_type, hubspot_id) do update
       set data = excluded.data, hubspot_updated_at = excluded.hubspot_updated_at, fetched_at = excluded.fetched_at,
           last_seen_job_id = excluded.last_seen_job_id, deleted_at = null,
           change_seq = nextval('private.content_change_seq')
    returning c.id, c.change_seq
  ), changed as (
    update public.hubspot_content c
       set data = k.data, hubspot_updated_at = k.updated_at, fetched_at = now(), last_seen_job_id = p_job.id, deleted_at = null,
           change_seq = nextval('private.content_change_seq')
      from classified k
     where c.id = any (array(select k2.content_id from classified k2 where k2.is_changed))
       and c.id = k.content_id
    returning c.id, c.change_seq
  ), written as (
    select w.id, w.change_seq from inserted w union all select w.id, w.change_seq from changed w
  )
  -- Unchanged items are not written: a full fetch's page row says it saw them.
  select jsonb_build_object(
           'fetched', count(*),
           'added', count(*) filter (where is_new),
           'updated', count(*) filter (where is_changed),
           'unchanged', count(*) filter (where not is_new and not is_changed)),
         array(select k.content_id from classified k where not k.is_new and not k.is_changed union all select w.id from written w),
         greatest(max(change_seq) filter (where not is_new and not is_changed), (select max(w.change_seq) from written w))
    into v_counts, v_content_ids, v_content_seq
    from classified;

  if not coalesce(p_job.checkpoint ->> 'mode' = 'incremental', false) then
    -- A full fetch re-reading a position in the same job (resumed after a lost job lease) saw both pages' items.
    insert into private.full_fetch_pages as f
           (portal_id, content_type, page_key, job_id, digest, context, content_ids, content_seq, next_after, max_updated)
    values (p_job.portal_id, p_job.content_type, coalesce(p_job.checkpoint ->> 'after', ''), p_job.id, p_page.digest,
            p_page.context, v_content_ids, coalesce(v_content_seq, 0), p_page.next_after, p_page.max_updated)
    on conflict (portal_id, content_type, page_key) do update
       set content_ids = case when f.job_id = excluded.job_id
                              then array(select distinct u from unnest(f.content_ids || excluded.content_ids) u)
                              else excluded.content_ids end,
           digest = case when f.job_id <> excluded.job_id or f.digest = excluded.digest then excluded.digest end,
           job_id = excluded.job_id, context = excluded.context, content_seq = excluded.content_seq,
           next_after = excluded.next_after, max_updated = excluded.max_updated;
  end if;
  perform private.advance_fetch_job(p_job, v_counts, p_checkpoint, p_progress_total);
  return v_counts;
end;
$$;

-- ==== supabase/schemas/0351_function_save_archived_page.sql ====
-- private.save_archived_page(job, ids, checkpoint): stores a page of items
-- HubSpot lists as archived (deleted) for the job row its caller holds FOR
-- UPDATE: the portal's live rows among them become tombstones
-- (tombstone_items); unknown ids are skipped. Checkpoint,
-- progress, counts ('deleted'), job lease; the run marked started. Called by
-- save_fetched_page_raw in an incremental job's archived phase; owner only.
create function private.save_archived_page(p_job public.jobs, p_ids text[], p_checkpoint jsonb) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  v_deleted := private.tombstone_items(p_job, p_ids);

  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + cardinality(p_ids),
         result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'deleted', coalesce((j.result ->> 'deleted')::integer, 0) + v_deleted,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
  return jsonb_build_object('fetched', 0, 'added', 0, 'updated', 0, 'unchanged', 0, 'deleted', v_deleted);
end;
$$;

-- ==== supabase/schemas/0352_function_save_fetched_page_raw.sql ====
-- public.save_fetched_page_raw(job, fencing_token, body, context): stores one page as
-- HubSpot sent it (a CMS v3 list response, parsed here; HubDB rows take their
-- table's id from context, and nothing else of their table: its name lives in
-- its hubdb_tables item, so a renamed table renames no row) and the next checkpoint, for the job's holder only:
-- {fetched, added, updated, unchanged, checkpoint}, null when fenced off. The
-- job row is locked FOR UPDATE after parsing. An incremental job (checkpoint
-- mode 'incremental') keeps its mode, since and phase in the checkpoint: its
-- 'changed' listing is upserted, then its 'archived' listing becomes
-- tombstones (save_archived_page); HubDB rows read their changed rows
-- ('changed'), then, when the checkpoint's hubdbSweep is not false (a sweep
-- cycle: create_run; its changed pass lists in 'recount' the tables it wrote
-- rows to, counted again for the sweep), sweep the tables that lost rows instead ('sweep': a page
-- per table read whole, its rows changed since upserted and 'missingIds',
-- the ids of its stored rows HubSpot no longer lists (all of them for a table
-- no longer live), given to save_swept_table). Every job tracks 'maxUpdated', the newest
-- update time saved (HubDB rows: of their tables), for the sync mark, and an
-- incremental one 'maxArchived', the newest of its archived listing. A full
-- fetch's page that HubSpot sends again byte for byte (its digest and context
-- as private.full_fetch_pages holds them at its position) and whose items
-- nothing wrote since is counted unchanged without being parsed. The service
-- role only (the worker).
create function public.save_fetched_page_raw(p_job_id bigint, p_fencing_token bigint, p_body text, p_context jsonb default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_body jsonb;
  v_results jsonb;
  v_after text;
  v_job public.jobs;
  v_rows boolean;
  v_table_id text;
  v_next_table_id text;
  v_checkpoint jsonb;
  v_ids text[];
  v_updated timestamptz[];
  v_data jsonb[];
  v_counts jsonb;
  v_incremental boolean;
  v_archived boolean;
  v_sweep boolean;
  v_max timestamptz;
  v_keep jsonb;
  v_digest bytea;
  v_known private.full_fetch_pages;
  v_peeked jsonb;
  v_look boolean := false;
  v_page_max timestamptz;
begin
  if p_body is null then
    raise exception 'save_fetched_page_raw: the page body is required' using errcode = '22004';
  end if;
  if p_context is not null and jsonb_typeof(p_context) not in ('object', 'null') then
    raise exception 'save_fetched_page_raw: context must be a JSON object' using errcode = '22023';
  end if;
  -- A full fetch's page may be one its position gave before, unchanged (a look, not a lock).
  -- Small pages (an empty listing's end, a few items) are parsed: cheaper than the look.
  if octet_length(p_body) >= 4096 then
    select j.checkpoint into v_peeked from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       and j.kind = 'fetch' and not coalesce(j.checkpoint ->> 'mode' = 'incremental', false);
    v_look := found;
  end if;
  if v_look then
    v_digest := sha256(convert_to(p_body, 'UTF8'));
    select f.* into v_known from public.jobs j
      join private.full_fetch_pages f
        on f.portal_id = j.portal_id and f.content_type = j.content_type and f.page_key = coalesce(j.checkpoint ->> 'after', '')
     where j.id = p_job_id and f.digest = v_digest and f.context is not distinct from p_context
       and not exists (select 1 from public.hubspot_content c
                        where c.id = any (f.content_ids) and (c.deleted_at is not null or c.change_seq > f.content_seq));
  end if;
  if v_known.page_key is not null then
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       for update;
    if not found then
      return null;
    end if;
    if v_job.checkpoint is distinct from v_peeked then
      v_known := null; -- moved on meanwhile: parsed below
    end if;
  end if;

  if v_known.page_key is not null then
    v_after := v_known.next_after;
    v_page_max := v_known.max_updated;
    v_results := '[]'::jsonb;
    v_rows := v_job.content_type = 'hubdb_rows';
    v_table_id := nullif(p_context ->> 'tableId', '');
    v_next_table_id := nullif(p_context ->> 'nextTableId', '');
  else
    -- Parsed before the job row is locked: the lock is held only for the writes.
    begin
      v_body := p_body::jsonb;
    exception when others then
      raise exception 'save_fetched_page_raw: the HubSpot page is not valid JSON (%)', sqlerrm using errcode = '22P02';
    end;
    v_results := v_body -> 'results';
    if jsonb_typeof(v_body) <> 'object' or coalesce(jsonb_typeof(v_results), '') <> 'array' then
      raise exception 'save_fetched_page_raw: the HubSpot page has no results array' using errcode = '22023';
    end if;
    v_after := case when jsonb_typeof(v_body #> '{paging,next,after}') = 'string' then nullif(v_body #>> '{paging,next,after}', '') end;

    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       for update;
    if not found then
      return null;
    end if;
    if v_job.kind <> 'fetch' then
      raise exception 'save_fetched_page_raw: job % is a % job, not a fetch job', p_job_id, v_job.kind using errcode = '22023';
    end if;

    v_rows := v_job.content_type = 'hubdb_rows';
    if v_rows then
      v_table_id := nullif(p_context ->> 'tableId', '');
      v_next_table_id := nullif(p_context ->> 'nextTableId', '');
      if v_table_id is null and (jsonb_array_length(v_results) > 0 or v_after is not null) then
        raise exception 'save_fetched_page_raw: a page of HubDB rows needs its tableId in the context' using errcode = '22023';
      end if;
    end if;

    -- coalesce: a missing key gives a NULL type, which must fail the check too.
    if exists (select 1 from jsonb_array_elements(v_results) e
                where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') not in ('string', 'number')
                   or char_length(e ->> 'id') = 0
                   or char_length(case when v_rows then v_table_id || ':' || (e ->> 'id') else e ->> 'id' end) > 200) then
      raise exception 'save_fetched_page_raw: every result must be an object with an id (1-200 characters)' using errcode = '22023';
    end if;

    -- HubSpot's time: `updated` (CMS), else `updatedAt` (HubDB); not a string: none.
    select coalesce(array_agg(case when v_rows then v_table_id || ':' || (e ->> 'id') else e ->> 'id' end), '{}'),
           coalesce(array_agg(case when jsonb_typeof(t.v) = 'string' then (t.v #>> '{}')::timestamptz end), '{}'),
           coalesce(array_agg(case when v_rows then e || jsonb_build_object('tableId', v_table_id) else e end), '{}')
      into v_ids, v_updated, v_data
      from jsonb_array_elements(v_results) e
      cross join lateral (select coalesce(nullif(e -> 'updated', 'null'::jsonb), e -> 'updatedAt') as v) t;
    v_page_max := (select max(u) from unnest(v_updated) u);
  end if;

  v_incremental := coalesce(v_job.checkpoint ->> 'mode' = 'incremental', false);
  v_archived := v_incremental and not v_rows and coalesce(v_job.checkpoint ->> 'phase' = 'archived', false);
  v_sweep := v_incremental and v_rows and coalesce(v_job.checkpoint ->> 'phase' = 'sweep', false);
  if v_incremental and not v_rows and v_after is null and not v_archived then
    -- The changed listing is done: the archived one comes next.
    v_checkpoint := jsonb_build_object('after', null, 'finished', false, 'phase', 'archived');
  elsif not v_rows then
    v_checkpoint := jsonb_build_object('after', v_after, 'finished', v_after is null);
  elsif v_after is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":%s}', to_json(v_table_id), to_json(v_after)), 'finished', false);
  elsif v_next_table_id is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":null}', to_json(v_next_table_id)), 'finished', false);
  elsif v_incremental and coalesce(v_job.checkpoint ->> 'phase', 'changed') <> 'sweep'
        and coalesce((v_job.checkpoint ->> 'hubdbSweep')::boolean, true) then
    -- The changed rows are read: on a sweep cycle (create_run's hubdbSweep) the tables that lost rows are next.
    v_checkpoint := jsonb_build_object('after', null, 'finished', false, 'phase', 'sweep');
  else
    v_checkpoint := jsonb_build_object('after', null, 'finished', true);
  end if;

  -- What the job keeps across pages: its mode, since and phase, and the newest update time saved.
  v_keep := coalesce(v_job.checkpoint, '{}'::jsonb) - 'after' - 'finished';
  if not v_archived then
    v_max := greatest((v_keep ->> 'maxUpdated')::timestamptz,
                      case when v_rows then (p_context ->> 'tableUpdatedAt')::timestamptz
                           else v_page_max end);
    if v_max is not null then
      v_keep := v_keep || jsonb_build_object('maxUpdated', v_max);
    end if;
  elsif v_page_max is not null then
    -- The newest archive time saved, for the mark a probe asks archives after (sync_marks.archived_high_water).
    v_keep := v_keep || jsonb_build_object('maxArchived', greatest((v_keep ->> 'maxArchived')::timestamptz, v_page_max));
  end if;
  -- A sweep cycle's changed pass: the tables it writes rows to are counted again for the sweep (decision 0056).
  if v_rows and v_incremental and not v_sweep and v_keep ? 'storedRows' and cardinality(v_ids) > 0
     and not coalesce(v_keep -> 'recount' ? v_table_id, false) then
    v_keep := v_keep || jsonb_build_object('recount', coalesce(v_keep -> 'recount', '[]'::jsonb) || to_jsonb(v_table_id));
  end if;
  v_checkpoint := v_keep || v_checkpoint;

  if v_known.page_key is not null then
    v_counts := jsonb_build_object('fetched', cardinality(v_known.content_ids), 'added', 0, 'updated', 0,
                                   'unchanged', cardinality(v_known.content_ids));
    update private.full_fetch_pages f set job_id = v_job.id
     where f.portal_id = v_known.portal_id and f.content_type = v_known.content_type and f.page_key = v_known.page_key;
    perform private.advance_fetch_job(v_job, v_counts, v_checkpoint, null);
  elsif cardinality(v_ids) = 0 and not (v_sweep and v_table_id is not null) then
    -- Nothing listed (a quiet cycle's pages, a listing's end): only the job moves on.
    v_counts := jsonb_build_object('fetched', 0, 'added', 0, 'updated', 0, 'unchanged', 0);
    perform private.advance_fetch_job(v_job, v_counts, v_checkpoint, null);
  elsif v_archived then
    v_counts := private.save_archived_page(v_job, v_ids, v_checkpoint);
  elsif v_sweep and v_table_id is not null then
    if coalesce(jsonb_typeof(v_body -> 'missingIds'), '') <> 'array'
       or jsonb_path_exists(v_body, '$.missingIds[*] ? ((@.type() != "string" && @.type() != "number") || @ == "")') then
      raise exception 'save_fetched_page_raw: a sweep page needs missingIds, the ids of its table''s stored rows HubSpot no longer lists' using errcode = '22023';
    end if;
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null)
                || private.save_swept_table(v_job, v_table_id, array(select jsonb_array_elements_text(v_body -> 'missingIds')));
  elsif v_incremental then
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null);
  else
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null,
      row(null, null, null, null, v_digest, p_context, null, null, v_after, v_page_max)::private.full_fetch_pages);
  end if;
  return v_counts || jsonb_build_object('checkpoint', v_checkpoint);
end;
$$;

-- ==== supabase/schemas/0353_function_complete_fetch_job.sql ====
-- public.complete_fetch_job(job, fencing_token): completes the holder's fetch job and
-- moves the type's sync mark (public.sync_marks), the only place it moves. A
-- full fetch tombstones its type's items none of its pages held (private.
-- full_fetch_pages) and sets the mark to the newest update time it saved,
-- capped at its start (the archive mark: its start); a HubDB tables one
-- that tombstoned tables tombstones their stored rows too
-- (private.tombstone_rows_of_gone_tables, counted as hubdbRowsDeleted in its
-- result); an incremental one deletes nothing (its archived listings and
-- sweeps did) and only raises the marks (the archive mark to its newest
-- archive, at least its since). A
-- probe (complete_probe_job) moves no mark. Settles the run; false
-- for anyone else. Locks the run, then the job. The service role only.
create function public.complete_fetch_job(p_job_id bigint, p_fencing_token bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_deleted integer := 0;
  v_rows_deleted integer;
  v_incremental boolean;
  v_max timestamptz;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'fetch'
     for update;
  if not found then
    return false;
  end if;
  v_incremental := coalesce(v_job.checkpoint ->> 'mode' = 'incremental', false);
  v_max := (v_job.checkpoint ->> 'maxUpdated')::timestamptz;

  if not v_incremental then
    -- Live items less those this job's pages held: EXCEPT (hashed or sorted, spilling if it must).
    update public.hubspot_content c
       set deleted_at = now(), last_seen_job_id = p_job_id, change_seq = nextval('private.content_change_seq')
     where c.deleted_at is null and c.id = any (array(
             select s.id from public.hubspot_content s
              where s.portal_id = v_job.portal_id and s.content_type = v_job.content_type and s.deleted_at is null
             except
             select unnest(f.content_ids) from private.full_fetch_pages f
              where f.portal_id = v_job.portal_id and f.content_type = v_job.content_type and f.job_id = p_job_id));
    get diagnostics v_deleted = row_count;
    -- A table gone takes its rows in the same transaction, whether or not a rows job runs this cycle.
    if v_deleted > 0 and v_job.content_type = 'hubdb_tables' then
      v_rows_deleted := private.tombstone_rows_of_gone_tables(v_job);
    end if;
    -- Positions this job did not read again hold nothing it saw.
    delete from private.full_fetch_pages f
     where f.portal_id = v_job.portal_id and f.content_type = v_job.content_type and f.job_id <> p_job_id;
    insert into public.sync_marks as m (portal_id, owner_id, content_type, high_water, last_full_at, last_job_id, last_sweep_at,
                                        archived_high_water)
    values (v_job.portal_id, v_job.owner_id, v_job.content_type, least(v_max, v_job.started_at), now(), p_job_id,
            case when v_job.content_type = 'hubdb_rows' then v_job.created_at end, v_job.started_at)
    on conflict (portal_id, content_type) do update
       set high_water = excluded.high_water, last_full_at = excluded.last_full_at,
           last_job_id = excluded.last_job_id, last_sweep_at = excluded.last_sweep_at,
           archived_high_water = excluded.archived_high_water, updated_at = now();
  else
    v_deleted := coalesce((v_job.result ->> 'deleted')::integer, 0);
    insert into public.sync_marks as m (portal_id, owner_id, content_type, high_water, last_incremental_at, last_job_id, last_sweep_at,
                                        archived_high_water)
    values (v_job.portal_id, v_job.owner_id, v_job.content_type,
            coalesce(v_max, (v_job.checkpoint ->> 'since')::timestamptz), now(), p_job_id,
            case when v_job.content_type = 'hubdb_rows' and coalesce((v_job.checkpoint ->> 'hubdbSweep')::boolean, true)
                 then v_job.created_at end,
            -- Its archived listing read every archive after since as of the read.
            greatest((v_job.checkpoint ->> 'maxArchived')::timestamptz, (v_job.checkpoint ->> 'since')::timestamptz))
    on conflict (portal_id, content_type) do update
       set high_water = greatest(m.high_water, excluded.high_water), last_incremental_at = excluded.last_incremental_at,
           last_job_id = excluded.last_job_id, last_sweep_at = coalesce(excluded.last_sweep_at, m.last_sweep_at),
           archived_high_water = greatest(m.archived_high_water, excluded.archived_high_water), updated_at = now();
  end if;

  return public.complete_job(p_job_id, p_fencing_token,
    jsonb_build_object('mode', case when v_incremental then 'incremental' else 'full' end,
      'deleted', v_deleted, 'fetched', coalesce((v_job.result ->> 'fetched')::integer, 0),
      'added', coalesce((v_job.result ->> 'added')::integer, 0),
      'updated', coalesce((v_job.result ->> 'updated')::integer, 0))
    || case when v_rows_deleted is not null then jsonb_build_object('hubdbRowsDeleted', v_rows_deleted) else '{}'::jsonb end);
end;
$$;

-- ==== supabase/schemas/0354_function_save_swept_table.sql ====
-- private.save_swept_table(job, table, missing ids): the deletions a sweep of
-- one HubDB table found, for the job row its caller holds FOR UPDATE: the
-- table's stored live rows whose row id is among `missing ids` (those the
-- worker found missing from every row HubSpot lists in it, by
-- stored_hubdb_row_ids: decision 0057) become tombstones (tombstone_items);
-- other ids are skipped, and no other row is written. Adds them to the job's
-- 'deleted'. Called by save_fetched_page_raw (after saving the sweep's changed
-- rows) in an incremental HubDB rows job's sweep phase; owner only.
create function private.save_swept_table(p_job public.jobs, p_table_id text, p_missing_ids text[]) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  v_deleted := private.tombstone_items(p_job, array(select p_table_id || ':' || m.row_id from unnest(p_missing_ids) m(row_id)));
  if v_deleted > 0 then
    update public.jobs j
       set result = coalesce(j.result, '{}'::jsonb)
                    || jsonb_build_object('deleted', coalesce((j.result ->> 'deleted')::integer, 0) + v_deleted)
     where j.id = p_job.id;
  end if;
  return jsonb_build_object('deleted', v_deleted);
end;
$$;

-- ==== supabase/schemas/0355_function_stored_hubdb_rows.sql ====
-- public.stored_hubdb_rows(portal, tables): the portal's live HubDB rows
-- stored, per table: (table_id, live_rows), one row per table that has any;
-- with `tables`, one row per table listed (0 for none). A sweep cycle's rows
-- job starts with them in its checkpoint (incremental_checkpoint: compared
-- with HubSpot's rowCount, a table holding fewer has lost rows: swept; a
-- stored table no longer live is swept too); its sweep pass counts again the
-- tables its changed pass wrote (decision 0056). Walks
-- hubspot_content_hubdb_table_idx table by table (a skip scan: the portal's
-- other rows are never read). The service role only (the worker).
create function public.stored_hubdb_rows(p_portal_id uuid, p_tables text[] default null)
returns table (table_id text, live_rows integer)
language sql
stable
set search_path = ''
as $$
  with recursive t(id) as (
    select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
     where p_tables is null
       and c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
    union all
    select (select min(split_part(c.hubspot_id, ':', 1)) from public.hubspot_content c
             where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
               and split_part(c.hubspot_id, ':', 1) > t.id)
      from t where t.id is not null
  )
  select l.id, (select count(*)::integer from public.hubspot_content c
                 where c.portal_id = p_portal_id and c.content_type = 'hubdb_rows' and c.deleted_at is null
                   and split_part(c.hubspot_id, ':', 1) = l.id)
    from (select t.id from t where t.id is not null
          union all
          select distinct u.id from unnest(p_tables) u(id) where u.id is not null) l
$$;

-- ==== supabase/schemas/0356_function_advance_fetch_job.sql ====
-- private.advance_fetch_job(job, counts, checkpoint, total): a saved page's
-- effect on the job row its caller holds FOR UPDATE: the checkpoint, progress
-- and result counts ({fetched, added, updated, unchanged} of the page, and one
-- more page), the job lease extended once half of it is spent; the run marked started. Called by
-- save_page and by save_fetched_page_raw for a page re-read unparsed; owner only.
create function private.advance_fetch_job(p_job public.jobs, p_counts jsonb, p_checkpoint jsonb, p_progress_total integer)
returns void
language plpgsql
set search_path = ''
as $$
begin
  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + (p_counts ->> 'fetched')::integer,
         progress_total = coalesce(p_progress_total, j.progress_total),
         result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'fetched', coalesce((j.result ->> 'fetched')::integer, 0) + (p_counts ->> 'fetched')::integer,
           'added', coalesce((j.result ->> 'added')::integer, 0) + (p_counts ->> 'added')::integer,
           'updated', coalesce((j.result ->> 'updated')::integer, 0) + (p_counts ->> 'updated')::integer,
           'unchanged', coalesce((j.result ->> 'unchanged')::integer, 0) + (p_counts ->> 'unchanged')::integer,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         -- Extended once half the job lease is spent: a job lease left as it was lets the row be updated in place (HOT, no index entries).
         lease_expires_at = case when j.lease_expires_at < now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds) / 2.0)
                                 then now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds))
                                 else j.lease_expires_at end,
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
end;
$$;

-- ==== supabase/schemas/0357_function_take_hubdb_tables_list.sql ====
-- public.take_hubdb_tables_list(job, fencing_token, read_seconds): for the holder of a
-- fetch job of HubDB tables or rows, what to do for the HubDB tables list of
-- its run (private.hubdb_tables_lists): 'use' the pages another job of the run
-- stored (with read_at), 'wait' wait_ms while another job of the run reads it
-- (its read lease), or 'read' it from HubSpot (the caller now holds the read
-- lease for read_seconds, then stores the pages with store_hubdb_tables_list).
-- A row of another run (an earlier cycle) is never used: it is taken over. No
-- row when fenced off. Locks the portal's list row only. The service role only.
create function public.take_hubdb_tables_list(p_job_id bigint, p_fencing_token bigint, p_read_seconds integer default 20)
returns table (decision text, pages text[], read_at timestamptz, wait_ms integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_list private.hubdb_tables_lists;
begin
  if p_read_seconds is null or p_read_seconds not between 1 and 300 then
    raise exception 'take_hubdb_tables_list: a read lease of 1-300 s is required' using errcode = '22023';
  end if;
  v_job := private.tables_list_holder(p_job_id, p_fencing_token, 'take_hubdb_tables_list');
  if v_job.id is null then
    return;
  end if;

  insert into private.hubdb_tables_lists as l (portal_id, run_id) values (v_job.portal_id, v_job.run_id)
  on conflict (portal_id) do nothing;
  select * into v_list from private.hubdb_tables_lists l where l.portal_id = v_job.portal_id for update;
  if v_list.run_id = v_job.run_id and v_list.pages is not null then
    return query select 'use'::text, v_list.pages, v_list.read_at, null::integer;
    return;
  end if;
  if v_list.run_id = v_job.run_id and v_list.reader_job_id <> p_job_id and v_list.read_lease_expires_at > now() then
    return query select 'wait'::text, null::text[], null::timestamptz,
      greatest(1, ceil(extract(epoch from v_list.read_lease_expires_at - now()) * 1000))::integer;
    return;
  end if;
  -- Nobody of this run reads it (or its reader's read lease ran out), or the row is another run's.
  update private.hubdb_tables_lists l
     set run_id = v_job.run_id, reader_job_id = p_job_id, read_lease_expires_at = now() + make_interval(secs => p_read_seconds),
         pages = null, read_at = null
   where l.portal_id = v_job.portal_id;
  return query select 'read'::text, null::text[], null::timestamptz, null::integer;
end;
$$;

-- ==== supabase/schemas/0358_function_store_hubdb_tables_list.sql ====
-- public.store_hubdb_tables_list(job, fencing_token, pages): the holder of a fetch job
-- of HubDB tables or rows that read its run's HubDB tables list
-- (take_hubdb_tables_list answered 'read') stores the pages for the run's
-- other job, and gives up its read lease. Answers the pages another job of
-- the run stored first (the caller uses those, so both jobs use one list);
-- null otherwise: stored, or not (fenced off, or the row taken over by another
-- run), the caller uses its own. Null pages only give up the read lease (the
-- read failed). Locks the portal's list row only. The service role only.
create function public.store_hubdb_tables_list(p_job_id bigint, p_fencing_token bigint, p_pages text[])
returns text[]
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_list private.hubdb_tables_lists;
begin
  if p_pages is not null and (cardinality(p_pages) = 0 or array_position(p_pages, null) is not null) then
    raise exception 'store_hubdb_tables_list: pages must be at least one page, none null' using errcode = '22023';
  end if;
  v_job := private.tables_list_holder(p_job_id, p_fencing_token, 'store_hubdb_tables_list');
  if v_job.id is null then
    return null;
  end if;

  select * into v_list from private.hubdb_tables_lists l
   where l.portal_id = v_job.portal_id and l.run_id = v_job.run_id
     for update;
  if not found then
    return null;
  end if;
  if v_list.pages is not null then
    return v_list.pages;
  end if;
  if p_pages is null then
    update private.hubdb_tables_lists l set reader_job_id = null, read_lease_expires_at = null
     where l.portal_id = v_job.portal_id and l.reader_job_id = p_job_id;
    return null;
  end if;
  update private.hubdb_tables_lists l set pages = p_pages, read_at = now(), reader_job_id = null, read_lease_expires_at = null
   where l.portal_id = v_job.portal_id;
  return null;
end;
$$;

-- ==== supabase/schemas/0359_function_complete_probe_job.sql ====
-- public.complete_probe_job(job, fencing_token, answers, tables_pages): the holder of
-- a probe job (docs/decisions/0046) reports what HubSpot answered;
-- private.probe_changed_types decides which of its types changed. The changed
-- types get incremental fetch jobs in the probe's run (a type with an active
-- fetch job meanwhile gets none; a sweep cycle's rows job the counts of
-- stored rows the probe made, decision 0056), and private.record_probe keeps
-- the tables list for them and records the others as synced now. Then the
-- probe completes (result: probed, changed) and the run settles: with nothing
-- changed, a quiet cycle of one job. False when fenced off. Locks the run,
-- then the job (and the portal's list row when it stores). The service role only.
create function public.complete_probe_job(p_job_id bigint, p_fencing_token bigint, p_answers jsonb, p_tables_pages text[] default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_types text[];
  v_changed text[];
  v_overlap interval;
  v_sweep_every integer;
  v_sweep boolean;
  v_stored_rows jsonb; -- a sweep cycle's live HubDB rows stored per table, counted once: the decision's and the rows job's
  v_added integer := 0;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'probe'
     for update;
  if not found then
    return false;
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(v_job.checkpoint -> 'types') k;
  v_sweep := coalesce((v_job.checkpoint #>> '{types,hubdb_rows,sweep}')::boolean, false);
  select d.changed_types, d.stored_rows into v_changed, v_stored_rows
    from private.probe_changed_types('complete_probe_job', v_job.portal_id, v_job.checkpoint, p_answers, p_tables_pages) d;

  if v_changed is not null then
    select make_interval(secs => s.overlap_seconds), s.hubdb_sweep_every_minutes into v_overlap, v_sweep_every
      from public.sync_schedules s where s.portal_id = v_job.portal_id;
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, max_attempts, checkpoint)
    select v_job.run_id, v_job.portal_id, v_job.owner_id, 'fetch', t.content_type, k.default_max_attempts,
           private.incremental_checkpoint(m, coalesce(v_overlap, interval '120 seconds'), coalesce(v_sweep_every, 0),
                                          case when t.content_type = 'hubdb_rows' then v_stored_rows end)
      from unnest(v_changed) t(content_type)
      left join public.sync_marks m on m.portal_id = v_job.portal_id and m.content_type = t.content_type
      cross join private.job_kinds k
     where k.kind = 'fetch'
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing;
    get diagnostics v_added = row_count;
    update public.runs r set jobs_total = r.jobs_total + v_added where r.id = v_job.run_id;
  end if;
  perform private.record_probe(v_job.portal_id, v_job.run_id, v_types, v_changed,
                               case when v_sweep then v_job.created_at end, p_tables_pages);

  return public.complete_job(p_job_id, p_fencing_token,
    jsonb_build_object('mode', 'probe', 'probed', to_jsonb(v_types), 'changed', to_jsonb(coalesce(v_changed, '{}')),
                       'fetched', 0, 'added', 0, 'updated', 0, 'deleted', 0));
end;
$$;

-- ==== supabase/schemas/0360_function_csv_cells.sql ====
-- private.csv_cells(lead, data, fields): one exported item as CSV cell texts
-- (strings as they are, other JSON as JSON text, missing as NULL; a formula-like
-- string gets a leading apostrophe). Immutable; called by export_rows; owner
-- only. docs/decisions/0006-exports-in-sql.md.
create function private.csv_cells(p_lead text[], p_data jsonb, p_fields text[])
returns text[]
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v_data jsonb := p_data || '{}'::jsonb;
  v_cells text[] := array_fill(null::text, array[coalesce(cardinality(p_lead), 0) + coalesce(cardinality(p_fields), 0)]);
  v_lead integer := coalesce(cardinality(p_lead), 0);
  v_value jsonb;
  v_text text;
begin
  for i in 1 .. v_lead loop
    v_text := p_lead[i];
    if left(v_text, 1) in ('=', '+', '-', '@', e'\t', e'\r') then
      v_text := '''' || v_text;
    end if;
    v_cells[i] := v_text;
  end loop;
  for i in 1 .. coalesce(cardinality(p_fields), 0) loop
    v_value := v_data -> p_fields[i];
    v_text := v_value #>> '{}';
    if left(v_text, 1) in ('=', '+', '-', '@', e'\t', e'\r') and jsonb_typeof(v_value) = 'string' then
      v_text := '''' || v_text;
    end if;
    v_cells[v_lead + i] := v_text;
  end loop;
  return v_cells;
end;
$$;
comment on function private.csv_cells(text[], jsonb, text[]) is
  'CSV cell texts of one exported item, formula-neutralised; COPY ... (format csv) does the quoting.';

-- ==== supabase/schemas/0361_function_export_fields.sql ====
-- private.export_fields(checkpoint): the exported fields pinned in an export
-- job's checkpoint (`columns`), checked (1-200 names of 1-200 characters).
-- Immutable; called by export_header and export_rows; owner only.
create function private.export_fields(p_checkpoint jsonb)
returns text[]
language plpgsql
immutable
set search_path = ''
as $$
declare
  v_columns jsonb := p_checkpoint -> 'columns';
  v_fields text[];
begin
  if jsonb_typeof(v_columns) is distinct from 'array' or jsonb_array_length(v_columns) not between 1 and 200
     or exists (select 1 from jsonb_array_elements(v_columns) c
                 where jsonb_typeof(c) <> 'string' or char_length(c #>> '{}') not between 1 and 200) then
    raise exception 'the export job''s checkpoint has no valid columns (1 to 200 field names)' using errcode = '22023';
  end if;
  select array_agg(c order by n) into v_fields from jsonb_array_elements_text(v_columns) with ordinality as e(c, n);
  return v_fields;
end;
$$;

-- ==== supabase/schemas/0362_function_export_page.sql ====
-- public.export_page(job, fencing_token, after, limit): the holder's next export page:
-- the id of its last live item and how many it has (up to limit) after `after`;
-- held = false for anyone else; an empty page is the end. Reads only, no locks.
-- For the service role only (the worker).
create function public.export_page(p_job_id bigint, p_fencing_token bigint, p_after_id bigint, p_limit integer)
returns table (held boolean, last_id bigint, row_count integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  if p_job_id is null or p_fencing_token is null or p_after_id is null or p_limit is null then
    raise exception 'job id, fencing token, position and limit are required' using errcode = '22004';
  end if;
  if p_after_id < 0 or p_limit not between 1 and 100000 then
    raise exception 'position must be >= 0 and limit between 1 and 100000' using errcode = '22023';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    return query select false, null::bigint, 0;
    return;
  end if;
  return query
    select true, max(p.id), count(*)::integer
      from (select c.id from public.hubspot_content c
             where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
               and c.deleted_at is null and c.id > p_after_id
             order by c.id
             limit p_limit) p;
end;
$$;

-- ==== supabase/schemas/0363_function_export_header.sql ====
-- public.export_header(job, fencing_token): the header record of the holder's export
-- (hubspot_id, hubspot_updated_at, then the pinned fields); raises 55000 for
-- anyone else. Reads only, no locks. For the service role only (the worker).
create function public.export_header(p_job_id bigint, p_fencing_token bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
begin
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  return next array['hubspot_id', 'hubspot_updated_at'] || private.export_fields(v_job.checkpoint);
end;
$$;

-- ==== supabase/schemas/0364_function_export_rows.sql ====
-- public.export_rows(job, fencing_token, after, through): the CSV cells of the live
-- items with after < id <= through, in id order, for the export's holder only
-- (the worker COPYs them to its sink); raises 55000 for anyone else. Reads
-- only, no locks. For the service role only. docs/decisions/0006-exports-in-sql.md.
create function public.export_rows(p_job_id bigint, p_fencing_token bigint, p_after_id bigint, p_through_id bigint)
returns setof text[]
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_fields text[];
begin
  if p_job_id is null or p_fencing_token is null or p_after_id is null or p_through_id is null then
    raise exception 'job id, fencing token and positions are required' using errcode = '22004';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running'
     and j.kind = 'export' and j.lease_expires_at > now();
  if not found then
    raise exception 'export job % is not held with this fencing token', p_job_id using errcode = '55000';
  end if;
  v_fields := private.export_fields(v_job.checkpoint);
  return query
    select private.csv_cells(
             array[c.hubspot_id, to_char(c.hubspot_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')],
             c.data, v_fields)
      from public.hubspot_content c
     where c.portal_id = v_job.portal_id and c.content_type = v_job.content_type
       and c.deleted_at is null and c.id > p_after_id and c.id <= p_through_id
     order by c.id;
end;
$$;

-- ==== supabase/schemas/0365_function_begin_export.sql ====
-- public.begin_export(job, fencing_token, checkpoint): the holder starts writing an
-- export file: records its first checkpoint and counts the rows it will
-- write now (the count create_run made may predate the fetch it waited for).
-- False when it no longer holds the job. Locks the held job row. The service role only.
create function public.begin_export(p_job_id bigint, p_fencing_token bigint, p_checkpoint jsonb)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_total integer;
begin
  if p_job_id is null or p_fencing_token is null or p_checkpoint is null then
    raise exception 'job id, fencing token and checkpoint are required' using errcode = '22004';
  end if;
  select (select count(*)::integer from public.hubspot_content c
           where c.portal_id = j.portal_id and c.content_type = j.content_type and c.deleted_at is null)
    into v_total
    from public.jobs j
   where j.id = p_job_id and j.kind = 'export';
  if not found then
    return false;
  end if;
  -- The job lease, the fence, the progress and the run's start: the heartbeat's.
  return public.heartbeat_job(p_job_id, p_fencing_token, 0, v_total, p_checkpoint);
end;
$$;
comment on function public.begin_export(bigint, bigint, jsonb) is
  'The holder starts an export file: first checkpoint, and the rows it will write counted now.';

-- ==== supabase/schemas/0370_function_acquire_hubspot_requests.sql ====
-- public.acquire_hubspot_requests(portal, count, max, window_ms, auth_kind,
-- ceiling, daily_reserve_percent): the shared HubSpot budget grants up to
-- `count` requests at once (the concurrent requests of one client: a probe's
-- dozen take one call), as many as the portal's rolling window has room for:
-- (granted, wait_ms), wait_ms 0 when all were granted, else ms until the next
-- grant can come, -1 when the day's quota is down to the reserve (wait for the
-- account's midnight). With an auth kind the allowance is the portal's learned
-- limit (seeded from the auth kind; at most ceiling per 10 s when given) less
-- headroom and what other apps spend this interval; without one, max per
-- window_ms. Grants are counted in their 10-s window (count_hubspot_request).
-- Locks the portal's budget row FOR UPDATE. For the service role only (the
-- worker and the orchestrator).
create function public.acquire_hubspot_requests(
  p_hubspot_portal_id bigint, p_count integer default 1, p_max_requests integer default 190, p_window_ms integer default 10000,
  p_auth_kind text default null, p_ceiling integer default null, p_daily_reserve_percent numeric default 0
) returns table (granted integer, wait_ms integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz;
  v_row private.hubspot_request_budgets;
  v_max integer;
  v_limit integer;
  v_window interval;
  v_tz text;
  v_room integer;
begin
  if p_hubspot_portal_id is null or p_max_requests is null or p_max_requests < 1 or p_window_ms is null or p_window_ms < 1 then
    raise exception 'acquire_hubspot_requests: portal id, a positive max and window are required' using errcode = '22023';
  end if;
  if p_count is null or p_count not between 1 and 1000 then
    raise exception 'acquire_hubspot_requests: count must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_auth_kind is not null and p_auth_kind not in ('private_app', 'oauth') then
    raise exception 'acquire_hubspot_requests: auth kind must be private_app or oauth' using errcode = '22023';
  end if;
  if (p_ceiling is not null and p_ceiling < 1) or p_daily_reserve_percent is null
     or p_daily_reserve_percent < 0 or p_daily_reserve_percent >= 100 then
    raise exception 'acquire_hubspot_requests: a positive ceiling and a daily reserve in [0, 100) are required' using errcode = '22023';
  end if;
  select * into v_row from private.hubspot_request_budgets b
   where b.hubspot_portal_id = p_hubspot_portal_id for update;
  if not found then
    insert into private.hubspot_request_budgets (hubspot_portal_id) values (p_hubspot_portal_id)
    on conflict (hubspot_portal_id) do nothing;
    select * into v_row from private.hubspot_request_budgets b
     where b.hubspot_portal_id = p_hubspot_portal_id for update;
  end if;
  v_now := clock_timestamp();
  if p_auth_kind is null then
    v_max := p_max_requests;
    v_window := make_interval(secs => p_window_ms / 1000.0);
  else
    if v_row.max_per_interval is null then
      v_row.max_per_interval := case p_auth_kind when 'oauth' then 110 else 100 end;
      v_row.interval_ms := 10000;
      v_row.limit_source := 'auth_kind';
      v_row.limit_learned_at := v_now;
    end if;
    v_row.configured_max := p_ceiling;
    v_limit := v_row.max_per_interval;
    if p_ceiling is not null then
      v_limit := least(v_limit, greatest(1, floor(p_ceiling * v_row.interval_ms / 10000.0)::integer));
    end if;
    v_max := greatest(1, v_limit - greatest(2, ceil(v_limit * 0.02)::integer));
    if v_row.other_apps_until > v_now then
      v_max := greatest(1, v_max - v_row.other_apps_requests);
    end if;
    v_window := make_interval(secs => greatest(v_row.interval_ms * 1.015, v_row.interval_ms + 150) / 1000.0);
    v_tz := coalesce(v_row.time_zone, 'UTC');
    if v_row.daily_limit is not null and v_row.daily_remaining is not null
       and (v_row.daily_seen_at at time zone v_tz)::date = (v_now at time zone v_tz)::date then
      -- What the day's quota has left above the reserve caps the grant.
      v_room := v_row.daily_remaining - ceil(v_row.daily_limit * p_daily_reserve_percent / 100.0)::integer;
      if v_room <= 0 then
        update private.hubspot_request_budgets b
           set max_per_interval = v_row.max_per_interval, interval_ms = v_row.interval_ms, limit_source = v_row.limit_source,
               limit_learned_at = v_row.limit_learned_at, configured_max = v_row.configured_max, updated_at = v_now
         where b.hubspot_portal_id = p_hubspot_portal_id;
        return query select 0, -1;
        return;
      end if;
    end if;
  end if;
  v_row.granted_at := array(select t from unnest(v_row.granted_at) t where t > v_now - v_window order by t);
  granted := greatest(0, least(p_count, v_max - cardinality(v_row.granted_at), coalesce(v_room, p_count)));
  if granted > 0 then
    v_row.granted_at := v_row.granted_at || array_fill(v_now, array[granted]);
    v_row.daily_remaining := greatest(0, v_row.daily_remaining - granted);
    perform private.count_hubspot_request(p_hubspot_portal_id, v_now, granted);
  end if;
  update private.hubspot_request_budgets b
     set granted_at = v_row.granted_at, updated_at = v_now,
         max_per_interval = v_row.max_per_interval, interval_ms = v_row.interval_ms, limit_source = v_row.limit_source,
         limit_learned_at = v_row.limit_learned_at, configured_max = v_row.configured_max,
         daily_remaining = v_row.daily_remaining
   where b.hubspot_portal_id = p_hubspot_portal_id;
  if granted = p_count then
    wait_ms := 0;
  elsif v_room is not null and granted >= v_room then
    wait_ms := -1; -- the rest would dip into the reserve
  else
    -- Full: the next grant comes when the oldest request that keeps it full leaves the window.
    wait_ms := greatest(1, ceil(extract(epoch from (v_row.granted_at[cardinality(v_row.granted_at) - v_max + 1] + v_window - v_now)) * 1000)::integer);
  end if;
  return next;
end;
$$;

-- ==== supabase/schemas/0371_function_record_hubspot_request.sql ====
-- public.record_hubspot_request(portal): counts an already-made HubSpot request
-- in the portal's shared budget, even past the limit (connect_portal learns the
-- portal id only from the answer), and in its 10-s window. Upserts the budget
-- row. The service role only (the orchestrator).
create function public.record_hubspot_request(p_hubspot_portal_id bigint) returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 then
    raise exception 'record_hubspot_request: a positive HubSpot portal id is required' using errcode = '22023';
  end if;
  insert into private.hubspot_request_budgets as b (hubspot_portal_id, granted_at, updated_at)
  values (p_hubspot_portal_id, array[clock_timestamp()], clock_timestamp())
  on conflict (hubspot_portal_id) do update
     set granted_at = array(select t from unnest(b.granted_at) t where t > clock_timestamp() - interval '1 minute' order by t)
                      || clock_timestamp(),
         updated_at = clock_timestamp();
  perform private.count_hubspot_request(p_hubspot_portal_id, clock_timestamp());
end;
$$;
comment on function public.record_hubspot_request(bigint) is
  'Records an already-made HubSpot request in the portal''s shared request budget.';

-- ==== supabase/schemas/0372_function_record_hubspot_rate_headers.sql ====
-- public.record_hubspot_rate_headers(portal, max, interval_ms, remaining, daily,
-- daily_remaining, sent_at, answered_at): what one HubSpot answer said of the portal's
-- limits (X-HubSpot-RateLimit-*) becomes its budget's limit; remaining below
-- what our own grants leave (those HubSpot surely counted: from one interval
-- before answered_at to sent_at) means other apps of the account spend the
-- difference, counted until the next answer (for one interval at most). daily null: the
-- app has no daily limit (OAuth). An answer that says nothing new (the same
-- limits, no use by other apps now or counted, the remaining of the day within
-- one interval of requests of the stored one) writes nothing (decision 0061).
-- Otherwise upserts and locks the portal's budget row.
-- For the service role only (the worker and the orchestrator).
create function public.record_hubspot_rate_headers(
  p_hubspot_portal_id bigint, p_max integer, p_interval_ms integer, p_remaining integer,
  p_daily integer, p_daily_remaining integer, p_sent_at timestamptz, p_answered_at timestamptz
) returns void
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_row private.hubspot_request_budgets;
  v_ours integer;
  v_other integer;
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 or p_max is null or p_max < 1 or p_interval_ms is null
     or p_interval_ms < 1 or p_remaining is null or p_remaining < 0 or p_sent_at is null or p_answered_at is null
     or (p_daily is null) <> (p_daily_remaining is null) or p_daily < 1 or p_daily_remaining < 0 then
    raise exception 'record_hubspot_rate_headers: a portal id, positive max and interval, remaining, sent_at and answered_at are required' using errcode = '22023';
  end if;
  -- Read first without a lock: most answers repeat what the row holds, and a row lock is a write.
  select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id;
  if found and v_row.limit_source = 'headers' and v_row.max_per_interval = p_max and v_row.interval_ms = p_interval_ms
     and (v_row.other_apps_until is null or v_row.other_apps_until <= v_now)
     and ((p_daily is null and v_row.daily_limit is null)
          or (v_row.daily_limit = p_daily and abs(v_row.daily_remaining - p_daily_remaining) <= p_max
              and (v_row.daily_seen_at at time zone coalesce(v_row.time_zone, 'UTC'))::date
                  = (v_now at time zone coalesce(v_row.time_zone, 'UTC'))::date))
     and p_max - p_remaining <= (select count(*) from unnest(v_row.granted_at) t
                                  where t > p_answered_at - make_interval(secs => p_interval_ms / 1000.0) and t <= p_sent_at) then
    return;
  end if;
  select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id for update;
  if not found then -- the first answer: the row is made (or another caller's waited for) once
    insert into private.hubspot_request_budgets (hubspot_portal_id) values (p_hubspot_portal_id)
    on conflict (hubspot_portal_id) do nothing;
    select * into v_row from private.hubspot_request_budgets b where b.hubspot_portal_id = p_hubspot_portal_id for update;
  end if;
  select count(*)::integer into v_ours from unnest(v_row.granted_at) t
   where t > p_answered_at - make_interval(secs => p_interval_ms / 1000.0) and t <= p_sent_at;
  v_other := greatest(0, p_max - p_remaining - v_ours);
  -- Never below the truth (only requests HubSpot surely counted are ours): the latest answer wins, for one interval.
  v_row.other_apps_requests := v_other;
  v_row.other_apps_until := case when v_other > 0 then v_now + make_interval(secs => p_interval_ms / 1000.0) end;
  update private.hubspot_request_budgets b
     set max_per_interval = p_max, interval_ms = p_interval_ms, limit_source = 'headers', limit_learned_at = v_now,
         other_apps_requests = v_row.other_apps_requests, other_apps_until = v_row.other_apps_until,
         daily_limit = p_daily, daily_remaining = p_daily_remaining, daily_seen_at = case when p_daily is null then null else v_now end,
         updated_at = v_now
   where b.hubspot_portal_id = p_hubspot_portal_id;
end;
$$;
comment on function public.record_hubspot_rate_headers(bigint, integer, integer, integer, integer, integer, timestamptz, timestamptz) is
  'Learns the portal''s HubSpot limits from one answer''s X-HubSpot-RateLimit-* headers.';

-- ==== supabase/schemas/0373_function_record_hubspot_time_zone.sql ====
-- public.record_hubspot_time_zone(portal, time_zone): the account's time zone
-- (GET /account-info/v3/details), where its daily limit resets at midnight; a
-- name Postgres does not know is stored as null (UTC). Upserts the portal's
-- budget row. For the service role only (the orchestrator and the worker).
create function public.record_hubspot_time_zone(p_hubspot_portal_id bigint, p_time_zone text) returns void
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_tz text;
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 then
    raise exception 'record_hubspot_time_zone: a positive HubSpot portal id is required' using errcode = '22023';
  end if;
  select n.name into v_tz from pg_catalog.pg_timezone_names n where n.name = p_time_zone and char_length(p_time_zone) <= 64;
  insert into private.hubspot_request_budgets as b (hubspot_portal_id, time_zone, time_zone_learned_at)
  values (p_hubspot_portal_id, v_tz, clock_timestamp())
  on conflict (hubspot_portal_id) do update
     set time_zone = excluded.time_zone, time_zone_learned_at = excluded.time_zone_learned_at;
end;
$$;
comment on function public.record_hubspot_time_zone(bigint, text) is
  'Stores the HubSpot account''s time zone, where its daily request limit resets.';

-- ==== supabase/schemas/0374_function_hubspot_daily_reset_at.sql ====
-- public.hubspot_daily_reset_at(portal_id, now): the next midnight after now
-- in the time zone of the portal's HubSpot account (UTC while unknown), when
-- HubSpot's daily limit resets. Reads only. For the service role (the worker).
create function public.hubspot_daily_reset_at(p_portal_id uuid, p_now timestamptz default now()) returns timestamptz
language sql
stable
security definer
set search_path = ''
as $$
  select ((date_trunc('day', p_now at time zone tz.name) + interval '1 day') at time zone tz.name)
    from (select coalesce((select b.time_zone from public.portals p
                             join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
                            where p.id = p_portal_id), 'UTC') as name) tz;
$$;
comment on function public.hubspot_daily_reset_at(uuid, timestamptz) is
  'When HubSpot''s daily limit of the portal''s account resets: the next midnight in the account''s time zone.';

-- ==== supabase/schemas/0375_function_hubspot_portal_limits.sql ====
-- public.hubspot_portal_limits(hubspot_portal_ids): each portal's HubSpot limits
-- as learned (per interval, source, when), the configured ceiling, and what
-- remains of the day (a quota seen on an earlier day counts as reset) with
-- when it resets, and the account's time zone with when it was learned. Reads only. For the service role (the orchestrator's views).
create function public.hubspot_portal_limits(p_hubspot_portal_ids bigint[])
returns table (
  hubspot_portal_id bigint, max_per_interval integer, interval_ms integer, limit_source text, limit_learned_at timestamptz,
  configured_max integer, daily_limit integer, daily_remaining integer, daily_resets_at timestamptz, time_zone text,
  time_zone_learned_at timestamptz
)
language sql
stable
security definer
set search_path = ''
as $$
  select b.hubspot_portal_id, b.max_per_interval, b.interval_ms, b.limit_source, b.limit_learned_at, b.configured_max,
         b.daily_limit,
         case when b.daily_limit is null then null
              when (b.daily_seen_at at time zone tz.name)::date = (now() at time zone tz.name)::date then b.daily_remaining
              else b.daily_limit end,
         case when b.daily_limit is null then null
              else (date_trunc('day', now() at time zone tz.name) + interval '1 day') at time zone tz.name end,
         b.time_zone, b.time_zone_learned_at
    from private.hubspot_request_budgets b
   cross join lateral (select coalesce(b.time_zone, 'UTC') as name) tz
   where b.hubspot_portal_id = any (p_hubspot_portal_ids);
$$;
comment on function public.hubspot_portal_limits(bigint[]) is
  'The portals'' learned HubSpot limits and what remains of their day.';

-- ==== supabase/schemas/0380_function_refuse_plaintext_token.sql ====
-- Trigger portal_credentials_no_plaintext: refuses any new plaintext token in
-- private.portal_credentials.access_token, whoever writes it (a row may keep or
-- clear the one it has). No locks; the trigger function is for the owner only.
-- docs/decisions/0007-credentials-and-oauth.md.
create function private.refuse_plaintext_token() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.access_token is not null and (tg_op = 'INSERT' or new.access_token is distinct from old.access_token) then
    raise exception 'private.portal_credentials: HubSpot tokens are stored sealed only (connect_portal_with_tokens); a plaintext access_token is refused'
      using errcode = '23514';
  end if;
  return new;
end;
$$;
create trigger portal_credentials_no_plaintext
  before insert or update of access_token on private.portal_credentials
  for each row execute function private.refuse_plaintext_token();

-- ==== supabase/schemas/0381_function_refresh_margin_seconds.sql ====
-- private.refresh_margin_seconds(lifetime, margin): how long before expiry an
-- access token is refreshed: the margin (default 300 s), at most a quarter of
-- its lifetime. Immutable; called by connect_portal_with_tokens and
-- complete_token_refresh; owner only.
create function private.refresh_margin_seconds(p_lifetime_seconds integer, p_margin_seconds integer) returns double precision
language plpgsql immutable
set search_path = ''
as $$
begin
  return least(greatest(coalesce(p_margin_seconds, 300), 0), p_lifetime_seconds / 4.0);
end;
$$;

-- ==== supabase/schemas/0382_function_connect_portal_with_tokens.sql ====
-- public.connect_portal_with_tokens(...): connects or reconnects a portal with
-- sealed credentials (a private-app token, or an OAuth grant with its lifetime),
-- clears the disconnected state and any refresh lease, bumps the token version;
-- returns the portal id. A null name keeps a reconnected portal's name (a new
-- portal is named "HubSpot portal <hub id>"). Locks the portal, then its credentials (upserts).
-- For the service role only (the orchestrator).
create function public.connect_portal_with_tokens(
  p_owner_id uuid, p_hubspot_portal_id bigint, p_name text, p_auth_kind text, p_key_id text,
  p_access_token_enc text, p_refresh_token_enc text, p_expires_in_seconds integer, p_refresh_margin_seconds integer,
  p_access_token_hash text, p_scopes text[]
) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal_id uuid;
  v_expires timestamptz;
  v_refresh_after timestamptz;
begin
  if p_owner_id is null or p_hubspot_portal_id is null or p_auth_kind is null
     or p_key_id is null or p_access_token_enc is null then
    raise exception 'connect_portal_with_tokens: owner, HubSpot portal id, kind, key id and sealed token are required'
      using errcode = '22004';
  end if;
  if p_auth_kind not in ('private_app', 'oauth') then
    raise exception 'connect_portal_with_tokens: kind must be private_app or oauth' using errcode = '22023';
  end if;
  if p_auth_kind = 'oauth' then
    if p_refresh_token_enc is null or p_expires_in_seconds is null or p_expires_in_seconds < 1 then
      raise exception 'connect_portal_with_tokens: an OAuth grant needs a sealed refresh token and a positive lifetime'
        using errcode = '22023';
    end if;
    v_expires := clock_timestamp() + make_interval(secs => p_expires_in_seconds);
    v_refresh_after := v_expires - make_interval(secs => private.refresh_margin_seconds(p_expires_in_seconds, p_refresh_margin_seconds));
  elsif p_refresh_token_enc is not null or p_expires_in_seconds is not null then
    raise exception 'connect_portal_with_tokens: a private-app token has no refresh token or lifetime' using errcode = '22023';
  end if;
  insert into public.portals as p (owner_id, hubspot_portal_id, name, auth_kind)
  values (p_owner_id, p_hubspot_portal_id, coalesce(p_name, 'HubSpot portal ' || p_hubspot_portal_id), p_auth_kind)
  on conflict (owner_id, hubspot_portal_id) do update
     set name = coalesce(p_name, p.name), auth_kind = excluded.auth_kind, disconnected_at = null, disconnected_reason = null
  returning p.id into v_portal_id;
  insert into private.portal_credentials as c (
    portal_id, access_token, auth_kind, key_id, access_token_enc, refresh_token_enc, access_token_hash,
    access_expires_at, refresh_after, scopes)
  values (v_portal_id, null, p_auth_kind, p_key_id, p_access_token_enc, p_refresh_token_enc, p_access_token_hash,
          v_expires, v_refresh_after, p_scopes)
  on conflict (portal_id) do update
     set access_token = null, auth_kind = excluded.auth_kind, key_id = excluded.key_id,
         access_token_enc = excluded.access_token_enc, refresh_token_enc = excluded.refresh_token_enc,
         access_token_hash = excluded.access_token_hash, access_expires_at = excluded.access_expires_at,
         refresh_after = excluded.refresh_after, scopes = excluded.scopes,
         token_version = c.token_version + 1, refresh_holder = null, refresh_lease_expires_at = null,
         refresh_started_at = null, rotation_attempted_at = null, updated_at = now();
  return v_portal_id;
end;
$$;

-- ==== supabase/schemas/0383_function_access_removed_message.sql ====
-- private.access_removed_message(reason): the one source of the message jobs of
-- a disconnected portal end with. Immutable; called by disconnect_portal and
-- claim_portal_token; owner only.
create function private.access_removed_message(p_reason text) returns text
language sql
immutable
set search_path = ''
as $$
  select format('HubSpot access was removed: reconnect the portal (%s).', p_reason)
$$;

-- ==== supabase/schemas/0384_function_claim_portal_token.sql ====
-- public.claim_portal_token(portal, holder, used_version, ...): what a caller
-- needs for HubSpot requests and what to do: 'use' the token, 'refresh' (the
-- caller now holds the refresh lease), 'wait' wait_ms, or 'disconnected'; no
-- row for an unknown portal. Times in ms from now. Locks the credentials row
-- FOR UPDATE, then reads the portal, unless the token is used as it is. The service role only. docs/decisions/0007.
create function public.claim_portal_token(
  p_portal_id uuid, p_holder text, p_used_version bigint default null,
  p_lease_seconds integer default 30, p_min_valid_seconds integer default 5
) returns table (
  decision text, hubspot_portal_id bigint, owner_id uuid, auth_kind text, access_token_enc text, access_token_legacy text,
  refresh_token_enc text, token_version bigint, refresh_in_ms bigint, expires_in_ms bigint,
  disconnected_reason text, disconnected_message text, wait_ms integer
)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_now timestamptz := clock_timestamp();
  v_portal public.portals;
  v_cred private.portal_credentials;
  v_decision text;
  v_wait integer;
begin
  if p_holder is null or char_length(p_holder) not between 1 and 200 then
    raise exception 'claim_portal_token: a holder of 1-200 characters is required' using errcode = '22023';
  end if;
  if p_lease_seconds is null or p_lease_seconds not between 1 and 600 or p_min_valid_seconds is null or p_min_valid_seconds < 0 then
    raise exception 'claim_portal_token: a refresh lease of 1-600 s and a non-negative minimum validity are required' using errcode = '22023';
  end if;
  -- A token to use as it is (a private app's, an OAuth one not due for refresh) is read without a lock:
  -- the common call writes nothing.
  select * into v_cred from private.portal_credentials c where c.portal_id = p_portal_id;
  if not found then
    return;
  end if;
  if p_used_version is not null or (v_cred.auth_kind = 'oauth' and not coalesce(v_now < v_cred.refresh_after, false)) then
    -- The credentials row's lock first, then the portal read in a statement after it: a
    -- disconnect_portal that committed while this call waited for the lock is seen.
    select * into v_cred from private.portal_credentials c where c.portal_id = p_portal_id for update;
  end if;
  select * into v_portal from public.portals p where p.id = p_portal_id;

  if v_portal.disconnected_at is not null then
    v_decision := 'disconnected';
  elsif p_used_version is not null and p_used_version < v_cred.token_version then
    v_decision := 'use'; -- a newer token than the one HubSpot refused
  elsif v_cred.auth_kind <> 'oauth' then
    v_decision := 'use'; -- nothing to refresh: a refused private-app token is the caller's error to report
  elsif p_used_version is null and v_now < v_cred.refresh_after then
    v_decision := 'use';
  elsif v_cred.refresh_holder is null or v_cred.refresh_holder = p_holder or v_cred.refresh_lease_expires_at <= v_now then
    update private.portal_credentials c
       set refresh_holder = p_holder, refresh_lease_expires_at = v_now + make_interval(secs => p_lease_seconds),
           refresh_started_at = v_now
     where c.portal_id = p_portal_id;
    v_decision := 'refresh';
  elsif p_used_version is null and v_cred.access_expires_at > v_now + make_interval(secs => p_min_valid_seconds) then
    v_decision := 'use'; -- being refreshed by another caller, still valid meanwhile
  else
    v_decision := 'wait';
    v_wait := greatest(20, least(250, ceil(extract(epoch from (v_cred.refresh_lease_expires_at - v_now)) * 1000)::integer));
  end if;

  return query select v_decision, v_portal.hubspot_portal_id, v_portal.owner_id, v_cred.auth_kind,
    case when v_decision = 'use' then v_cred.access_token_enc end,
    case when v_decision = 'use' and v_cred.access_token_enc is null then v_cred.access_token end,
    case when v_decision = 'refresh' then v_cred.refresh_token_enc end,
    v_cred.token_version,
    case when v_cred.refresh_after is not null then floor(extract(epoch from (v_cred.refresh_after - v_now)) * 1000)::bigint end,
    case when v_cred.access_expires_at is not null then floor(extract(epoch from (v_cred.access_expires_at - v_now)) * 1000)::bigint end,
    v_portal.disconnected_reason,
    case when v_portal.disconnected_at is not null then private.access_removed_message(v_portal.disconnected_reason) end,
    v_wait;
end;
$$;

-- ==== supabase/schemas/0385_function_complete_token_refresh.sql ====
-- public.complete_token_refresh(...): the refresh lease holder stores its new
-- sealed tokens (lifetime counted from when the refresh lease was taken) and releases
-- the refresh lease; returns the new token version, null when it no longer held the
-- refresh lease. Locks the credentials row. For the service role only.
create function public.complete_token_refresh(
  p_portal_id uuid, p_holder text, p_key_id text, p_access_token_enc text, p_refresh_token_enc text,
  p_expires_in_seconds integer, p_refresh_margin_seconds integer, p_access_token_hash text
) returns bigint
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_version bigint;
begin
  if p_holder is null or p_key_id is null or p_access_token_enc is null or p_refresh_token_enc is null
     or p_expires_in_seconds is null or p_expires_in_seconds < 1 then
    raise exception 'complete_token_refresh: holder, key id, sealed tokens and a positive lifetime are required' using errcode = '22023';
  end if;
  update private.portal_credentials c
     set access_token = null, key_id = p_key_id, access_token_enc = p_access_token_enc,
         refresh_token_enc = p_refresh_token_enc,
         access_token_hash = p_access_token_hash,
         access_expires_at = c.refresh_started_at + make_interval(secs => p_expires_in_seconds),
         refresh_after = c.refresh_started_at + make_interval(secs => p_expires_in_seconds)
                         - make_interval(secs => private.refresh_margin_seconds(p_expires_in_seconds, p_refresh_margin_seconds)),
         token_version = c.token_version + 1,
         refresh_holder = null, refresh_lease_expires_at = null, updated_at = now()
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder and c.auth_kind = 'oauth'
  returning c.token_version into v_version;
  return v_version;
end;
$$;

-- ==== supabase/schemas/0386_function_abandon_token_refresh.sql ====
-- public.abandon_token_refresh(portal, holder): the holder gives its refresh
-- lease back without a new token; false when not held. Locks the credentials
-- row. For the service role only.
create function public.abandon_token_refresh(p_portal_id uuid, p_holder text) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  update private.portal_credentials c
     set refresh_holder = null, refresh_lease_expires_at = null
   where c.portal_id = p_portal_id and c.refresh_holder = p_holder;
  return found;
end;
$$;

-- ==== supabase/schemas/0387_function_disconnect_portal.sql ====
-- public.disconnect_portal(portal, reason, holder): HubSpot access was removed:
-- the portal is marked disconnected, its pending and running fetch jobs (and probes) fail
-- for good and their runs settle; with a holder, only while it still holds the
-- refresh lease (else null). Idempotent; returns the jobs failed. Locks: portal
-- FOR NO KEY UPDATE, credentials, runs (id order), jobs. The service role only.
create function public.disconnect_portal(p_portal_id uuid, p_reason text, p_holder text default null) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_message text;
  v_runs uuid[];
  v_run uuid;
  v_failed integer;
  v_holder text;
begin
  if p_portal_id is null or p_reason is null or char_length(p_reason) not between 1 and 400 then
    raise exception 'disconnect_portal: a portal and a reason of 1-400 characters are required' using errcode = '22023';
  end if;
  -- Lock order as connect_portal_with_tokens: the portal, then its credentials. The
  -- portal's lock is the one its UPDATE below takes anyway (FOR NO KEY UPDATE, which
  -- does not block the key-share locks of rows that reference the portal).
  perform 1 from public.portals p where p.id = p_portal_id for no key update;
  if not found then
    return 0;
  end if;
  select c.refresh_holder into v_holder from private.portal_credentials c where c.portal_id = p_portal_id for update;
  if p_holder is not null and v_holder is distinct from p_holder then
    return null; -- reconnected or taken over since this holder read its refresh token
  end if;
  update public.portals p
     set disconnected_at = coalesce(p.disconnected_at, now()),
         disconnected_reason = coalesce(p.disconnected_reason, p_reason)
   where p.id = p_portal_id
  returning private.access_removed_message(p.disconnected_reason) into v_message;
  update private.portal_credentials c set refresh_holder = null, refresh_lease_expires_at = null where c.portal_id = p_portal_id;
  -- Lock order: runs before their jobs.
  select coalesce(array_agg(r.id order by r.id), '{}') into v_runs
    from (select r.id from public.runs r
           where r.portal_id = p_portal_id and r.finished_at is null
             and exists (select 1 from public.jobs j
                          where j.run_id = r.id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running'))
           order by r.id
             for update) r;
  update public.jobs j
     set status = 'failed', finished_at = now(), lease_expires_at = null, updated_at = now(),
         waiting_reason = null, last_error = v_message
   where j.run_id = any (v_runs) and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running');
  get diagnostics v_failed = row_count;
  foreach v_run in array v_runs loop
    perform private.settle_run(v_run);
  end loop;
  return v_failed;
end;
$$;

-- ==== supabase/schemas/0388_function_hubspot_portal_for_token_hash.sql ====
-- public.hubspot_portal_for_token_hash(owner, hashes): the HubSpot portal id of
-- the owner's portal whose stored token has one of these lookup hashes, or
-- null. Reads only, no locks. For the service role only (the orchestrator).
create function public.hubspot_portal_for_token_hash(p_owner_id uuid, p_hashes text[]) returns bigint
language sql
stable
security definer
set search_path = ''
as $$
  select p.hubspot_portal_id
    from private.portal_credentials c
    join public.portals p on p.id = c.portal_id
   where p.owner_id = p_owner_id and c.access_token_hash = any (p_hashes)
   limit 1
$$;

-- ==== supabase/schemas/0389_function_credentials_to_rotate.sql ====
-- public.credentials_to_rotate(key, limit, retry_after): credentials the
-- rotation step must seal again (another key, plaintext, or the "v1." format);
-- a row that could not be opened comes back only after retry_after seconds.
-- Reads only, no locks. For the service role only (the worker).
create function public.credentials_to_rotate(p_current_key_id text, p_limit integer default 20, p_retry_after_seconds integer default 3600)
returns table (
  portal_id uuid, hubspot_portal_id bigint, owner_id uuid, auth_kind text, key_id text, access_token_enc text,
  refresh_token_enc text, access_token_legacy text, token_version bigint
)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_current_key_id is null or p_limit is null or p_limit not between 1 and 500
     or p_retry_after_seconds is null or p_retry_after_seconds < 0 then
    raise exception 'credentials_to_rotate: a current key id, a limit of 1-500 and a non-negative retry delay are required'
      using errcode = '22023';
  end if;
  return query
  select c.portal_id, p.hubspot_portal_id, p.owner_id, c.auth_kind, c.key_id, c.access_token_enc, c.refresh_token_enc,
         c.access_token, c.token_version
    from private.portal_credentials c
    join public.portals p on p.id = c.portal_id
   where (c.key_id is distinct from p_current_key_id or c.access_token is not null
          or c.access_token_enc like 'v1.%' or c.refresh_token_enc like 'v1.%')
     and (c.rotation_attempted_at is null or c.rotation_attempted_at <= now() - make_interval(secs => p_retry_after_seconds))
   order by c.rotation_attempted_at nulls first, c.portal_id
   limit p_limit;
end;
$$;

-- ==== supabase/schemas/0390_function_rotate_credentials.sql ====
-- public.rotate_credentials(rows): stores one batch of re-sealed credentials; a
-- row changes only if it still has the version and key it was read with (a
-- refresh in between wins). Returns how many were re-sealed. Locks the rows it
-- updates. For the service role only (the worker).
create function public.rotate_credentials(p_rows jsonb) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_count integer;
begin
  if p_rows is null or jsonb_typeof(p_rows) <> 'array' or jsonb_array_length(p_rows) > 500 then
    raise exception 'rotate_credentials: a JSON array of at most 500 rows is required' using errcode = '22023';
  end if;
  update private.portal_credentials c
     set rotation_attempted_at = now()
    from jsonb_to_recordset(p_rows) as r(portal_id uuid, failed boolean)
   where c.portal_id = r.portal_id and coalesce(r.failed, false);
  update private.portal_credentials c
     set access_token = null, key_id = r.key_id, access_token_enc = r.access_token_enc,
         refresh_token_enc = r.refresh_token_enc, access_token_hash = r.access_token_hash,
         rotation_attempted_at = null, updated_at = now()
    from jsonb_to_recordset(p_rows) as r(portal_id uuid, token_version bigint, from_key_id text, key_id text,
                                          access_token_enc text, refresh_token_enc text, access_token_hash text, failed boolean)
   where not coalesce(r.failed, false) and c.portal_id = r.portal_id and c.token_version = r.token_version
     and c.key_id is not distinct from r.from_key_id and r.key_id is not null and r.access_token_enc is not null;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

-- ==== supabase/schemas/0400_function_begin_worker_invocation.sql ====
-- public.begin_worker_invocation(id, source, lease seconds): takes an invocation
-- lease for that long when fewer than the cap are held (expired ones freed
-- first); false at the cap. Concurrent callers serialise on the settings row
-- (FOR UPDATE). For the service role only (the worker).
create function public.begin_worker_invocation(p_invocation_id uuid, p_source text, p_lease_seconds integer)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.worker_settings;
  v_active integer;
begin
  if p_invocation_id is null or p_source is null or char_length(p_source) not between 1 and 40
     or p_lease_seconds is null or p_lease_seconds not between 1 and 3600 then
    raise exception 'begin_worker_invocation: an invocation id, a source (1-40 characters) and an invocation lease of 1-3600 s are required'
      using errcode = '22023';
  end if;
  select * into v_settings from private.worker_settings where id for update;
  delete from private.worker_invocations i where i.lease_expires_at <= now();
  select count(*) into v_active from private.worker_invocations;
  if v_active >= v_settings.max_concurrent_invocations then
    return false;
  end if;
  insert into private.worker_invocations (id, lease_expires_at, source)
  values (p_invocation_id, now() + make_interval(secs => p_lease_seconds), p_source)
  on conflict (id) do nothing;
  return true;
end;
$$;

-- ==== supabase/schemas/0402_function_finish_worker_invocation.sql ====
-- public.finish_worker_invocation(id, summary): gives the invocation lease back,
-- says whether a claim would find work now, and logs its summary {stopReason, shutdownReason?,
-- claimed, completed, released, failed, cpuMs?} (the log keeps the last hour,
-- at most 500 rows), and counts it in its minute (worker_invocation_minutes,
-- 24 hours kept). Deletes the invocation lease row. stopReason must be one of
-- the stop reasons (the log's CHECK, 0210), else 22023 and nothing is changed.
-- For the service role only.
create function public.finish_worker_invocation(p_invocation_id uuid, p_summary jsonb)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_lease private.worker_invocations;
  v_constraint text;
begin
  if p_invocation_id is null or p_summary is null or jsonb_typeof(p_summary) <> 'object'
     or coalesce(jsonb_typeof(p_summary -> 'stopReason'), '') <> 'string' then
    raise exception 'finish_worker_invocation: an invocation id and a summary object with a stopReason string are required'
      using errcode = '22023';
  end if;
  delete from private.worker_invocations i where i.id = p_invocation_id returning * into v_lease;
  insert into private.worker_invocation_log
    (id, source, started_at, stop_reason, shutdown_reason, claimed, completed, released, failed, cpu_ms)
  values (p_invocation_id, coalesce(v_lease.source, 'unknown'), coalesce(v_lease.started_at, now()),
          p_summary ->> 'stopReason', left(p_summary ->> 'shutdownReason', 40),
          coalesce((p_summary ->> 'claimed')::integer, 0), coalesce((p_summary ->> 'completed')::integer, 0),
          coalesce((p_summary ->> 'released')::integer, 0), coalesce((p_summary ->> 'failed')::integer, 0),
          (p_summary ->> 'cpuMs')::integer)
  on conflict (id) do nothing;
  if found then
    insert into private.worker_invocation_minutes as m (minute, source, stop_reason, invocations, claimed, completed, released, failed)
    select date_trunc('minute', l.ended_at), l.source, l.stop_reason, 1, l.claimed, l.completed, l.released, l.failed
      from private.worker_invocation_log l where l.id = p_invocation_id
    on conflict (minute, source, stop_reason) do update
       set invocations = m.invocations + 1, claimed = m.claimed + excluded.claimed, completed = m.completed + excluded.completed,
           released = m.released + excluded.released, failed = m.failed + excluded.failed;
    delete from private.worker_invocation_minutes m where m.minute < now() - interval '24 hours';
  end if;
  delete from private.worker_invocation_log l
   where l.ended_at < now() - interval '1 hour'
      or l.id in (select x.id from private.worker_invocation_log x order by x.ended_at desc offset 500);
  return public.claimable_jobs_exist(null);
exception
  when invalid_text_representation or numeric_value_out_of_range then
    raise exception 'finish_worker_invocation: summary counts must be integers' using errcode = '22023';
  when check_violation then
    get stacked diagnostics v_constraint = constraint_name;
    if v_constraint = 'stop_reason_is_known' then
      raise exception 'finish_worker_invocation: "%" is not a stop reason', left(p_summary ->> 'stopReason', 40) using errcode = '22023';
    end if;
    raise exception 'finish_worker_invocation: summary counts must not be negative' using errcode = '22023';
end;
$$;

-- ==== supabase/schemas/0403_function_worker_invocation_leases.sql ====
-- public.worker_invocation_leases(): how many invocation leases are held now, and
-- the cap. Reads only, no locks. For the service role only (worker, operators).
create function public.worker_invocation_leases()
returns table (active integer, cap integer)
language sql
stable
security definer
set search_path = ''
as $$
  select (select count(*)::integer from private.worker_invocations i where i.lease_expires_at > now()),
         (select s.max_concurrent_invocations from private.worker_settings s where s.id)
$$;

-- ==== supabase/schemas/0410_function_queue_stats.sql ====
-- public.queue_stats(): what an operator needs to see, in constant time
-- whatever the history (active jobs and the last hour only): jobs by kind and
-- status, oldest pending age, running jobs' job lease time left, per portal, HubSpot budget
-- use per portal (with its limits and what remains of its day), recent failures
-- and invocations, the last hour per minute (jobs finished, invocations), and
-- the worker invocations of the last 60 minutes (this minute and the 59 before
-- it) counted from private.worker_invocation_minutes, every one of them, by
-- source and stop reason.
-- Reads only. The service role only.
create function public.queue_stats() returns jsonb
language sql
stable
security definer
set search_path = ''
as $$
  select jsonb_build_object(
    'by_kind_and_status', coalesce((
      select jsonb_agg(jsonb_build_object('kind', s.kind, 'status', s.status, 'jobs', s.n) order by s.kind, s.status)
        from (select x.kind, x.status, count(*) as n
                from (select j.kind, j.status from public.jobs j where j.status in ('pending', 'running')
                      union all
                      select j.kind, j.status from public.jobs j
                       where j.finished_at > now() - interval '1 hour') x
               group by x.kind, x.status) s), '[]'::jsonb),
    'oldest_pending_age_seconds', (
      select extract(epoch from now() - min(j.run_after))::integer
        from public.jobs j where j.status = 'pending' and j.run_after <= now()),
    'running', coalesce((
      select jsonb_agg(jsonb_build_object('job_id', j.id::text, 'kind', j.kind, 'content_type', j.content_type,
                                          'worker_id', j.worker_id,
                                          'lease_seconds_left', round(extract(epoch from j.lease_expires_at - now()))::integer)
                       order by j.lease_expires_at)
        from public.jobs j where j.status = 'running'), '[]'::jsonb),
    'running_per_portal', coalesce((
      select jsonb_agg(jsonb_build_object('portal_id', r.portal_id, 'name', p.name, 'running', r.n) order by r.n desc, r.portal_id)
        from (select j.portal_id, count(*) as n from public.jobs j where j.status = 'running' group by j.portal_id) r
        join public.portals p on p.id = r.portal_id), '[]'::jsonb),
    'hubspot_budget_last_10s', coalesce((
      select jsonb_agg(jsonb_build_object('hubspot_portal_id', b.hubspot_portal_id::text,
                                          'name', (select min(p.name) from public.portals p where p.hubspot_portal_id = b.hubspot_portal_id),
                                          'requests', (select count(*) from unnest(b.granted_at) t where t > now() - interval '10 seconds'),
                                          'max_per_interval', l.max_per_interval, 'interval_ms', l.interval_ms,
                                          'daily_limit', l.daily_limit, 'daily_remaining', l.daily_remaining,
                                          'daily_resets_at', l.daily_resets_at)
                       order by b.hubspot_portal_id)
        from private.hubspot_request_budgets b
        cross join lateral public.hubspot_portal_limits(array[b.hubspot_portal_id]) l
       where b.updated_at > now() - interval '10 seconds'), '[]'::jsonb),
    'failed_last_hour', (
      select count(*) from public.jobs j where j.finished_at > now() - interval '1 hour' and j.status = 'failed'),
    'recent_failures', coalesce((
      select jsonb_agg(jsonb_build_object('job_id', f.id::text, 'kind', f.kind, 'content_type', f.content_type,
                                          'finished_at', f.finished_at, 'last_error', f.last_error) order by f.finished_at desc)
        from (select j.id, j.kind, j.content_type, j.finished_at, j.last_error from public.jobs j
               where j.finished_at > now() - interval '1 hour' and j.status = 'failed'
               order by j.finished_at desc limit 10) f), '[]'::jsonb),
    'recent_invocations', coalesce((
      select jsonb_agg(jsonb_build_object('source', l.source, 'started_at', l.started_at, 'ended_at', l.ended_at,
                                          'stop_reason', l.stop_reason, 'shutdown_reason', l.shutdown_reason,
                                          'claimed', l.claimed, 'completed', l.completed, 'released', l.released,
                                          'failed', l.failed, 'cpu_ms', l.cpu_ms) order by l.ended_at desc)
        from (select * from private.worker_invocation_log x order by x.ended_at desc limit 20) l), '[]'::jsonb),
    'unfinished_runs', (select count(*) from public.runs r where r.finished_at is null),
    'last_hour', (
      select jsonb_agg(jsonb_build_object('minute', m.minute, 'completed', coalesce(j.completed, 0), 'failed', coalesce(j.failed, 0),
                                          'invocations', coalesce(i.n, 0), 'claimed', coalesce(i.claimed, 0)) order by m.minute)
        from generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()), interval '1 minute') m (minute)
        left join (select date_trunc('minute', x.finished_at) as minute, count(*) filter (where x.status = 'completed') as completed,
                          count(*) filter (where x.status = 'failed') as failed
                     from public.jobs x where x.finished_at > date_trunc('minute', now()) - interval '59 minutes'
                    group by 1) j on j.minute = m.minute
        left join (select c.minute, sum(c.invocations) as n, sum(c.claimed) as claimed
                     from private.worker_invocation_minutes c where c.minute >= date_trunc('minute', now()) - interval '59 minutes'
                    group by 1) i on i.minute = m.minute),
    'invocations_last_hour', (
      select jsonb_build_object(
               'since', date_trunc('minute', now()) - interval '59 minutes', 'minutes', 60,
               'invocations', coalesce(sum(c.invocations), 0), 'claimed', coalesce(sum(c.claimed), 0),
               'completed', coalesce(sum(c.completed), 0), 'failed', coalesce(sum(c.failed), 0),
               'by_source', coalesce((
                 select jsonb_agg(jsonb_build_object('source', b.source, 'stop_reason', b.stop_reason, 'invocations', b.n, 'claimed', b.claimed)
                                  order by b.n desc, b.source, b.stop_reason)
                   from (select x.source, x.stop_reason, sum(x.invocations) as n, sum(x.claimed) as claimed
                           from private.worker_invocation_minutes x
                          where x.minute >= date_trunc('minute', now()) - interval '59 minutes'
                          group by x.source, x.stop_reason) b), '[]'::jsonb))
        from private.worker_invocation_minutes c
       where c.minute >= date_trunc('minute', now()) - interval '59 minutes')
  )
$$;
comment on function public.queue_stats() is
  'Active jobs (and those finished in the last hour) by kind and status, oldest pending age, running jobs with their job lease time left and per portal, HubSpot budget use, recent failures and worker invocations, unfinished runs, the last hour per minute, the last 60 minutes'' worker invocations by source and stop reason. Constant time in the history.';

-- ==== supabase/schemas/0411_function_delete_finished_jobs.sql ====
-- public.delete_finished_jobs(older_than, batch): deletes up to batch jobs that
-- finished before now() - older_than in finished runs; returns how many (call
-- until 0). Job rows FOR UPDATE SKIP LOCKED. For the service role only
-- (prune_queue_history is what cron calls).
create function public.delete_finished_jobs(p_older_than interval, p_batch_size integer default 1000) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_deleted integer;
begin
  if p_older_than is null or p_older_than < interval '0' or p_batch_size is null or p_batch_size not between 1 and 100000 then
    raise exception 'delete_finished_jobs: a non-negative age and a batch size of 1-100000 are required' using errcode = '22023';
  end if;
  delete from public.jobs j
   where j.id in (
     select j2.id from public.jobs j2
       join public.runs r on r.id = j2.run_id
      where j2.finished_at < now() - p_older_than and r.finished_at is not null
      order by j2.finished_at
      limit p_batch_size
        for update of j2 skip locked);
  get diagnostics v_deleted = row_count;
  return v_deleted;
end;
$$;

-- ==== supabase/schemas/0412_function_prune_queue_history.sql ====
-- public.prune_queue_history(older_than, batch): retention: deletes one bounded
-- batch of finished jobs (delete_finished_jobs), then of finished runs without
-- jobs and their notifications, quiet-cycle roll-ups of days before the
-- cutoff, and HubSpot request windows older than 24 hours (the requests
-- chart's range); returns the counts (call until 0). Rows FOR UPDATE SKIP LOCKED.
-- pg_cron calls it (0910); the service role only.
create function public.prune_queue_history(p_older_than interval default null, p_batch_size integer default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.retention_settings;
  v_cutoff timestamptz;
  v_batch integer;
  v_jobs integer;
  v_runs integer;
  v_notifications integer;
  v_quiet integer;
  v_windows integer;
begin
  select * into v_settings from private.retention_settings s where s.id;
  v_batch := coalesce(p_batch_size, v_settings.batch_size, 5000);
  if coalesce(p_older_than, v_settings.keep_finished) < interval '0' or v_batch not between 1 and 100000 then
    raise exception 'prune_queue_history: a non-negative age and a batch size of 1-100000 are required' using errcode = '22023';
  end if;
  v_cutoff := now() - coalesce(p_older_than, v_settings.keep_finished, interval '30 days');

  v_jobs := public.delete_finished_jobs(now() - v_cutoff, v_batch);

  with doomed as (
    select r.id from public.runs r
     where r.finished_at < v_cutoff
       and not exists (select 1 from public.jobs j where j.run_id = r.id)
     order by r.finished_at
     limit v_batch
       for update skip locked
  ), notes as (
    delete from public.notifications n using doomed d where n.run_id = d.id returning 1
  ), gone as (
    delete from public.runs r using doomed d where r.id = d.id returning 1
  )
  select (select count(*) from gone), (select count(*) from notes) into v_runs, v_notifications;

  with doomed as (
    select q.portal_id, q.day from public.quiet_cycles q
     where q.day < (v_cutoff at time zone 'UTC')::date
     order by q.day
     limit v_batch
       for update skip locked
  ), gone as (
    delete from public.quiet_cycles q using doomed d where q.portal_id = d.portal_id and q.day = d.day returning 1
  )
  select count(*) into v_quiet from gone;

  with doomed as (
    select w.hubspot_portal_id, w.window_start from private.hubspot_request_counts w
     where w.window_start < now() - interval '24 hours'
     order by w.window_start
     limit v_batch
       for update skip locked
  ), gone as (
    delete from private.hubspot_request_counts w using doomed d
     where w.hubspot_portal_id = d.hubspot_portal_id and w.window_start = d.window_start returning 1
  )
  select count(*) into v_windows from gone;

  return jsonb_build_object('jobs', v_jobs, 'runs', v_runs, 'notifications', v_notifications, 'quiet_cycles', v_quiet,
                            'request_windows', v_windows);
end;
$$;
comment on function public.prune_queue_history(interval, integer) is
  'Retention: deletes one bounded batch of finished jobs, runs, notifications and quiet-cycle roll-ups older than the setting (or p_older_than), and HubSpot request windows older than 24 hours. Returns the counts; pg_cron calls it.';

-- ==== supabase/schemas/0420_function_take_user_write.sql ====
-- public.take_user_write(user): the orchestrator's per-user write limit: 0 =
-- go (the write is counted), otherwise ms to wait (429). Concurrent calls for
-- one user serialise on the user's log row (FOR UPDATE). The service role only.
create function public.take_user_write(p_user_id uuid) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.write_limit_settings;
  v_window interval;
  v_now timestamptz;
  v_log timestamptz[];
begin
  if p_user_id is null then
    raise exception 'take_user_write: a user id is required' using errcode = '22004';
  end if;
  select * into v_settings from private.write_limit_settings s where s.id;
  v_window := make_interval(secs => v_settings.window_seconds);
  insert into private.user_write_log (user_id) values (p_user_id) on conflict (user_id) do nothing;
  select l.written_at into v_log from private.user_write_log l where l.user_id = p_user_id for update;
  v_now := clock_timestamp();
  v_log := array(select t from unnest(v_log) t where t > v_now - v_window order by t);
  if cardinality(v_log) < v_settings.max_writes then
    update private.user_write_log l set written_at = v_log || v_now, updated_at = v_now where l.user_id = p_user_id;
    return 0;
  end if;
  update private.user_write_log l set written_at = v_log, updated_at = v_now where l.user_id = p_user_id;
  return greatest(1, ceil(extract(epoch from (v_log[cardinality(v_log) - v_settings.max_writes + 1] + v_window - v_now)) * 1000)::integer);
end;
$$;
comment on function public.take_user_write(uuid) is
  'Per-user write limit: 0 = go (counted), otherwise ms to wait. Settings in private.write_limit_settings.';

-- ==== supabase/schemas/0430_function_create_oauth_install_state.sql ====
-- public.create_oauth_install_state(user, state_hash): starts an OAuth install:
-- records sha256(state) bound to the user until state_ttl and returns the
-- expiry, dropping the user's expired and oldest open states beyond
-- max_open_states. One user's calls serialise on a transaction-level advisory
-- lock (pooler-safe). For the service role only (the orchestrator).
create function public.create_oauth_install_state(p_user_id uuid, p_state_hash bytea)
returns timestamptz
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.oauth_install_settings;
  v_expires_at timestamptz;
begin
  if p_user_id is null or p_state_hash is null or octet_length(p_state_hash) <> 32 then
    raise exception 'create_oauth_install_state: a user id and a 32-byte state hash are required' using errcode = '22023';
  end if;
  select * into v_settings from private.oauth_install_settings s where s.id;
  perform pg_advisory_xact_lock(hashtextextended('oauth_install_states:' || p_user_id::text, 0));
  delete from private.oauth_install_states s where s.user_id = p_user_id and s.expires_at <= now();
  delete from private.oauth_install_states s
   where s.state_hash in (
     select o.state_hash from private.oauth_install_states o
      where o.user_id = p_user_id
      order by o.created_at desc, o.state_hash
     offset v_settings.max_open_states - 1);
  v_expires_at := now() + v_settings.state_ttl;
  insert into private.oauth_install_states (state_hash, user_id, expires_at)
  values (p_state_hash, p_user_id, v_expires_at);
  return v_expires_at;
end;
$$;
comment on function public.create_oauth_install_state(uuid, bytea) is
  'Starts an OAuth install: stores sha256(state) bound to the user until state_ttl; returns the expiry. At most max_open_states per user (oldest dropped).';

-- ==== supabase/schemas/0431_function_consume_oauth_install_state.sql ====
-- public.consume_oauth_install_state(user, state_hash): true exactly once for
-- the user's own unexpired state (deleted), false otherwise (nothing changed).
-- Concurrent consumers: the row lock lets one delete it. The service role only.
create function public.consume_oauth_install_state(p_user_id uuid, p_state_hash bytea)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_found boolean;
begin
  if p_user_id is null or p_state_hash is null then
    return false;
  end if;
  with gone as (
    delete from private.oauth_install_states s
     where s.state_hash = p_state_hash and s.user_id = p_user_id and s.expires_at > now()
    returning 1
  )
  select exists (select 1 from gone) into v_found;
  return v_found;
end;
$$;
comment on function public.consume_oauth_install_state(uuid, bytea) is
  'Completes an OAuth install''s state check: true once for the user''s own unexpired state (deleted), false otherwise (nothing changed).';

-- ==== supabase/schemas/0432_function_prune_oauth_install_states.sql ====
-- public.prune_oauth_install_states(batch): retention: deletes one bounded
-- batch of expired install states (FOR UPDATE SKIP LOCKED); returns how many.
-- pg_cron calls it (0920). For the service role only.
create function public.prune_oauth_install_states(p_batch_size integer default null)
returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_batch integer;
  v_deleted integer;
begin
  select coalesce(p_batch_size, s.prune_batch_size) into v_batch from private.oauth_install_settings s where s.id;
  if v_batch is null or v_batch not between 1 and 100000 then
    raise exception 'prune_oauth_install_states: a batch size of 1-100000 is required' using errcode = '22023';
  end if;
  with gone as (
    delete from private.oauth_install_states s
     where s.state_hash in (
       select o.state_hash from private.oauth_install_states o
        where o.expires_at <= now()
        order by o.expires_at
        limit v_batch
          for update skip locked)
    returning 1
  )
  select count(*) into v_deleted from gone;
  return v_deleted;
end;
$$;
comment on function public.prune_oauth_install_states(integer) is
  'Retention: deletes one bounded batch of expired OAuth install states; returns how many. pg_cron calls it.';

-- ==== supabase/schemas/0440_function_schedule_due_syncs.sql ====
-- public.schedule_due_syncs(): the pg_cron tick's call (every minute, before
-- the worker is invoked): for at most private.sync_settings.max_runs_per_tick
-- due schedules of connected portals, not paused, oldest due first, creates a
-- fetch run through create_run (a type with an active fetch gets no second
-- job): a full reconcile when due (it stands for the incremental too), else an
-- incremental, once it has been due probe_grace_seconds with no live schedule
-- probe (worker lanes probe due incrementals from the schedule row and make a
-- run only on a change: docs/decisions/0058; the tick is their fallback, and
-- with a grace of 0 makes every due incremental a run). The next due times are
-- each interval's next slot (private.sync_slot), but a full that met a busy
-- type stays due. A time due within 10 s counts as due: ticks a minute apart
-- start at varying times. Schedules are taken FOR UPDATE SKIP LOCKED: two
-- ticks, or a tick and a lane, never handle one twice. Returns the number of
-- runs created. The service role only.
create function public.schedule_due_syncs() returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_schedule public.sync_schedules;
  v_full boolean;
  v_run uuid;
  v_duplicates text[];
  v_runs integer := 0;
  v_due_by timestamptz := now() + interval '10 seconds';
  v_grace interval := make_interval(secs => (select t.probe_grace_seconds from private.sync_settings t));
begin
  for v_schedule in
    select s.* from public.sync_schedules s
     where not s.paused
       and least(s.next_incremental_at, s.next_full_at) <= v_due_by
       -- A full reconcile when due; an incremental once no lane has probed it within the grace (none live now).
       and (s.next_full_at <= v_due_by
            or (s.next_incremental_at <= v_due_by - v_grace
                and (s.schedule_probe_lease_expires_at is null or s.schedule_probe_lease_expires_at <= now())))
       and exists (select 1 from public.portals p where p.id = s.portal_id and p.disconnected_at is null)
     order by least(s.next_incremental_at, s.next_full_at)
     limit (select t.max_runs_per_tick from private.sync_settings t)
       for update of s skip locked
  loop
    v_full := v_schedule.next_full_at <= v_due_by;
    select c.run_id, c.duplicate_types into v_run, v_duplicates
      from public.create_run(v_schedule.portal_id, v_schedule.owner_id, 'fetch', v_schedule.content_types, null, null, null,
                             case when v_full then 'full' else 'incremental' end, 'schedule') c;
    if v_run is not null then
      v_runs := v_runs + 1;
    end if;
    update public.sync_schedules s
       set next_incremental_at = case when s.incremental_every_minutes is not null
                                      then private.sync_slot(s.portal_id, s.incremental_every_minutes, v_due_by) end,
           next_full_at = case when v_full and cardinality(v_duplicates) = 0
                               then private.sync_slot(s.portal_id, s.full_every_minutes, v_due_by) else s.next_full_at end,
           last_scheduled_at = now(),
           last_run_id = coalesce(v_run, s.last_run_id),
           schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null -- an expired lease ends
     where s.portal_id = v_schedule.portal_id;
  end loop;
  return v_runs;
end;
$$;

-- ==== supabase/schemas/0441_function_schedule_probe_due.sql ====
-- private.schedule_probe_due(schedule, due_by): whether a worker lane may
-- probe the schedule now (docs/decisions/0058): schedule probes on
-- (probe_grace_seconds > 0), its incremental due by due_by and its full
-- reconcile not (the tick's), no live schedule-probe lease, the portal connected, not
-- paused by an operator, and no fetch or probe job of it pending or running
-- (the tick's run would join them). The caller filters by the due index first (not paused,
-- least of the due times). claim_schedule_probe and claimable_jobs_exist ask
-- it (plpgsql: per row, decision 0052); owner only.
create function private.schedule_probe_due(p_schedule public.sync_schedules, p_due_by timestamptz)
returns boolean
language plpgsql
stable
set search_path = ''
as $$
begin
  return p_schedule.next_incremental_at <= p_due_by
     and (p_schedule.next_full_at is null or p_schedule.next_full_at > p_due_by)
     and (p_schedule.schedule_probe_lease_expires_at is null or p_schedule.schedule_probe_lease_expires_at <= now())
     and (select t.probe_grace_seconds from private.sync_settings t) > 0
     and exists (select 1 from public.portals p where p.id = p_schedule.portal_id and p.disconnected_at is null)
     and not exists (select 1 from private.portal_pauses pp where pp.portal_id = p_schedule.portal_id)
     -- By the active-job indexes: never the portal's runs, which a month of changed cycles makes many.
     and not exists (select 1 from public.jobs j
                      where j.portal_id = p_schedule.portal_id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running'));
end;
$$;

-- ==== supabase/schemas/0442_function_claim_schedule_probe.sql ====
-- public.claim_schedule_probe(holder, ...): a worker lane claims the schedule
-- probe due longest (docs/decisions/0058): one due schedule
-- (private.schedule_probe_due), taken FOR UPDATE SKIP LOCKED, under the
-- schedule-probe lease with a new fencing token, its incremental due again
-- when the lease expires. Answers what to ask HubSpot (private.probe_checkpoint
-- of the types with settled marks), which the report brings back. With a token
-- holder, also what the lane's first requests need, so a quiet cycle takes two
-- calls: the portal's token (claim_portal_token for the holder, as jsonb) and,
-- when it is to be used, a grant from the portal's HubSpot budget
-- (acquire_hubspot_requests with the budget arguments) of the requests the
-- questions' first round sends (private.probe_requests); fewer when the
-- budget has less room (the lane asks for the rest itself). ahead_seconds: how
-- long before its due time a schedule may be probed (10, as the tick counts
-- due; report_and_claim_schedule_probes's chained claims 20). Writes nothing
-- else: no run, no job. No row when none is due, or when the schedule got a
-- run's job meanwhile (a tick's: the lease is given back). The service role only (the worker).
create function public.claim_schedule_probe(
  p_token_holder text default null, p_refresh_lease_seconds integer default 30, p_min_valid_seconds integer default 5,
  p_max_requests integer default 190, p_window_ms integer default 10000, p_ceiling integer default null,
  p_daily_reserve_percent numeric default 0, p_ahead_seconds integer default 10
)
returns table (portal_id uuid, fencing_token bigint, checkpoint jsonb, token jsonb, granted integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  -- As the tick: due within 10 s counts as due; a lane in a chain looks further ahead (decision 0063).
  v_due_by timestamptz := now() + make_interval(secs => p_ahead_seconds);
  -- The schedule-probe lease has no setting of its own: it borrows the probe job kind's lease_seconds (same questions, same time).
  v_lease_end timestamptz := now() + make_interval(secs => (select k.lease_seconds from private.job_kinds k where k.kind = 'probe'));
  v_claimed public.sync_schedules;
  v_checkpoint jsonb;
  v_token jsonb;
  v_requests integer;
  v_granted integer := 0;
begin
  if p_ahead_seconds is null or p_ahead_seconds not between 0 and 60 then
    raise exception 'claim_schedule_probe: ahead_seconds must be between 0 and 60' using errcode = '22023';
  end if;
  update public.sync_schedules s
     set schedule_probe_fencing_token = s.schedule_probe_fencing_token + 1,
         schedule_probe_claimed_at = now(),
         schedule_probe_lease_expires_at = v_lease_end,
         -- Due again when the lease expires: the due index then passes over probes in flight (a claim
         -- never walks every lane's leased schedule), and a probe whose worker died comes due by itself.
         next_incremental_at = v_lease_end
   where s.portal_id = (select d.portal_id from public.sync_schedules d
                         where not d.paused
                           and least(d.next_incremental_at, d.next_full_at) <= v_due_by
                           and private.schedule_probe_due(d, v_due_by)
                         order by least(d.next_incremental_at, d.next_full_at)
                         limit 1
                           for update skip locked)
  returning s.* into v_claimed;
  if v_claimed.portal_id is null then
    return;
  end if;
  -- A tick that made this cycle's run and committed after the claim's snapshot, with a next slot
  -- within 10 s, passes the due check on the row's new version, whose job test read the older
  -- snapshot; this statement's snapshot sees the run's job. The cycle is the run's: the lease is
  -- given back and the schedule set to its next slot, as the tick does.
  if exists (select 1 from public.jobs j
              where j.portal_id = v_claimed.portal_id and j.kind in ('fetch', 'probe') and j.status in ('pending', 'running')) then
    update public.sync_schedules s
       set schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null,
           next_incremental_at = case when s.incremental_every_minutes is not null
                                      then private.sync_slot(s.portal_id, s.incremental_every_minutes, v_due_by) end
     where s.portal_id = v_claimed.portal_id;
    return;
  end if;
  -- What to ask: the types with settled marks (the others count as changed at the report).
  v_checkpoint := private.probe_checkpoint(v_claimed.portal_id, v_claimed.content_types,
                                           make_interval(secs => v_claimed.overlap_seconds), v_claimed.hubdb_sweep_every_minutes);
  if p_token_holder is not null then
    select to_jsonb(t) into v_token
      from public.claim_portal_token(v_claimed.portal_id, p_token_holder, null, p_refresh_lease_seconds, p_min_valid_seconds) t;
    v_requests := private.probe_requests(v_checkpoint);
    if v_token ->> 'decision' = 'use' and v_requests > 0 then
      select a.granted into v_granted
        from public.acquire_hubspot_requests((v_token ->> 'hubspot_portal_id')::bigint, v_requests, p_max_requests, p_window_ms,
                                             v_token ->> 'auth_kind', p_ceiling, p_daily_reserve_percent) a;
    end if;
  end if;
  return query select v_claimed.portal_id, v_claimed.schedule_probe_fencing_token, v_checkpoint, v_token, v_granted;
end;
$$;

-- ==== supabase/schemas/0443_function_report_schedule_probe.sql ====
-- public.report_schedule_probe(portal, fencing_token, checkpoint, answers, tables_pages, rate_headers):
-- the lane holding a schedule probe (claim_schedule_probe; docs/decisions/0058)
-- reports what HubSpot answered to the claim's questions (checkpoint, as the
-- claim gave them), and private.probe_changed_types decides. With
-- nothing changed, the cycle leaves no run: the types are recorded as synced
-- now (private.record_probe) and the portal's quiet cycles of the day count
-- one more (public.quiet_cycles). With changed types (and the schedule's types
-- whose marks are not settled), a scheduled incremental run fetches them
-- (create_run, p_probed: no second probe), with the tables list kept for its
-- HubDB jobs. Answers null: the probe failed (HubSpot, the token, the budget),
-- and a scheduled incremental run with a probe job takes the cycle over, with
-- its retries, backoff and notifications. Either way the schedule moves to its
-- next slot at least half an interval away, and the lease ends. rate_headers: the
-- last HubSpot answer's limits ({max, intervalMs, remaining, daily,
-- dailyRemaining, sentAt, answeredAt}), recorded as record_hubspot_rate_headers
-- does. Answers 'quiet', 'changed' or 'handed_over';
-- null when fenced off (another fencing token, or the lease expired: the schedule is
-- due again). Locks the schedule row, then the portal's budget row and what create_run locks. The service role only.
create function public.report_schedule_probe(p_portal_id uuid, p_fencing_token bigint, p_checkpoint jsonb, p_answers jsonb,
                                             p_tables_pages text[] default null, p_rate_headers jsonb default null)
returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_schedule public.sync_schedules;
  v_types text[]; -- the types probed
  v_changed text[];
  v_run uuid;
  v_due_by timestamptz := now() + interval '10 seconds';
  v_outcome text;
begin
  select s.* into v_schedule from public.sync_schedules s
   where s.portal_id = p_portal_id and s.schedule_probe_fencing_token = p_fencing_token
     and s.schedule_probe_lease_expires_at > now()
     for update;
  if not found then
    return null;
  end if;
  if p_rate_headers is not null then
    perform public.record_hubspot_rate_headers((select p.hubspot_portal_id from public.portals p where p.id = p_portal_id),
      (p_rate_headers ->> 'max')::integer, (p_rate_headers ->> 'intervalMs')::integer, (p_rate_headers ->> 'remaining')::integer,
      (p_rate_headers ->> 'daily')::integer, (p_rate_headers ->> 'dailyRemaining')::integer,
      (p_rate_headers ->> 'sentAt')::timestamptz, (p_rate_headers ->> 'answeredAt')::timestamptz);
  end if;
  if jsonb_typeof(p_checkpoint -> 'types') is distinct from 'object' then
    raise exception 'report_schedule_probe: the checkpoint must be the claim''s {types: {...}}' using errcode = '22023';
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(p_checkpoint -> 'types') k;
  if p_answers is null then
    select c.run_id into v_run
      from public.create_run(p_portal_id, v_schedule.owner_id, 'fetch', v_schedule.content_types, null, null, null,
                             'incremental', 'schedule') c;
    v_outcome := 'handed_over';
  else
    select d.changed_types into v_changed
      from private.probe_changed_types('report_schedule_probe', p_portal_id, p_checkpoint, p_answers, p_tables_pages) d;
    -- The schedule's types the probe could not ask about (no settled marks) are fetched as create_run decides.
    select array_agg(t order by t) into v_changed
      from unnest(v_schedule.content_types) t
     where t = any (coalesce(v_changed, '{}')) or t <> all (coalesce(v_types, '{}'));
    if v_changed is not null then
      select c.run_id into v_run
        from public.create_run(p_portal_id, v_schedule.owner_id, 'fetch', v_changed, null, null, null,
                               'incremental', 'schedule', true) c;
      v_outcome := 'changed';
    else
      -- The day's row is there but for the day's first cycle: an update (no insert tried, no conflict's lock).
      update public.quiet_cycles q set cycles = q.cycles + 1, last_finished_at = greatest(q.last_finished_at, now())
       where q.portal_id = p_portal_id and q.day = (now() at time zone 'UTC')::date;
      if not found then
        insert into public.quiet_cycles as q (portal_id, owner_id, day, cycles, jobs, items_checked, first_finished_at, last_finished_at)
        values (p_portal_id, v_schedule.owner_id, (now() at time zone 'UTC')::date, 1, 0, 0, now(), now())
        on conflict (portal_id, day) do update
           set cycles = q.cycles + 1, last_finished_at = greatest(q.last_finished_at, excluded.last_finished_at);
      end if;
      v_outcome := 'quiet';
    end if;
    perform private.record_probe(p_portal_id, v_run, v_types, v_changed,
                                 case when (p_checkpoint #>> '{types,hubdb_rows,sweep}')::boolean
                                      then v_schedule.schedule_probe_claimed_at end, p_tables_pages);
  end if;
  update public.sync_schedules s
     -- The next slot at least half an interval away: a late probe skips the slot it would reach at once.
     set next_incremental_at = private.sync_slot(s.portal_id, s.incremental_every_minutes,
                                                 greatest(v_due_by, now() + make_interval(secs => s.incremental_every_minutes * 30))),
         last_scheduled_at = now(),
         last_run_id = coalesce(v_run, s.last_run_id),
         schedule_probe_claimed_at = null, schedule_probe_lease_expires_at = null
   where s.portal_id = p_portal_id;
  return v_outcome;
end;
$$;

-- ==== supabase/schemas/0444_function_report_and_claim_schedule_probes.sql ====
-- public.report_and_claim_schedule_probes(reports, claims, holder, ...): a lane
-- holding several schedule probes at once reports them all
-- (report_schedule_probe, in order) and claims up to `claims` next ones
-- (claim_schedule_probe with the holder and budget arguments, 20 s ahead) in
-- one call and one transaction (docs/decisions/0061, 0065): a fleet's quiet
-- cycles cost a fraction of a call each. reports: a JSON array of
-- {portal_id, fencing_token, checkpoint, answers, tables_pages, rate_headers},
-- each as report_schedule_probe takes them (answers null: the probe failed);
-- none: a lane's first claims, of schedules due within 10 s, as the idle
-- poll looks; claims chained to reports look 20 s ahead: chains keep ahead
-- of the due times (decision 0063). One row per report or claim, whichever are more
-- (at least one): row n holds report n's outcome (null: fenced off) and
-- claimed probe n (all null past the last one); jobs_waiting, the same on
-- every row, with claims: whether claim_jobs would find a job now
-- (claimable_jobs_exist without schedules, asked once). A report that
-- raises undoes the call: nothing reported, nothing claimed. Locks what the
-- calls lock, the reports' first. The service role only (the worker).
create function public.report_and_claim_schedule_probes(
  p_reports jsonb, p_claims integer, p_token_holder text, p_refresh_lease_seconds integer default 30,
  p_min_valid_seconds integer default 5, p_max_requests integer default 190, p_window_ms integer default 10000,
  p_ceiling integer default null, p_daily_reserve_percent numeric default 0
)
returns table (ordinality integer, outcome text, portal_id uuid, fencing_token bigint, checkpoint jsonb, token jsonb,
               granted integer, jobs_waiting boolean)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_report jsonb;
  v_outcomes text[] := '{}';
  v_claimed record;
  v_claims jsonb[] := '{}';
  v_jobs_waiting boolean;
begin
  if jsonb_typeof(p_reports) is distinct from 'array' or jsonb_array_length(p_reports) > 64 then
    raise exception 'report_and_claim_schedule_probes: reports must be an array of at most 64' using errcode = '22023';
  end if;
  if p_claims is null or p_claims not between 0 and 64 then
    raise exception 'report_and_claim_schedule_probes: claims must be between 0 and 64' using errcode = '22023';
  end if;
  if p_claims > 0 and p_token_holder is null then
    raise exception 'report_and_claim_schedule_probes: the claims need a token holder' using errcode = '22023';
  end if;
  for v_report in select r.value from jsonb_array_elements(p_reports) r loop
    v_outcomes := v_outcomes || public.report_schedule_probe(
      (v_report ->> 'portal_id')::uuid, (v_report ->> 'fencing_token')::bigint, v_report -> 'checkpoint',
      nullif(v_report -> 'answers', 'null'::jsonb),
      case when jsonb_typeof(v_report -> 'tables_pages') = 'array'
           then array(select jsonb_array_elements_text(v_report -> 'tables_pages')) end,
      nullif(v_report -> 'rate_headers', 'null'::jsonb));
  end loop;
  for i in 1 .. p_claims loop
    select c.* into v_claimed
      from public.claim_schedule_probe(p_token_holder, p_refresh_lease_seconds, p_min_valid_seconds, p_max_requests,
                                       p_window_ms, p_ceiling, p_daily_reserve_percent,
                                       case when jsonb_array_length(p_reports) = 0 then 10 else 20 end) c;
    exit when not found;
    v_claims := v_claims || to_jsonb(v_claimed);
  end loop;
  if p_claims > 0 then
    v_jobs_waiting := public.claimable_jobs_exist(null, false);
  end if;
  return query
    select n, v_outcomes[n], (v_claims[n] ->> 'portal_id')::uuid, (v_claims[n] ->> 'fencing_token')::bigint,
           v_claims[n] -> 'checkpoint', nullif(v_claims[n] -> 'token', 'null'::jsonb), (v_claims[n] ->> 'granted')::integer,
           v_jobs_waiting
      from generate_series(1, greatest(cardinality(v_outcomes), cardinality(v_claims), 1)) n;
end;
$$;

-- ==== supabase/schemas/0450_table_portal_pauses.sql ====
-- private.portal_pauses: the portals an operator paused, one row each (the
-- pause flag lives here, not on public.portals). A paused portal's pending
-- jobs wait with run_after = 'infinity' (private.hold_paused_job, 0453; their own
-- due time and reason kept in jobs.held_run_after / held_waiting_reason), and
-- create_run makes no scheduled run for it. Written only by pause_portal and
-- resume_portal; read by them, hold_paused_job, create_run and operator_portals.
create table private.portal_pauses (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  paused_at timestamptz not null default now(),
  paused_by uuid references auth.users (id) on delete set null,
  reason text not null default 'paused by an operator'
    constraint portal_pauses_reason_length check (char_length(reason) between 1 and 500)
);
comment on table private.portal_pauses is
  'Portals paused by an operator: their jobs are not claimed and their schedule creates no run until resume_portal.';
-- Deleting an operator's user sets paused_by to null: found by this index.
create index portal_pauses_paused_by_idx on private.portal_pauses (paused_by);
alter table private.portal_pauses enable row level security;

-- ==== supabase/schemas/0451_table_hubspot_request_counts.sql ====
-- private.hubspot_request_counts: HubSpot requests per HubSpot portal per
-- 10-second window (aligned to the epoch): one row per window that had a
-- request, never one per request. Written only by count_hubspot_request (from
-- acquire_hubspot_requests and record_hubspot_request, which hold the portal's
-- budget row); past 24 hours deleted by retention (prune_queue_history). Read by hubspot_request_history.
create table private.hubspot_request_counts (
  hubspot_portal_id bigint not null,
  window_start timestamptz not null,
  requests integer not null constraint hubspot_request_counts_positive check (requests > 0),
  primary key (hubspot_portal_id, window_start),
  constraint hubspot_request_counts_aligned check (extract(epoch from window_start) % 10 = 0)
);
comment on table private.hubspot_request_counts is
  'HubSpot requests granted or recorded per portal per 10-second window (the requests chart), kept 24 hours.';
-- Retention finds the oldest windows of every portal.
create index hubspot_request_counts_window_idx on private.hubspot_request_counts (window_start);
alter table private.hubspot_request_counts enable row level security;

-- ==== supabase/schemas/0452_function_count_hubspot_request.sql ====
-- private.count_hubspot_request(portal, at, requests): adds the requests (one
-- unless given) to the portal's 10-second window of `at`. Windows older than 24
-- hours are deleted by retention (prune_queue_history), not here: a delete on
-- every window's first request cost a fleet's grants ~0.2 ms each (decision 0054).
-- The caller holds the portal's budget row (one writer per portal at a time).
-- Owner only (acquire_hubspot_requests, record_hubspot_request).
create function private.count_hubspot_request(p_hubspot_portal_id bigint, p_at timestamptz, p_requests integer default 1) returns void
language plpgsql
set search_path = ''
as $$
begin
  insert into private.hubspot_request_counts as c (hubspot_portal_id, window_start, requests)
  values (p_hubspot_portal_id, to_timestamp(floor(extract(epoch from p_at) / 10) * 10), p_requests)
  on conflict (hubspot_portal_id, window_start) do update set requests = c.requests + excluded.requests;
end;
$$;

-- ==== supabase/schemas/0453_function_hold_paused_job.sql ====
-- Triggers jobs_hold_paused_insert / _update: a paused portal's job that becomes
-- pending (created, released, parked, retried) waits with run_after 'infinity'
-- and the pause's reason until resume_portal, its own run_after and
-- waiting_reason kept in held_run_after / held_waiting_reason for the resume.
-- A held job that ends (stop_job, stop_run, disconnect_portal) drops the hold
-- and gets its own run_after back. An insert first takes the portal FOR KEY
-- SHARE, waiting out a pause_portal in flight (it holds it FOR UPDATE).
-- Reads only; SECURITY DEFINER since the service role cannot read private.
create function private.hold_paused_job() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text;
begin
  if new.status <> 'pending' then
    if new.run_after = 'infinity' then
      new.run_after := new.held_run_after;
    end if;
    new.held_run_after := null;
    new.held_waiting_reason := null;
    return new;
  end if;
  if new.held_run_after is not null then
    return new; -- held already (pause_portal holds what it hands back itself)
  end if;
  if tg_op = 'INSERT' then
    perform 1 from public.portals p where p.id = new.portal_id for key share;
  end if;
  select pp.reason into v_reason from private.portal_pauses pp where pp.portal_id = new.portal_id;
  if found then
    new.held_run_after := new.run_after;
    new.held_waiting_reason := new.waiting_reason;
    new.run_after := 'infinity';
    new.waiting_reason := v_reason;
  end if;
  return new;
end;
$$;
create trigger jobs_hold_paused_insert before insert on public.jobs
  for each row when (new.status = 'pending') execute function private.hold_paused_job();
create trigger jobs_hold_paused_update before update of status on public.jobs
  for each row when ((new.status = 'pending' and old.status <> 'pending')
                     or (new.status <> 'pending' and old.held_run_after is not null))
  execute function private.hold_paused_job();

-- ==== supabase/schemas/0454_function_pause_portal.sql ====
-- public.pause_portal(portal, operator, reason): its pending and running jobs
-- wait as pending (run_after 'infinity', the reason on them and its unfinished
-- runs; a holder learns at its next write, attempt given back), each job's own
-- run_after and waiting_reason kept for resume_portal (a running one's: due
-- now, no reason); its schedule creates no run. False when already paused.
-- Locks the portal FOR UPDATE, its unfinished runs (by id), their jobs. The
-- service role only (for operators).
create function public.pause_portal(p_portal_id uuid, p_paused_by uuid default null, p_reason text default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text := coalesce(nullif(btrim(p_reason), ''), 'paused by an operator');
begin
  if p_portal_id is null then
    raise exception 'pause_portal: a portal is required' using errcode = '22004';
  end if;
  if char_length(v_reason) > 500 then
    raise exception 'pause_portal: the reason is at most 500 characters' using errcode = '22023';
  end if;
  perform 1 from public.portals p where p.id = p_portal_id for update;
  if not found then
    raise exception 'pause_portal: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  insert into private.portal_pauses (portal_id, paused_by, reason) values (p_portal_id, p_paused_by, v_reason)
  on conflict (portal_id) do nothing;
  if not found then
    return false;
  end if;
  perform 1 from public.runs r where r.portal_id = p_portal_id and r.finished_at is null order by r.id for update;
  update public.jobs j
     set status = 'pending', run_after = 'infinity', waiting_reason = v_reason, lease_expires_at = null,
         held_run_after = case when j.status = 'running' then now() else j.run_after end,
         held_waiting_reason = case when j.status = 'running' then null else j.waiting_reason end,
         attempts = case when j.status = 'running' then greatest(j.attempts - 1, 0) else j.attempts end,
         updated_at = now()
   where j.portal_id = p_portal_id and j.status in ('pending', 'running') and j.held_run_after is null;
  update public.runs r set waiting_reason = v_reason
   where r.portal_id = p_portal_id and r.finished_at is null;
  return true;
end;
$$;

-- ==== supabase/schemas/0455_function_resume_portal.sql ====
-- public.resume_portal(portal): ends an operator's pause: each job it held
-- gets its own run_after and waiting_reason back (due now only if that time
-- has passed: a parked job stays parked until its reset); an unfinished run
-- that showed the pause's reason shows that of its job whose wait ends first,
-- else none; its schedule runs again. False when it was not paused. Locks the
-- portal FOR UPDATE, then its unfinished runs (by id), then their jobs. For
-- the service role only (the orchestrator, for operators).
create function public.resume_portal(p_portal_id uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_reason text;
begin
  if p_portal_id is null then
    raise exception 'resume_portal: a portal is required' using errcode = '22004';
  end if;
  perform 1 from public.portals p where p.id = p_portal_id for update;
  if not found then
    raise exception 'resume_portal: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  delete from private.portal_pauses pp where pp.portal_id = p_portal_id returning pp.reason into v_reason;
  if not found then
    return false;
  end if;
  perform 1 from public.runs r where r.portal_id = p_portal_id and r.finished_at is null order by r.id for update;
  update public.jobs j
     set run_after = j.held_run_after, waiting_reason = j.held_waiting_reason,
         held_run_after = null, held_waiting_reason = null, updated_at = now()
   where j.portal_id = p_portal_id and j.status = 'pending' and j.held_run_after is not null;
  update public.runs r
     set waiting_reason = (select j.waiting_reason from public.jobs j
                            where j.run_id = r.id and j.status = 'pending' and j.waiting_reason is not null
                              and j.run_after > now()
                            order by j.run_after, j.id
                            limit 1)
   where r.portal_id = p_portal_id and r.finished_at is null and r.waiting_reason = v_reason;
  return true;
end;
$$;

-- ==== supabase/schemas/0456_function_retry_job.sql ====
-- public.retry_job(job): a failed job is pending again with one attempt more
-- (checkpoint kept, error cleared, a new run of retryable failures: retry_until
-- cleared) and its run reopened (old notification
-- deleted), settled again when the job ends. 'retried', 'not_failed', 'busy'
-- (another active job of its portal, kind and type) or 'disconnected'. Locks
-- the run, then the job. The service role only (the orchestrator, for operators).
create function public.retry_job(p_job_id bigint) returns text
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
  v_job public.jobs;
begin
  select j.run_id into v_run_id from public.jobs j where j.id = p_job_id;
  if not found then
    raise exception 'retry_job: job % not found', p_job_id using errcode = 'P0002';
  end if;
  perform 1 from public.runs r where r.id = v_run_id for update;
  select * into v_job from public.jobs j where j.id = p_job_id for update;
  if v_job.status <> 'failed' then
    return 'not_failed';
  end if;
  if exists (select 1 from public.portals p where p.id = v_job.portal_id and p.disconnected_at is not null) then
    return 'disconnected';
  end if;
  if exists (select 1 from public.jobs a
              where a.portal_id = v_job.portal_id and a.kind = v_job.kind and a.content_type = v_job.content_type
                and a.status in ('pending', 'running')) then
    return 'busy';
  end if;
  begin
    update public.jobs j
       set status = 'pending', finished_at = null, run_after = now(), lease_expires_at = null,
           max_attempts = greatest(j.max_attempts, j.attempts + 1), last_error = null, waiting_reason = null,
           stalled_releases = 0, retry_until = null, failing_progress = null, updated_at = now()
     where j.id = p_job_id;
  exception when unique_violation then
    return 'busy'; -- an active job of that type was created meanwhile (create_run, another retry)
  end;
  update public.runs r
     set status = case when r.started_at is null then 'pending' else 'running' end,
         finished_at = null,
         waiting_reason = (select j.waiting_reason from public.jobs j where j.id = p_job_id) -- a paused portal's
   where r.id = v_run_id and r.finished_at is not null;
  delete from public.notifications n where n.run_id = v_run_id;
  perform private.settle_run(v_run_id);
  return 'retried';
end;
$$;

-- ==== supabase/schemas/0457_function_stop_job.sql ====
-- public.stop_job(job): an operator stops one pending or running job (a
-- running holder learns at its next write, as after stop_run); its run is
-- settled (stopped once all its jobs ended). False when the job had already
-- ended. Locks the run, then the job. For the service role only (the
-- orchestrator, for operators).
create function public.stop_job(p_job_id bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_run_id uuid;
begin
  v_run_id := private.lock_run_of_job(p_job_id);
  if v_run_id is null then
    raise exception 'stop_job: job % not found', p_job_id using errcode = 'P0002';
  end if;
  update public.jobs j
     set status = 'stopped', finished_at = now(), lease_expires_at = null, waiting_reason = null, updated_at = now()
   where j.id = p_job_id and j.status in ('pending', 'running');
  if not found then
    return false;
  end if;
  perform private.settle_run(v_run_id);
  return true;
end;
$$;

-- ==== supabase/schemas/0458_function_hubspot_request_history.sql ====
-- public.hubspot_request_history(portals, since, until): the portals' HubSpot
-- requests per 10-second window in [since, until) (windows without a request
-- are absent), from private.hubspot_request_counts: at most the last 24 hours,
-- at most 20 portals. Reads only. For the service role only (the requests
-- chart and the operator's budget history).
create function public.hubspot_request_history(
  p_hubspot_portal_ids bigint[], p_since timestamptz, p_until timestamptz default null
) returns table (hubspot_portal_id bigint, window_start timestamptz, requests integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
begin
  if p_hubspot_portal_ids is null or cardinality(p_hubspot_portal_ids) not between 1 and 20 or p_since is null then
    raise exception 'hubspot_request_history: 1-20 HubSpot portal ids and a start are required' using errcode = '22023';
  end if;
  return query
  select c.hubspot_portal_id, c.window_start, c.requests
    from private.hubspot_request_counts c
   where c.hubspot_portal_id = any (p_hubspot_portal_ids)
     -- the window holding p_since counts (its requests may all be after p_since)
     and c.window_start > greatest(p_since, now() - interval '24 hours') - interval '10 seconds'
     and (p_until is null or c.window_start < p_until)
   order by c.hubspot_portal_id, c.window_start;
end;
$$;

-- ==== supabase/schemas/0459_function_operator_jobs.sql ====
-- public.operator_jobs(status, portal, kind, since, until, limit, before_id):
-- jobs of every user for the Operator view, newest first, filtered by status,
-- portal, kind and creation time, with their portal (name, HubSpot id, paused)
-- and run (status, trigger, fetch mode); keyset pages by id (before_id).
-- Planned anew for each call's filters (a generic plan reads all history for a
-- narrow one: failed jobs, a portal's). Indexes: jobs_failed_or_stopped_idx,
-- jobs_portal_idx, jobs_created_idx (tests/queue-plans.test.ts).
-- Reads only. For the service role only (the orchestrator, for operators).
create function public.operator_jobs(
  p_status text default null, p_portal_id uuid default null, p_kind text default null,
  p_since timestamptz default null, p_until timestamptz default null, p_limit integer default 50,
  p_before_id bigint default null
) returns table (
  id bigint, run_id uuid, portal_id uuid, portal_name text, hubspot_portal_id bigint, portal_paused boolean,
  kind text, content_type text, status text, attempts integer, max_attempts integer, progress_done integer,
  progress_total integer, last_error text, waiting_reason text, run_after timestamptz, created_at timestamptz,
  started_at timestamptz, finished_at timestamptz, updated_at timestamptz, run_status text, run_trigger text,
  run_fetch_mode text
)
language plpgsql
stable
security definer
set search_path = ''
set plan_cache_mode = force_custom_plan
as $$
declare
  v_window boolean := false;
begin
  if p_status is not null and p_status not in ('pending', 'running', 'completed', 'failed', 'stopped') then
    raise exception 'operator_jobs: status must be pending, running, completed, failed or stopped' using errcode = '22023';
  end if;
  if p_kind is not null and not exists (select 1 from private.job_kinds k where k.kind = p_kind) then
    raise exception 'operator_jobs: unknown job kind "%"', p_kind using errcode = '22023';
  end if;
  -- A sanity bound, not the API's page size (200): a caller asks for one row more than its
  -- page to learn whether another page follows.
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception 'operator_jobs: limit must be between 1 and 1000' using errcode = '22023';
  end if;
  -- A window with an end holding fewer than 5,000 jobs is read by jobs_created_idx and
  -- sorted (ordered by id + 0): the planner, not knowing that ids follow creation times,
  -- would walk jobs_pkey down through all the newer history to reach it.
  if p_until is not null then
    select count(*) < 5000 into v_window
      from (select 1 from public.jobs j where j.created_at < p_until and (p_since is null or j.created_at >= p_since)
             limit 5000) w;
  end if;
  return query
  select j.id, j.run_id, j.portal_id, p.name, p.hubspot_portal_id,
         exists (select 1 from private.portal_pauses pp where pp.portal_id = j.portal_id),
         j.kind, j.content_type, j.status, j.attempts, j.max_attempts, j.progress_done, j.progress_total,
         j.last_error, j.waiting_reason, j.run_after, j.created_at, j.started_at, j.finished_at, j.updated_at,
         r.status, r.trigger, r.fetch_mode
    from public.jobs j
    join public.portals p on p.id = j.portal_id
    join public.runs r on r.id = j.run_id
   where (p_status is null or j.status = p_status)
     and (p_portal_id is null or j.portal_id = p_portal_id)
     and (p_kind is null or j.kind = p_kind)
     and (p_since is null or j.created_at >= p_since)
     and (p_until is null or j.created_at < p_until)
     and (p_before_id is null or j.id < p_before_id)
   order by case when v_window then j.id + 0 else j.id end desc
   limit p_limit;
end;
$$;

-- ==== supabase/schemas/0460_function_operator_portals.sql ====
-- public.operator_portals(): every connected or disconnected portal for the
-- Operator view: owner, HubSpot id, auth kind, disconnected, paused (when, by
-- whom, why), its active jobs by status, and its HubSpot requests in the last
-- 10 s and hour (private.hubspot_request_counts) with its learned limit.
-- Reads only. For the service role only (the orchestrator, for operators).
create function public.operator_portals() returns table (
  portal_id uuid, name text, owner_id uuid, hubspot_portal_id bigint, auth_kind text, disconnected_at timestamptz,
  disconnected_reason text, paused_at timestamptz, paused_by uuid, pause_reason text, pending_jobs integer,
  running_jobs integer, requests_last_10s integer, requests_last_hour integer, max_per_interval integer, interval_ms integer
)
language sql
stable
security definer
set search_path = ''
as $$
  select p.id, p.name, p.owner_id, p.hubspot_portal_id, p.auth_kind, p.disconnected_at, p.disconnected_reason,
         pp.paused_at, pp.paused_by, pp.reason,
         (select count(*)::integer from public.jobs j where j.portal_id = p.id and j.status = 'pending'),
         (select count(*)::integer from public.jobs j where j.portal_id = p.id and j.status = 'running'),
         (select count(*)::integer from private.hubspot_request_budgets b, unnest(b.granted_at) t
           where b.hubspot_portal_id = p.hubspot_portal_id and t > now() - interval '10 seconds'),
         (select coalesce(sum(c.requests), 0)::integer from private.hubspot_request_counts c
           where c.hubspot_portal_id = p.hubspot_portal_id and c.window_start > now() - interval '1 hour'),
         b.max_per_interval, b.interval_ms
    from public.portals p
    left join private.portal_pauses pp on pp.portal_id = p.id
    left join private.hubspot_request_budgets b on b.hubspot_portal_id = p.hubspot_portal_id
   order by p.name, p.id
   limit 1000;
$$;

-- ==== supabase/schemas/0461_function_hubspot_rate_window.sql ====
-- public.hubspot_rate_window(portals): each portal's rolling HubSpot window as
-- acquire_hubspot_requests sees it with its learned limit: requests granted in
-- it, how many it allows (the limit under the last ceiling, less headroom and
-- other apps' use), and while it is full, when the next grant can come (the
-- page's "waiting for HubSpot's 10-s window until …"). Reads only. The service role only.
create function public.hubspot_rate_window(p_hubspot_portal_ids bigint[])
returns table (hubspot_portal_id bigint, requests integer, allowed integer, full_until timestamptz)
language sql
stable
security definer
set search_path = ''
as $$
  select b.hubspot_portal_id, g.n, a.allowed,
         case when g.n >= a.allowed then g.times[g.n - a.allowed + 1] + w.span end
    from private.hubspot_request_budgets b
   cross join lateral (select make_interval(secs => greatest(b.interval_ms * 1.015, b.interval_ms + 150) / 1000.0) as span) w
   cross join lateral (select array(select t from unnest(b.granted_at) t where t > now() - w.span order by t) as times) gt
   cross join lateral (select cardinality(gt.times) as n, gt.times) g
   cross join lateral (select case when b.configured_max is null then b.max_per_interval
                                   else least(b.max_per_interval, greatest(1, floor(b.configured_max * b.interval_ms / 10000.0)::integer)) end as lim) l
   cross join lateral (select greatest(1, l.lim - greatest(2, ceil(l.lim * 0.02)::integer)
                                          - case when b.other_apps_until > now() then b.other_apps_requests else 0 end) as allowed) a
   where b.hubspot_portal_id = any (p_hubspot_portal_ids) and b.max_per_interval is not null;
$$;

-- ==== supabase/schemas/0462_function_wake_worker.sql ====
-- private.wake_worker(source): a background invocation of the worker edge
-- function through pg_net (net.http_post), with the project URL and worker
-- secret from Vault; nothing (null) until both secrets exist. The cron jobs
-- invoke-queue-worker and wake-queue-worker call it (supabase/schemas/09xx).
-- plpgsql: pg_net and Vault are looked up when it runs, so it is created
-- without them. Owner only (the cron jobs run as the owner).
create function private.wake_worker(p_source text)
returns bigint
language plpgsql
volatile
set search_path = ''
as $$
declare
  v_url text := (select s.decrypted_secret from vault.decrypted_secrets s where s.name = 'project_url');
  v_secret text := (select s.decrypted_secret from vault.decrypted_secrets s where s.name = 'worker_secret');
begin
  if v_url is null or v_secret is null then
    return null;
  end if;
  return net.http_post(
    url := v_url || '/functions/v1/worker',
    headers := jsonb_build_object('Content-Type', 'application/json', 'Authorization', 'Bearer ' || v_secret),
    body := jsonb_build_object('source', p_source, 'mode', 'background'),
    timeout_milliseconds := 5000);
end;
$$;

-- ==== supabase/schemas/0463_function_cron_interval.sql ====
-- private.cron_interval(seconds, pg_cron_version): the schedule of a cron
-- job meant to run every `seconds` (1-59): '<n> seconds' where pg_cron takes
-- sub-minute schedules (1.5 and later), else '* * * * *' (every minute) and a
-- notice saying what is lost. pg_cron_version defaults to the installed
-- extension's; with none installed (the local stand-in, which takes seconds)
-- the sub-minute spelling. The 09xx_cron_*.sql files call it.
create function private.cron_interval(p_seconds integer, p_pg_cron_version text default null)
returns text
language plpgsql
stable
set search_path = ''
as $$
declare
  v_version text := coalesce(p_pg_cron_version, (select e.extversion from pg_catalog.pg_extension e where e.extname = 'pg_cron'));
  v_major_minor integer[] := (pg_catalog.regexp_match(v_version, '^(\d+)\.(\d+)'))::integer[];
begin
  if p_seconds is null or p_seconds not between 1 and 59 then
    raise exception 'cron_interval: % seconds; pg_cron takes 1 to 59', p_seconds using errcode = '22023';
  end if;
  if v_version is null or v_major_minor >= array[1, 5] then
    return p_seconds || ' seconds';
  end if;
  raise notice 'pg_cron % takes no sub-minute schedules (they came in 1.5): a job meant to run every % seconds runs every minute', v_version, p_seconds;
  return '* * * * *';
end;
$$;
comment on function private.cron_interval(integer, text) is
  'The schedule for every p_seconds: ''<n> seconds'' on pg_cron 1.5 and later (or with no pg_cron installed), else ''* * * * *'' with a notice.';

-- ==== supabase/schemas/0464_function_record_cron_job.sql ====
-- private.record_cron_job(job_name): notes in private.cron_jobs_scheduled
-- that the job was scheduled just now, and that no run of it has been seen
-- since (public.heal_cron_jobs decides from this). Each 09xx_cron_*.sql file
-- calls it right after its cron.schedule. Owner only.
create function private.record_cron_job(p_jobname text)
returns void
language sql
set search_path = ''
as $$
  insert into private.cron_jobs_scheduled (jobname) values (p_jobname)
  on conflict (jobname) do update set scheduled_at = now(), settled_at = null, touched_at = null;
$$;
comment on function private.record_cron_job(text) is
  'Records that the schema''s cron job p_jobname was scheduled now (private.cron_jobs_scheduled), unsettled.';

-- ==== supabase/schemas/0465_function_heal_cron_jobs.sql ====
-- public.heal_cron_jobs(): touches the schema's pg_cron jobs once when none
-- of them has run for heal_after (private.cron_jobs_scheduled) since the cron
-- migration scheduled them: pg_cron 1.6.4's launcher can miss a large
-- migration's change of cron.job and then never runs them (decision 0069).
-- A touch (cron.alter_job(jobid, active := true) on each active job) makes
-- it read cron.job again. Every call first reads the few rows of
-- private.cron_jobs_scheduled and returns null at once when none is
-- overdue and unsettled (the worker calls it at every invocation start);
-- otherwise one caller at a time (rows FOR UPDATE SKIP LOCKED) looks in
-- cron.job_run_details and settles them: a run seen, or the jobs touched.
-- Nothing is done without pg_cron, or with cron.log_run off (no runs are
-- recorded then, so silence says nothing). Returns null, or what it
-- touched: {touched: [job names], scheduled_at, no_run_for_seconds, error}.
-- For the service role only.
create function public.heal_cron_jobs()
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_names text[];
  v_since timestamptz;
  v_log_run text;
  v_job record;
  v_touched text[] := '{}';
  v_error text;
begin
  if not exists (select 1 from private.cron_jobs_scheduled s
                  where s.settled_at is null and s.scheduled_at <= now() - s.heal_after) then
    return null;
  end if;
  if to_regclass('cron.job') is null or to_regclass('cron.job_run_details') is null then
    return null;
  end if;
  begin
    v_log_run := current_setting('cron.log_run', true);
  exception when insufficient_privilege then
    v_log_run := null; -- not readable by this role: pg_cron's default, on
  end;
  if coalesce(nullif(v_log_run, ''), 'on') <> 'on' then -- '' : a placeholder, no pg_cron loaded (the stand-in)
    return null;
  end if;

  select array_agg(s.jobname order by s.jobname), max(s.scheduled_at)
    into v_names, v_since
    from (select s.jobname, s.scheduled_at
            from private.cron_jobs_scheduled s
           where s.settled_at is null and s.scheduled_at <= now() - s.heal_after
             for update skip locked) s;
  if v_names is null then
    return null; -- another caller is deciding
  end if;

  if not exists (select 1
                   from cron.job_run_details d
                   join cron.job j on j.jobid = d.jobid
                  where j.jobname = any (v_names) and j.username = current_user and d.start_time >= v_since) then
    begin
      for v_job in
        select j.jobid, j.jobname from cron.job j
         where j.jobname = any (v_names) and j.username = current_user and j.active
         order by j.jobid
      loop
        perform cron.alter_job(v_job.jobid, active := true);
        v_touched := v_touched || v_job.jobname::text;
      end loop;
    exception when others then
      v_error := sqlerrm;
      v_touched := '{}';
    end;
  end if;

  update private.cron_jobs_scheduled s
     set settled_at = now(),
         touched_at = case when cardinality(v_touched) > 0 then now() end
   where s.jobname = any (v_names);
  if cardinality(v_touched) = 0 and v_error is null then
    return null;
  end if;
  return jsonb_build_object(
    'touched', to_jsonb(v_touched),
    'scheduled_at', v_since,
    'no_run_for_seconds', floor(extract(epoch from now() - v_since))::bigint,
    'error', v_error);
end;
$$;
comment on function public.heal_cron_jobs() is
  'Touches the schema''s pg_cron jobs once (cron.alter_job active := true) when none ran within heal_after of being scheduled; null when nothing was done. Cheap when nothing is due: the worker calls it at every invocation start.';

-- ==== supabase/schemas/0470_function_hubspot_item_updated_at.sql ====
-- private.hubspot_item_updated_at(item): HubSpot's update time of one item as
-- its API answers it: `updated` (CMS v3 types), else `updatedAt` (HubDB), the
-- rule save_fetched_page_raw stores hubspot_updated_at by; null when neither is
-- a timestamp string. Stable (a time zone setting reads a string without an
-- offset); for the publish functions; owner only.
create function private.hubspot_item_updated_at(p_item jsonb) returns timestamptz
language plpgsql
stable
parallel safe
set search_path = ''
as $$
declare
  v jsonb := coalesce(nullif(p_item -> 'updated', 'null'::jsonb), p_item -> 'updatedAt');
begin
  if jsonb_typeof(v) = 'string' and pg_input_is_valid(v #>> '{}', 'timestamptz') then
    return (v #>> '{}')::timestamptz;
  end if;
  return null;
end;
$$;

-- ==== supabase/schemas/0471_function_hubspot_object_id.sql ====
-- private.hubspot_object_id(type, hubspot_id): the id HubSpot's own answers
-- and audit log use for a stored item: a HubDB row's row id (stored as
-- `<tableId>:<rowId>`), any other item's id as stored. Immutable; for the
-- publish functions; owner only.
create function private.hubspot_object_id(p_content_type text, p_hubspot_id text) returns text
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return case when p_content_type = 'hubdb_rows' then split_part(p_hubspot_id, ':', 2) else p_hubspot_id end;
end;
$$;

-- ==== supabase/schemas/0472_function_patch_fields_of.sql ====
-- private.patch_fields_of(item, patch): HubSpot's values of the fields a patch
-- sets, as an object of the same shape (an object-valued field, a HubDB row's
-- `values`, sparse: only the patch's keys); a field the item lacks is JSON
-- null. What a plan shows as `before` (and `current` beside ours for a
-- conflict), and what a restore writes back from the pre-image. Immutable;
-- owner only.
create function private.patch_fields_of(p_item jsonb, p_patch jsonb) returns jsonb
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return (
    select coalesce(jsonb_object_agg(e.key,
             case when jsonb_typeof(e.value) = 'object'
                  then (select coalesce(jsonb_object_agg(c.key, coalesce(p_item -> e.key -> c.key, 'null'::jsonb)), '{}'::jsonb)
                          from jsonb_each(e.value) c)
                  else coalesce(p_item -> e.key, 'null'::jsonb) end), '{}'::jsonb)
      from jsonb_each(p_patch) e);
end;
$$;

-- ==== supabase/schemas/0473_function_patch_is_applied.sql ====
-- private.patch_is_applied(item, patch): whether HubSpot's item already holds
-- every value the patch sets (an object-valued field compared key by key;
-- JSON equality, so 1 = 1.0): the apply's "target already there" and a
-- retried batch's "our own earlier write". Immutable; owner only.
create function private.patch_is_applied(p_item jsonb, p_patch jsonb) returns boolean
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return p_item is not null and private.patch_fields_of(p_item, p_patch) = p_patch;
end;
$$;

-- ==== supabase/schemas/0474_function_check_edit_patch.sql ====
-- private.check_edit_patch(type, patch): refuses (22023, naming the field) a
-- patch that is not a non-empty JSON object (at most 256 KiB) whose keys are
-- editable fields of the type (private.editable_fields) with values of their
-- JSON type: `string` a string or null, `integer` a whole number, `number` a
-- number, `boolean`, `array_of_integers` an array of whole numbers, `object`
-- a non-empty object (a HubDB row's values, sparse by column key). A type
-- without editable fields is refused whole. The content_edits trigger's check;
-- owner only.
create function private.check_edit_patch(p_content_type text, p_patch jsonb) returns void
language plpgsql
stable
set search_path = ''
as $$
declare
  v_field record;
  v_editable text;
begin
  select string_agg(f.field, ', ' order by f.field) into v_editable
    from private.editable_fields f where f.content_type = p_content_type;
  if v_editable is null then
    raise exception 'edit: % items are not editable', coalesce(p_content_type, 'null') using errcode = '22023';
  end if;
  if jsonb_typeof(p_patch) is distinct from 'object' or p_patch = '{}'::jsonb then
    raise exception 'edit: the patch must be a non-empty JSON object of fields (editable fields of %: %)', p_content_type, v_editable
      using errcode = '22023';
  end if;
  if octet_length(p_patch::text) > 262144 then
    raise exception 'edit: the patch is over 256 KiB' using errcode = '22023';
  end if;
  for v_field in
    select e.key, e.value, f.json_type
      from jsonb_each(p_patch) e
      left join private.editable_fields f on f.content_type = p_content_type and f.field = e.key
     order by e.key
  loop
    if v_field.json_type is null then
      raise exception 'edit: "%" is not an editable field of % (editable: %)', left(v_field.key, 100), p_content_type, v_editable
        using errcode = '22023';
    end if;
    if not (case v_field.json_type
         when 'string' then jsonb_typeof(v_field.value) in ('string', 'null')
         when 'integer' then jsonb_typeof(v_field.value) = 'number' and (v_field.value #>> '{}')::numeric % 1 = 0
         when 'number' then jsonb_typeof(v_field.value) = 'number'
         when 'boolean' then jsonb_typeof(v_field.value) = 'boolean'
         when 'array_of_integers' then jsonb_typeof(v_field.value) = 'array'
           and not jsonb_path_exists(v_field.value, '$[*] ? (@.type() != "number" || @.floor() != @)')
         when 'object' then jsonb_typeof(v_field.value) = 'object' and v_field.value <> '{}'::jsonb
         else false end) then
      raise exception 'edit: "%" of % must be %, got %', v_field.key, p_content_type,
        case v_field.json_type
          when 'string' then 'a string or null'
          when 'integer' then 'a whole number'
          when 'number' then 'a number'
          when 'boolean' then 'true or false'
          when 'array_of_integers' then 'an array of whole numbers'
          else 'a non-empty object (the changed columns and their values)' end,
        left(v_field.value::text, 100)
        using errcode = '22023';
    end if;
  end loop;
end;
$$;

-- ==== supabase/schemas/0475_function_fill_content_edit.sql ====
-- private.fill_content_edit(): before an edit is stored or its item or patch
-- changes: sets its owner from the portal (a portal that is not the signed-in
-- writer's is "not found", before anything about its items can show), checks
-- the patch (private.check_edit_patch) and that the item is live in the
-- portal's copy (public.hubspot_content), raising 22023 (P0002 for the portal)
-- so nothing is stored; stamps updated_at. Definer: the registry and the copy
-- are not the writer's to read. The trigger of public.content_edits.
create function private.fill_content_edit() returns trigger
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
begin
  if tg_op = 'INSERT' or new.portal_id is distinct from old.portal_id then
    select p.owner_id into new.owner_id from public.portals p where p.id = new.portal_id;
    if not found or (v_uid is not null and new.owner_id <> v_uid) then
      raise exception 'edit: portal % not found', new.portal_id using errcode = 'P0002';
    end if;
  end if;
  perform private.check_edit_patch(new.content_type, new.patch);
  if tg_op = 'INSERT' or new.portal_id is distinct from old.portal_id or new.content_type is distinct from old.content_type
     or new.hubspot_id is distinct from old.hubspot_id then
    -- By its key alone, then live or not: with `deleted_at is null` in the lookup the planner may read the
    -- type's partial index of live items whole (hubspot_content_live_idx) for every edit stored.
    if not coalesce((select c.deleted_at is null from public.hubspot_content c
                      where c.portal_id = new.portal_id and c.content_type = new.content_type and c.hubspot_id = new.hubspot_id
                      limit 1), false) then
      raise exception 'edit: % % is not a live item of this portal''s copy (fetch it first)', new.content_type, left(new.hubspot_id, 200)
        using errcode = '22023';
    end if;
  end if;
  new.updated_at := now();
  return new;
end;
$$;

-- On the columns an edit's writer sets: the service role's status changes (plan, discard) skip it.
create trigger content_edits_fill
  before insert or update of portal_id, content_type, hubspot_id, patch, base_updated_at
  on public.content_edits
  for each row execute function private.fill_content_edit();

-- ==== supabase/schemas/0476_function_csv_cell_value.sql ====
-- private.csv_cell_value(json_type, cell): an edited CSV cell read back as
-- the JSON value of an editable field's type, the inverse of
-- private.csv_cells: a `string` cell as it is (an empty unquoted cell, SQL
-- NULL, is JSON null), less the apostrophe our export put before a leading
-- = + - @ tab or CR; `integer` and `number` as numbers, `boolean` as true or
-- false (any case), `array_of_integers` and `object` as JSON text. SQL NULL
-- when the cell is not a value of the type (import_csv_edits: `wrong_type`).
-- Immutable, no exceptions raised or caught; owner only.
create function private.csv_cell_value(p_json_type text, p_cell text) returns jsonb
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
declare
  v jsonb;
begin
  if p_json_type = 'string' then
    if p_cell is null then
      return 'null'::jsonb;
    end if;
    return to_jsonb(case when p_cell ~ e'^''[=+\\-@\\t\\r]' then substr(p_cell, 2) else p_cell end);
  end if;
  if p_cell is null then
    return null;
  end if;
  if p_json_type = 'integer' then
    return case when p_cell ~ '^\s*-?[0-9]{1,18}\s*$' then to_jsonb(btrim(p_cell)::bigint) end;
  elsif p_json_type = 'number' then
    return case when p_cell ~ '^\s*-?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][-+]?[0-9]{1,3})?\s*$'
                then to_jsonb(btrim(p_cell)::numeric) end;
  elsif p_json_type = 'boolean' then
    return case lower(btrim(p_cell)) when 'true' then 'true'::jsonb when 'false' then 'false'::jsonb end;
  elsif p_json_type in ('array_of_integers', 'object') then
    if not pg_input_is_valid(p_cell, 'jsonb') then
      return null;
    end if;
    v := p_cell::jsonb;
    if p_json_type = 'object' then
      return case when jsonb_typeof(v) = 'object' then v end;
    end if;
    return case when jsonb_typeof(v) = 'array' and not jsonb_path_exists(v, '$[*] ? (@.type() != "number" || @.floor() != @)')
                then v end;
  end if;
  return null;
end;
$$;

-- ==== supabase/schemas/0477_function_publish_answer.sql ====
-- private.publish_answer(body): HubSpot's answer text to a batch read or
-- update, parsed once: one answer object (`results`, optionally `errors`, as
-- the CMS v3 batch endpoints answer 200 and 207), or a JSON array of them (a
-- batch that took several requests: HubDB rows table by table, redirects one
-- by one, assembled by the worker as text) merged into
-- {results, errors, pending, read_at}: `pending` are HubSpot's answers to the
-- first step of a write whose last step's outcome is unknown (a draft PATCHed
-- and not known pushed live, HubDB draft rows not known published: the
-- worker's `pending` array), `read_at` the earliest `startedAt` of the
-- answers (HubSpot's clock when a batch read started; null when none says).
-- Refuses (22004 / 22P02 / 22023) a missing body, invalid JSON, an answer
-- without a results array, a result or pending item without an id. Stable
-- (a startedAt without an offset reads in the session's time zone); for the
-- publish holder functions; owner only.
create function private.publish_answer(p_body text) returns jsonb
language plpgsql
stable
set search_path = ''
as $$
declare
  v_body jsonb;
  v_answers jsonb;
  v_results jsonb;
  v_errors jsonb;
  v_pending jsonb;
begin
  if p_body is null then
    raise exception 'HubSpot''s answer is required' using errcode = '22004';
  end if;
  if not pg_input_is_valid(p_body, 'jsonb') then
    raise exception 'HubSpot''s answer is not valid JSON (%)', (select e.message from pg_input_error_info(p_body, 'jsonb') e)
      using errcode = '22P02';
  end if;
  v_body := p_body::jsonb;
  v_answers := case jsonb_typeof(v_body) when 'array' then v_body when 'object' then jsonb_build_array(v_body) end;
  if v_answers is null or exists (select 1 from jsonb_array_elements(v_answers) a
                                   where jsonb_typeof(a) <> 'object' or coalesce(jsonb_typeof(a -> 'results'), '') <> 'array'
                                      or coalesce(jsonb_typeof(a -> 'errors'), 'array') <> 'array'
                                      or coalesce(jsonb_typeof(a -> 'pending'), 'array') <> 'array') then
    raise exception 'HubSpot''s answer must be an object with a results array (and perhaps errors and pending arrays), or an array of them'
      using errcode = '22023';
  end if;
  select coalesce(jsonb_agg(r), '[]'::jsonb) into v_results
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(a -> 'results') r;
  if exists (select 1 from jsonb_array_elements(v_results) r
              where jsonb_typeof(r) <> 'object' or coalesce(jsonb_typeof(r -> 'id'), '') not in ('string', 'number')
                 or r ->> 'id' = '') then
    raise exception 'every result of HubSpot''s answer must be an object with an id' using errcode = '22023';
  end if;
  select coalesce(jsonb_agg(e), '[]'::jsonb) into v_errors
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(coalesce(a -> 'errors', '[]'::jsonb)) e;
  select coalesce(jsonb_agg(d), '[]'::jsonb) into v_pending
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(coalesce(a -> 'pending', '[]'::jsonb)) d;
  if exists (select 1 from jsonb_array_elements(v_pending) d
              where jsonb_typeof(d) <> 'object' or coalesce(jsonb_typeof(d -> 'id'), '') not in ('string', 'number')
                 or d ->> 'id' = '') then
    raise exception 'every pending item of HubSpot''s answer must be an object with an id' using errcode = '22023';
  end if;
  return jsonb_build_object('results', v_results, 'errors', v_errors, 'pending', v_pending,
    'read_at', (select to_jsonb(min((a ->> 'startedAt')::timestamptz)) from jsonb_array_elements(v_answers) a
                 where jsonb_typeof(a -> 'startedAt') = 'string' and pg_input_is_valid(a ->> 'startedAt', 'timestamptz')));
end;
$$;

-- ==== supabase/schemas/0478_function_publish_refusal.sql ====
-- private.publish_refusal(body): HubSpot's answer to a write it refused whole
-- (a 4xx other than 429: nothing applied), as private.publish_answer's shape
-- with no results, its `errors` that name inputs (context ids), and the
-- refusal itself (`refusal`: HubSpot's error object, or {message: the body's
-- first 2,000 characters} when it is not JSON), which every sent item gets.
-- Immutable; for record_publish_batch and record_restore_batch; owner only.
create function private.publish_refusal(p_body text) returns jsonb
language plpgsql
immutable
set search_path = ''
as $$
declare
  v_body jsonb;
begin
  if p_body is not null and pg_input_is_valid(p_body, 'jsonb') then
    v_body := p_body::jsonb;
  end if;
  if jsonb_typeof(v_body) is distinct from 'object' then
    v_body := jsonb_build_object('message', coalesce(left(p_body, 2000), 'HubSpot refused the request'));
  end if;
  return jsonb_build_object(
    'results', '[]'::jsonb,
    'errors', case when jsonb_typeof(v_body -> 'errors') = 'array'
                   then (select coalesce(jsonb_agg(e), '[]'::jsonb) from jsonb_array_elements(v_body -> 'errors') e
                          where jsonb_typeof(e) = 'object')
                   else '[]'::jsonb end,
    'refusal', v_body);
end;
$$;

-- ==== supabase/schemas/0479_function_publish_holder.sql ====
-- private.publish_holder(job, fencing_token, kinds, lock): the fence of every publish
-- holder call, as 0341-0348 fence theirs: the job is running with this
-- fencing token and an unexpired job lease, else 55000 (nothing written); a
-- job of another kind is 22023; a job whose run has no plan P0002. Returns
-- the job row (locked FOR UPDATE when p_lock: the caller writes) and its plan
-- (publish_plans by the run of the job's kind). For the publish holder
-- functions; owner only.
create function private.publish_holder(p_job_id bigint, p_fencing_token bigint, p_kinds text[], p_lock boolean)
returns table (job public.jobs, plan_id uuid)
language plpgsql
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_plan uuid;
begin
  if p_job_id is null or p_fencing_token is null then
    raise exception 'job id and fencing token are required' using errcode = '22004';
  end if;
  if p_lock then
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       for update;
  else
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now();
  end if;
  if v_job.id is null then
    raise exception 'job % is not held with this fencing token (stop working on it)', p_job_id using errcode = '55000';
  end if;
  if v_job.kind <> all (p_kinds) then
    raise exception 'job % is a % job, not a % job', p_job_id, v_job.kind, array_to_string(p_kinds, ' or ') using errcode = '22023';
  end if;
  select p.id into v_plan from public.publish_plans p
   where case v_job.kind when 'plan' then p.plan_run_id when 'publish' then p.publish_run_id else p.restore_run_id end = v_job.run_id;
  if v_plan is null then
    raise exception 'job % belongs to no plan', p_job_id using errcode = 'P0002';
  end if;
  return query select v_job, v_plan;
end;
$$;

-- ==== supabase/schemas/0480_function_check_job_items.sql ====
-- private.check_job_items(job, plan, ids): refuses (22023, nothing written) a
-- batch that is not 1 to 1000 ids of items of the job's plan and content
-- type. Each id is one probe of the primary key: a plan's items of one type
-- can be thousands, and a fresh plan has no statistics yet (an anti join over
-- them scanned the type's items once per id; a hash join, the whole table).
-- For the publish holder functions; owner only.
create function private.check_job_items(p_job public.jobs, p_plan_id uuid, p_item_ids bigint[]) returns void
language plpgsql
stable
set search_path = ''
as $$
declare
  v_stray bigint;
begin
  if p_item_ids is null or cardinality(p_item_ids) not between 1 and 1000 or array_position(p_item_ids, null) is not null then
    raise exception 'a batch is 1 to 1000 item ids' using errcode = '22023';
  end if;
  -- LIMIT 1 in the lateral lookup keeps it a probe per id (as save_page's lookup): never a join over the table.
  select u.id into v_stray from unnest(p_item_ids) u(id)
    left join lateral (select i.plan_id, i.content_type from public.publish_items i where i.id = u.id limit 1) i on true
   where i.plan_id is distinct from p_plan_id or i.content_type is distinct from p_job.content_type
   limit 1;
  if v_stray is not null then
    raise exception 'item % is not one of job %''s (its plan''s %)', v_stray, p_job.id, p_job.content_type using errcode = '22023';
  end if;
end;
$$;

-- ==== supabase/schemas/0481_function_advance_publish_job.sql ====
-- private.advance_publish_job(job, done): a recorded batch's effect on the
-- plan, publish or restore job row its caller holds FOR UPDATE: progress_done
-- plus the items it settled, the job lease extended once half of it is spent
-- (as advance_fetch_job), the run marked started. Owner only.
create function private.advance_publish_job(p_job public.jobs, p_done integer) returns void
language plpgsql
set search_path = ''
as $$
begin
  update public.jobs j
     set progress_done = j.progress_done + p_done,
         lease_expires_at = case when j.lease_expires_at < now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds) / 2.0)
                                 then now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds))
                                 else j.lease_expires_at end,
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
end;
$$;

-- ==== supabase/schemas/0482_function_write_published_copy.sql ====
-- private.write_published_copy(job, ids, items): HubSpot's answers for items a
-- publish or restore job wrote (or found written by its own earlier request)
-- into the copy: each live public.hubspot_content row of the job's portal and
-- type among `ids` takes the answer as the fetch would store it (a HubDB row
-- with its tableId merged in), HubSpot's update time and a new change_seq,
-- unless the copy already holds that time or a newer one (a fetch stored it
-- meanwhile); tombstones are left alone. Returns how many rows it wrote.
-- The change feed's rule (0160: within a portal and type, change_seq follows
-- commit order) holds because the numbers are drawn under the lock every fetch
-- write holds: the type's active fetch job row, FOR UPDATE (waiting for a page
-- being saved); and no fetch job can start writing meanwhile, because the
-- portal's claim lock (claim_jobs' advisory lock, taken here and held to the
-- end of the transaction) keeps any job of the portal from being claimed until
-- this commits. A restore and a publish of one portal serialise on that lock
-- too. The caller holds its own job row. Owner only. docs/decisions/0070.
create function private.write_published_copy(p_job public.jobs, p_ids text[], p_items jsonb[]) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_written integer;
begin
  if coalesce(cardinality(p_ids), 0) = 0 then
    return 0;
  end if;
  perform pg_advisory_xact_lock(1903520117, hashtext(p_job.portal_id::text));
  perform 1 from public.jobs f
   where f.portal_id = p_job.portal_id and f.kind = 'fetch' and f.content_type = p_job.content_type
     and f.status in ('pending', 'running')
     for update;
  with incoming as (
    -- One probe of the unique index per item, by its key alone (LIMIT 1, as save_page's lookup).
    select distinct on (x.id) s.content_id,
           case when p_job.content_type = 'hubdb_rows'
                then x.item || jsonb_build_object('tableId', split_part(x.id, ':', 1)) else x.item end as data,
           private.hubspot_item_updated_at(x.item) as updated_at
      from unnest(p_ids, p_items) as x(id, item)
     cross join lateral (
       select c0.id as content_id from public.hubspot_content c0
        where c0.portal_id = p_job.portal_id and c0.content_type = p_job.content_type and c0.hubspot_id = x.id
        limit 1) s
     order by x.id
  )
  update public.hubspot_content c
     set data = i.data, hubspot_updated_at = coalesce(i.updated_at, c.hubspot_updated_at), fetched_at = now(),
         change_seq = nextval('private.content_change_seq')
    from incoming i
   where c.id = i.content_id
     and c.deleted_at is null
     and (c.hubspot_updated_at is null or i.updated_at is null or c.hubspot_updated_at < i.updated_at);
  get diagnostics v_written = row_count;
  return v_written;
end;
$$;

-- ==== supabase/schemas/0483_function_return_plan_edits.sql ====
-- private.return_plan_edits(plan): a plan that failed or was discarded gives
-- its edits back: each planned edit of it is pending again, or discarded
-- when a newer pending edit of its item exists (one pending edit per item).
-- Returns how many are pending again. For create_publish_plan,
-- discard_publish_plan and settlement (private.settle_publish_run); owner only.
create function private.return_plan_edits(p_plan_id uuid) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_pending integer;
begin
  with returned as (
    update public.content_edits e
       set status = case when n.id is null then 'pending' else 'discarded' end,
           plan_id = case when n.id is null then null else e.plan_id end,
           updated_at = now()
      from public.content_edits e0
      left join lateral (select n0.id from public.content_edits n0
                          where n0.portal_id = e0.portal_id and n0.content_type = e0.content_type
                            and n0.hubspot_id = e0.hubspot_id and n0.status = 'pending'
                          limit 1) n on true
     where e0.id = e.id and e.plan_id = p_plan_id and e.status = 'planned'
    returning e.status
  )
  select count(*) filter (where r.status = 'pending') into v_pending from returned r;
  return v_pending;
end;
$$;

-- ==== supabase/schemas/0484_function_fail_publish_items.sql ====
-- private.fail_publish_items(run, all): a publish or restore run's items that
-- will get no final outcome become `failed` (restore: restore_outcome), with
-- the job's last error: those of its jobs that failed or were stopped, or
-- (p_all, the run finished) every item still without one. An item `writing`
-- (or `restoring`) when its job ended may have been written: its message says
-- so (`writes` shows it was sent). An operator's retry_job reopens the job:
-- next_publish_items hands failed items out again. Returns how many. Called
-- by settlement (count_finished_jobs, settle_run, settle_publish_run), which
-- holds the run's lock; owner only.
create function private.fail_publish_items(p_run_id uuid, p_all boolean) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_kind text;
  v_plan uuid;
  v_failed integer;
begin
  select r.kind into v_kind from public.runs r where r.id = p_run_id;
  if v_kind = 'publish' then
    select p.id into v_plan from public.publish_plans p where p.publish_run_id = p_run_id;
  elsif v_kind = 'restore' then
    select p.id into v_plan from public.publish_plans p where p.restore_run_id = p_run_id;
  end if;
  if v_plan is null then
    return 0;
  end if;
  with ended as (
    select j.content_type,
           coalesce(left(j.last_error, 500),
                    case when j.status = 'stopped' then 'the run was stopped' else 'the job ended' end) as reason
      from public.jobs j
     where j.run_id = p_run_id and (p_all or j.status in ('failed', 'stopped'))
  ), failed as (
    update public.publish_items i
       set outcome = case when v_kind = 'publish' then 'failed' else i.outcome end,
           outcome_message = case when v_kind = 'publish'
             then case when i.outcome = 'writing'
                       then format('its job ended after our write was sent, before HubSpot''s answer was recorded (it may be written): %s', e.reason)
                       else format('not written: %s', e.reason) end
             else i.outcome_message end,
           restore_outcome = case when v_kind = 'restore' then 'failed' else i.restore_outcome end,
           restore_message = case when v_kind = 'restore'
             then case when i.restore_outcome = 'restoring'
                       then format('its job ended after our write was sent, before HubSpot''s answer was recorded (it may be restored): %s', e.reason)
                       else format('not restored: %s', e.reason) end
             else i.restore_message end,
           updated_at = now()
      from ended e
     where i.plan_id = v_plan and i.content_type = e.content_type
       and case when v_kind = 'publish'
                then i.plan_status = 'ready' and (i.outcome is null or i.outcome = 'writing')
                else i.outcome in ('applied', 'scheduled') and (i.restore_outcome is null or i.restore_outcome = 'restoring') end
    returning 1
  )
  select count(*) into v_failed from failed;
  return v_failed;
end;
$$;

-- ==== supabase/schemas/0485_function_settle_publish_run.sql ====
-- private.settle_publish_run(run): what a finished plan, publish or restore
-- run's settlement adds (settle_finished_run calls it first, holding the
-- run's lock); returns the run row as it now stands. A plan run settles its
-- plan (still `planning`): `ready` when the run completed, approvable until
-- its end plus private.publish_settings.plan_fresh_minutes (fresh_until),
-- else `failed`, its edits pending again (private.return_plan_edits); the
-- counts per plan status kept. A publish or restore run first fails the items
-- left without a final outcome (private.fail_publish_items), then settles by
-- its items, not its jobs: every item applied, scheduled, unchanged or
-- overwritten (restore: restored) → `completed`, some → `partially_failed`, none →
-- `failed`; a stopped run stays `stopped`. Owner only. docs/publish.md.
create function private.settle_publish_run(p_run public.runs) returns public.runs
language plpgsql
set search_path = ''
as $$
declare
  v_plan uuid;
  v_status text;
  v_total integer;
  v_good integer;
  v_run public.runs;
begin
  if p_run.kind = 'plan' then
    update public.publish_plans p
       set status = case when p_run.status = 'completed' then 'ready' else 'failed' end,
           planned_at = p_run.finished_at,
           fresh_until = case when p_run.status = 'completed'
                              then p_run.finished_at + make_interval(mins => (select s.plan_fresh_minutes from private.publish_settings s where s.id)) end,
           items_ready = c.ready, items_conflict = c.conflict, items_invalid = c.invalid,
           items_unchanged = c.unchanged, items_missing = c.missing
      from (select count(*) filter (where i.plan_status = 'ready')::integer as ready,
                   count(*) filter (where i.plan_status = 'conflict')::integer as conflict,
                   count(*) filter (where i.plan_status = 'invalid')::integer as invalid,
                   count(*) filter (where i.plan_status = 'unchanged')::integer as unchanged,
                   count(*) filter (where i.plan_status = 'missing')::integer as missing
              from public.publish_items i
              join public.publish_plans p0 on p0.id = i.plan_id
             where p0.plan_run_id = p_run.id) c
     where p.plan_run_id = p_run.id and p.status = 'planning'
    returning p.id, p.status into v_plan, v_status;
    if v_status = 'failed' then
      perform private.return_plan_edits(v_plan);
    end if;
    return p_run;
  end if;
  if p_run.kind not in ('publish', 'restore') then
    return p_run;
  end if;
  perform private.fail_publish_items(p_run.id, true);
  if p_run.kind = 'publish' then
    select count(*), count(*) filter (where i.outcome in ('applied', 'scheduled', 'unchanged', 'overwritten'))
      into v_total, v_good
      from public.publish_plans p join public.publish_items i on i.plan_id = p.id
     where p.publish_run_id = p_run.id and i.plan_status = 'ready';
  else
    select count(*), count(*) filter (where i.restore_outcome = 'restored')
      into v_total, v_good
      from public.publish_plans p join public.publish_items i on i.plan_id = p.id
     where p.restore_run_id = p_run.id and i.outcome in ('applied', 'scheduled');
  end if;
  if p_run.status = 'stopped' or v_total = 0 then
    return p_run;
  end if;
  v_status := case when v_good = v_total then 'completed' when v_good = 0 then 'failed' else 'partially_failed' end;
  if v_status = p_run.status then
    return p_run;
  end if;
  update public.runs r set status = v_status where r.id = p_run.id returning r.* into v_run;
  return v_run;
end;
$$;

-- ==== supabase/schemas/0486_function_publish_run_message.sql ====
-- private.publish_run_message(run): the notification text of a finished plan,
-- publish or restore run, with its items' counts (settle_finished_run uses it
-- for these kinds instead of private.run_notification_message). Stable, reads
-- its plan's items; owner only.
create function private.publish_run_message(p_run public.runs) returns text
language plpgsql
stable
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_c record;
begin
  select * into v_plan from public.publish_plans p
   where case p_run.kind when 'plan' then p.plan_run_id when 'publish' then p.publish_run_id else p.restore_run_id end = p_run.id;
  if p_run.kind = 'plan' then
    if v_plan.status = 'ready' then
      return format('Plan ready: %s items, %s to publish, %s conflicts, %s unchanged, %s missing, %s invalid. Approve it by %s UTC.',
        v_plan.items_total, v_plan.items_ready, v_plan.items_conflict, v_plan.items_unchanged, v_plan.items_missing,
        v_plan.items_invalid, to_char(v_plan.fresh_until at time zone 'UTC', 'YYYY-MM-DD HH24:MI'));
    end if;
    return format('Plan %s: %s of %s items read; its edits are pending again.%s',
      case p_run.status when 'stopped' then 'stopped' else 'failed' end,
      v_plan.items_ready + v_plan.items_conflict + v_plan.items_unchanged + v_plan.items_missing + v_plan.items_invalid,
      v_plan.items_total,
      coalesce(' First error: ' || left((select f.last_error from public.jobs f where f.run_id = p_run.id and f.status = 'failed'
                                          order by f.finished_at, f.id limit 1), 500), ''));
  end if;
  if p_run.kind = 'publish' then
    select count(*) as total,
           count(*) filter (where i.outcome = 'applied') as applied,
           count(*) filter (where i.outcome = 'scheduled') as scheduled,
           count(*) filter (where i.outcome = 'overwritten') as overwritten,
           count(*) filter (where i.outcome = 'unchanged') as unchanged,
           count(*) filter (where i.outcome = 'conflict') as conflict,
           count(*) filter (where i.outcome = 'invalid') as invalid,
           count(*) filter (where i.outcome = 'failed') as failed
      into v_c
      from public.publish_items i where i.plan_id = v_plan.id and i.plan_status = 'ready';
    return format('Publish run %s: %s of %s items applied%s%s%s%s%s%s.',
      replace(p_run.status, '_', ' '), v_c.applied + v_c.scheduled + v_c.overwritten, v_c.total,
      case when v_c.scheduled > 0
           then format(' (%s scheduled: HubSpot publishes them at %s UTC)', v_c.scheduled,
                       to_char(v_plan.publish_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI'))
           else '' end,
      case when v_c.unchanged > 0 then format(', %s already as planned', v_c.unchanged) else '' end,
      case when v_c.conflict > 0 then format(', %s conflicts (changed in HubSpot, not written)', v_c.conflict) else '' end,
      case when v_c.invalid > 0 then format(', %s refused by HubSpot', v_c.invalid) else '' end,
      case when v_c.failed > 0 then format(', %s failed', v_c.failed) else '' end,
      case when v_c.overwritten > 0 then format('; %s overwrote an edit made in HubSpot meanwhile (listed with the revision to restore)', v_c.overwritten) else '' end);
  end if;
  select count(*) as total,
         count(*) filter (where i.restore_outcome = 'restored') as restored,
         count(*) filter (where i.restore_outcome = 'conflict') as conflict,
         count(*) filter (where i.restore_outcome = 'invalid') as invalid,
         count(*) filter (where i.restore_outcome = 'failed') as failed
    into v_c
    from public.publish_items i where i.plan_id = v_plan.id and i.outcome in ('applied', 'scheduled');
  return format('Restore run %s: %s of %s items restored%s%s%s.',
    replace(p_run.status, '_', ' '), v_c.restored, v_c.total,
    case when v_c.conflict > 0 then format(', %s changed in HubSpot since our write (not restored)', v_c.conflict) else '' end,
    case when v_c.invalid > 0 then format(', %s refused by HubSpot', v_c.invalid) else '' end,
    case when v_c.failed > 0 then format(', %s failed', v_c.failed) else '' end);
end;
$$;

-- ==== supabase/schemas/0487_function_create_publish_plan.sql ====
-- public.create_publish_plan(portal, user, types, mode, publish_at): a plan
-- of the portal's pending edits (of the given types; null: all): the user's
-- earlier plans of the portal that were never approved (ready or failed)
-- covering one of these types are discarded first, their edits pending again
-- (private.return_plan_edits); then the pending edits become `planned`, one
-- item each (in content type and HubSpot id order: HubDB rows grouped by
-- table), and a `plan` run reads them (create_run, one job per type, totals =
-- items per type). Refuses, with nothing changed: a portal that is not the
-- user's (P0002), disconnected (55000), no pending edits (P0002), more than
-- private.publish_settings.max_edits_per_plan (54000), a plan of the portal
-- still planning one of the types (55006, hint busy), draft or schedule mode
-- for types other than pages and posts, schedule without a future time
-- (22023). Takes the portal's plan lock (an advisory lock: one plan made at
-- a time per portal), then the edits' rows. The service role only (the
-- orchestrator, for the signed-in user). docs/publish.md.
create function public.create_publish_plan(
  p_portal_id uuid, p_user uuid, p_content_types text[] default null, p_mode text default 'live',
  p_publish_at timestamptz default null
) returns table (plan_id uuid, run_id uuid, items integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal public.portals;
  v_settings private.publish_settings;
  v_plan uuid;
  v_old uuid;
  v_types text[];
  v_totals integer[];
  v_items integer;
  v_run record;
begin
  if p_portal_id is null or p_user is null then
    raise exception 'create_publish_plan: portal and user are required' using errcode = '22004';
  end if;
  if p_mode is null or p_mode not in ('live', 'draft', 'schedule') then
    raise exception 'create_publish_plan: mode must be live, draft or schedule' using errcode = '22023';
  end if;
  if (p_mode = 'schedule') <> (p_publish_at is not null) then
    raise exception 'create_publish_plan: a publish time goes with schedule mode, and only with it' using errcode = '22023';
  end if;
  if p_publish_at <= now() then
    raise exception 'create_publish_plan: the publish time must be in the future' using errcode = '22023';
  end if;
  if p_content_types is not null and not private.are_known_content_types(p_content_types) then
    raise exception 'create_publish_plan: content types must be 1-8 distinct known types, got %', p_content_types using errcode = '22023';
  end if;
  select * into v_portal from public.portals p where p.id = p_portal_id and p.owner_id = p_user;
  if not found then
    raise exception 'create_publish_plan: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  if v_portal.disconnected_at is not null then
    raise exception 'create_publish_plan: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select * into v_settings from private.publish_settings s where s.id;

  -- One plan made at a time per portal (a lock class of its own; claim_jobs' is 1903520117).
  perform pg_advisory_xact_lock(1903520118, hashtext(p_portal_id::text));
  if exists (select 1 from public.publish_plans p
              where p.portal_id = p_portal_id and p.status = 'planning'
                and (p_content_types is null or p.content_types && p_content_types)) then
    raise exception 'create_publish_plan: a plan of this portal is still being made for one of these types: wait for it'
      using errcode = '55006', hint = 'busy';
  end if;
  for v_old in
    update public.publish_plans p set status = 'discarded'
     where p.portal_id = p_portal_id and p.status in ('ready', 'failed')
       and (p_content_types is null or p.content_types && p_content_types)
    returning p.id
  loop
    perform private.return_plan_edits(v_old);
  end loop;

  insert into public.publish_plans (portal_id, owner_id, created_by, content_types, mode, publish_at)
  values (p_portal_id, v_portal.owner_id, p_user,
          coalesce(p_content_types, array(select distinct f.content_type from private.editable_fields f order by 1)), p_mode, p_publish_at)
  returning id into v_plan;

  with taken as (
    update public.content_edits e
       set status = 'planned', plan_id = v_plan, updated_at = now()
     where e.portal_id = p_portal_id and e.status = 'pending'
       and (p_content_types is null or e.content_type = any (p_content_types))
    returning e.id, e.content_type, e.hubspot_id, e.base_updated_at, e.patch
  ), inserted as (
    insert into public.publish_items (plan_id, portal_id, owner_id, content_type, hubspot_id, edit_id, base_updated_at, after)
    select v_plan, p_portal_id, v_portal.owner_id, t.content_type, t.hubspot_id, t.id, t.base_updated_at, t.patch
      from taken t
     order by t.content_type, t.hubspot_id
    returning content_type
  ), per_type as (
    select i.content_type, count(*)::integer as n from inserted i group by i.content_type
  )
  select array_agg(pt.content_type order by pt.content_type), array_agg(pt.n order by pt.content_type), sum(pt.n)::integer
    into v_types, v_totals, v_items
    from per_type pt;

  if v_types is null then
    raise exception 'create_publish_plan: no pending edits to plan' using errcode = 'P0002', hint = 'no_edits';
  end if;
  if v_items > v_settings.max_edits_per_plan then
    raise exception 'create_publish_plan: % pending edits, more than one plan takes (%)', v_items, v_settings.max_edits_per_plan
      using errcode = '54000', hint = 'too_many';
  end if;
  if p_mode <> 'live' and exists (select 1 from unnest(v_types) t where t not in ('site_pages', 'landing_pages', 'blog_posts')) then
    raise exception 'create_publish_plan: % mode writes pages and posts only: plan the other types (%) apart',
      p_mode, array_to_string(array(select t from unnest(v_types) t where t not in ('site_pages', 'landing_pages', 'blog_posts')), ', ')
      using errcode = '22023';
  end if;

  select * into v_run from public.create_run(p_portal_id, p_user, 'plan', v_types, v_totals);
  if v_run.run_id is null or cardinality(v_run.duplicate_types) > 0 then
    raise exception 'create_publish_plan: a plan of this portal is still being made for %: wait for it',
      array_to_string(v_run.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set content_types = v_types, plan_run_id = v_run.run_id, items_total = v_items
   where p.id = v_plan;
  return query select v_plan, v_run.run_id, v_items;
end;
$$;

-- ==== supabase/schemas/0488_function_import_csv_edits.sql ====
-- public.import_csv_edits(portal, user, type, columns, rows): an edited
-- export CSV of one content type, parsed by the caller into its header
-- (`p_columns`) and rows (`p_rows`: a JSON array of rows, each an array of
-- cells in header order, a string or null: null is an empty unquoted cell, ''
-- a quoted empty one), made into pending edits (source csv) all or nothing.
-- The header holds hubspot_id, hubspot_updated_at and otherwise only the
-- type's export columns (private.export_columns). Each row's item must be
-- live in the copy, its hubspot_updated_at the copy's (else `stale`: it
-- changed since the export); each other cell is compared with the item's own
-- export cell (private.csv_cells, formula neutralising included): equal is
-- not an edit, nor is a cell whose value equals the stored one (TRUE for
-- true); a differing read-only cell is `read_only`; a differing editable cell
-- is read back as its type (private.csv_cell_value: our export's leading
-- apostrophe removed), `wrong_type` when it is not one, and a HubDB row's
-- values keep only the changed columns. Any error: nothing is stored and
-- `errors` lists them all (at most 1,000, then one `too_many_errors`), each
-- {row (1-based data row; null for the header), column, code, message} with
-- code unknown_column, duplicate_column, missing_column, row_shape,
-- not_in_copy, duplicate_row, stale, read_only or wrong_type. No error: one
-- pending edit per row with changes (base = the row's hubspot_updated_at),
-- replacing the item's pending edit; `edits` is how many. Raises, with
-- nothing changed: a portal not the user's (P0002), a type without editable
-- fields, rows not a JSON array (22023), more rows than
-- private.publish_settings.max_edits_per_plan (54000). The service role only
-- (the orchestrator, for the signed-in user). docs/publish.md.
create function public.import_csv_edits(
  p_portal_id uuid, p_user uuid, p_content_type text, p_columns text[], p_rows jsonb
) returns table (edits integer, errors jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_owner uuid;
  v_settings private.publish_settings;
  v_ncols integer := coalesce(cardinality(p_columns), 0);
  v_id_pos integer;
  v_upd_pos integer;
  v_data_cols text[];
  v_data_pos integer[];
  v_errors jsonb;
  v_error_count integer;
  v_edits jsonb;
  v_count integer;
  v_max_errors constant integer := 1000;
begin
  if p_portal_id is null or p_user is null or p_content_type is null or p_columns is null or p_rows is null then
    raise exception 'import_csv_edits: portal, user, content type, columns and rows are required' using errcode = '22004';
  end if;
  select p.owner_id into v_owner from public.portals p where p.id = p_portal_id and p.owner_id = p_user;
  if not found then
    raise exception 'import_csv_edits: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  if not exists (select 1 from private.editable_fields f where f.content_type = p_content_type) then
    raise exception 'import_csv_edits: % items are not editable', p_content_type using errcode = '22023';
  end if;
  if jsonb_typeof(p_rows) <> 'array' then
    raise exception 'import_csv_edits: rows must be a JSON array of rows' using errcode = '22023';
  end if;
  select * into v_settings from private.publish_settings s where s.id;
  if jsonb_array_length(p_rows) > v_settings.max_edits_per_plan then
    raise exception 'import_csv_edits: % rows, more than one plan takes (%)', jsonb_array_length(p_rows), v_settings.max_edits_per_plan
      using errcode = '54000', hint = 'too_many';
  end if;
  if v_ncols not between 1 and 202 then
    raise exception 'import_csv_edits: the header must have 1 to 202 columns' using errcode = '22023';
  end if;

  -- The header.
  select coalesce(jsonb_agg(jsonb_build_object('row', null, 'column', h.name, 'code', h.code, 'message', h.message)
                            order by h.ord), '[]'::jsonb)
    into v_errors
    from (select c.ord, c.name, 'unknown_column' as code,
                 format('%s is not a column of the %s export', coalesce(c.name, 'an empty header cell'), p_content_type) as message
            from unnest(p_columns) with ordinality c(name, ord)
           where c.name is null
              or (c.name not in ('hubspot_id', 'hubspot_updated_at')
                  and not exists (select 1 from private.export_columns x
                                   where x.content_type = p_content_type and x.column_name = c.name))
          union all
          select max(c.ord), c.name, 'duplicate_column', format('%s is in the header more than once', c.name)
            from unnest(p_columns) with ordinality c(name, ord)
           where c.name is not null
           group by c.name having count(*) > 1
          union all
          select 0, r.name, 'missing_column', format('the header must have a %s column (the export''s own)', r.name)
            from unnest(array['hubspot_id', 'hubspot_updated_at']) r(name)
           where not exists (select 1 from unnest(p_columns) c where c = r.name)) h;
  if jsonb_array_length(v_errors) > 0 then
    return query select 0, v_errors;
    return;
  end if;

  v_id_pos := array_position(p_columns, 'hubspot_id');
  v_upd_pos := array_position(p_columns, 'hubspot_updated_at');
  select coalesce(array_agg(c.name order by c.ord), '{}'), coalesce(array_agg(c.ord::integer order by c.ord), '{}')
    into v_data_cols, v_data_pos
    from unnest(p_columns) with ordinality c(name, ord)
   where c.name not in ('hubspot_id', 'hubspot_updated_at');

  -- The rows: each row's own checks, then each of its cells that differs from the copy's.
  with r as (
    select e.ord::integer as row_no, e.cells,
           case when jsonb_typeof(e.cells) = 'array'
                then jsonb_array_length(e.cells) = v_ncols
                     and not jsonb_path_exists(e.cells, '$[*] ? (@.type() != "string" && @.type() != "null")')
                else false end as shaped
      from jsonb_array_elements(p_rows) with ordinality e(cells, ord)
  ), k as (
    select r.row_no, r.cells, r.shaped,
           case when r.shaped then nullif(r.cells ->> (v_id_pos - 1), '') end as hubspot_id,
           case when r.shaped then r.cells ->> (v_upd_pos - 1) end as updated_cell
      from r
  ), d as (
    select k.*, case when k.hubspot_id is null then 1 else row_number() over (partition by k.hubspot_id order by k.row_no) end as nth
      from k
  ), j as (
    select d.row_no, d.cells, d.hubspot_id, c.data, c.hubspot_updated_at as stored_updated,
           case when d.updated_cell ~ '^\d{4}-\d{2}-\d{2}[T ]' and pg_input_is_valid(d.updated_cell, 'timestamptz')
                then d.updated_cell::timestamptz end as base,
           case when not d.shaped then 'row_shape'
                when d.hubspot_id is null then 'not_in_copy'
                when d.nth > 1 then 'duplicate_row'
                when c.id is null or c.deleted_at is not null then 'not_in_copy'
                when d.updated_cell is null or d.updated_cell !~ '^\d{4}-\d{2}-\d{2}[T ]'
                     or not pg_input_is_valid(d.updated_cell, 'timestamptz') then 'wrong_type'
                when d.updated_cell::timestamptz is distinct from c.hubspot_updated_at then 'stale'
           end as row_code,
           d.updated_cell,
           case when jsonb_typeof(d.cells) = 'array' then jsonb_array_length(d.cells) end as width
      from d
      -- One probe of the unique index per row, by its key alone (LIMIT 1, as save_page's lookup; with
      -- `deleted_at is null` the planner may read the type's partial index of live items whole per row).
      left join lateral (
        select s.id, s.data, s.hubspot_updated_at, s.deleted_at from public.hubspot_content s
         where s.portal_id = p_portal_id and s.content_type = p_content_type and s.hubspot_id = d.hubspot_id
         limit 1) c on d.shaped and d.hubspot_id is not null and d.nth = 1
  ), cells as (
    select j.row_no, j.hubspot_id, j.base, x.name, x.i, j.cells ->> (x.pos - 1) as cell, j.stored_cells[x.i] as stored_cell,
           j.data -> x.name as stored_value, f.json_type
      from (select j0.*, private.csv_cells('{}'::text[], j0.data, v_data_cols) as stored_cells from j j0 where j0.row_code is null) j
     cross join unnest(v_data_cols, v_data_pos) with ordinality x(name, pos, i)
      left join private.editable_fields f on f.content_type = p_content_type and f.field = x.name
     where (j.cells ->> (x.pos - 1)) is distinct from j.stored_cells[x.i]
  ), valued as (
    select c.*, case when c.json_type is not null then private.csv_cell_value(c.json_type, c.cell) end as value
      from cells c
  ), changes as (
    select v.row_no, v.hubspot_id, v.base, v.name,
           case when v.json_type = 'object'
                then (select jsonb_object_agg(e.key, e.value) from jsonb_each(v.value) e
                       where e.value is distinct from coalesce(v.stored_value -> e.key, 'null'::jsonb))
                when v.value = coalesce(v.stored_value, 'null'::jsonb) then null
                else v.value end as patch_value
      from valued v
     where v.json_type is not null and v.value is not null
  ), errs as (
    select j.row_no, 0 as i,
           case when j.row_code in ('not_in_copy', 'duplicate_row') then 'hubspot_id'
                when j.row_code in ('wrong_type', 'stale') then 'hubspot_updated_at' end as col,
           j.row_code as code,
           case j.row_code
             when 'row_shape' then case when j.width is null then 'a row must be a list of cells'
                                        when j.width <> v_ncols then format('the row has %s cells; the header has %s', j.width, v_ncols)
                                        else 'every cell must be text or empty' end
             when 'not_in_copy' then case when j.hubspot_id is null then 'the row has no hubspot_id'
                                          else format('%s %s is not a live item of this portal''s copy', p_content_type, left(j.hubspot_id, 200)) end
             when 'duplicate_row' then format('%s is on an earlier row too', left(j.hubspot_id, 200))
             when 'wrong_type' then 'hubspot_updated_at must be the exported timestamp'
             else format('the item changed since this file was exported (hubspot_updated_at %s, the copy has %s): export again, or leave this row out',
                         left(j.updated_cell, 40), to_char(j.stored_updated at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end as message
      from j where j.row_code is not null
    union all
    select v.row_no, v.i, v.name,
           case when v.json_type is null then 'read_only' else 'wrong_type' end,
           case when v.json_type is null then format('%s is read-only: leave its cell as exported', v.name)
                else format('%s must be %s', v.name, case v.json_type
                       when 'integer' then 'a whole number'
                       when 'number' then 'a number'
                       when 'boolean' then 'true or false'
                       when 'array_of_integers' then 'a JSON array of whole numbers, as exported'
                       else 'a JSON object, as exported' end) end
      from valued v
     where v.json_type is null or v.value is null
  ), edits as (
    select ch.hubspot_id, ch.base, jsonb_object_agg(ch.name, ch.patch_value) as patch
      from changes ch
     where ch.patch_value is not null
     group by ch.row_no, ch.hubspot_id, ch.base
  )
  select (select coalesce(jsonb_agg(jsonb_build_object('row', e.row_no, 'column', e.col, 'code', e.code, 'message', e.message)
                                    order by e.row_no, e.i), '[]'::jsonb)
            from (select * from errs order by row_no, i limit v_max_errors) e),
         (select count(*)::integer from errs),
         (select coalesce(jsonb_agg(jsonb_build_object('hubspot_id', ed.hubspot_id, 'base', ed.base, 'patch', ed.patch)), '[]'::jsonb)
            from edits ed)
    into v_errors, v_error_count, v_edits;

  if v_error_count > 0 then
    if v_error_count > v_max_errors then
      v_errors := v_errors || jsonb_build_object('row', null, 'column', null, 'code', 'too_many_errors',
                                                 'message', format('%s more errors', v_error_count - v_max_errors));
    end if;
    return query select 0, v_errors;
    return;
  end if;

  delete from public.content_edits e
   using jsonb_to_recordset(v_edits) x(hubspot_id text, base timestamptz, patch jsonb)
   where e.portal_id = p_portal_id and e.content_type = p_content_type and e.hubspot_id = x.hubspot_id and e.status = 'pending';
  insert into public.content_edits (portal_id, owner_id, content_type, hubspot_id, base_updated_at, patch, source, created_by)
  select p_portal_id, v_owner, p_content_type, x.hubspot_id, x.base, x.patch, 'csv', p_user
    from jsonb_to_recordset(v_edits) x(hubspot_id text, base timestamptz, patch jsonb)
   order by x.hubspot_id;
  get diagnostics v_count = row_count;
  return query select v_count, '[]'::jsonb;
end;
$$;

-- ==== supabase/schemas/0489_function_next_publish_items.sql ====
-- public.next_publish_items(job, fencing_token, limit): the next items (at most
-- limit, 1-1000) the holder's job still has to handle, in id order, of its
-- plan and content type: a plan job's items not read yet (plan_status null);
-- a publish job's ready items without an outcome, being written (`writing`:
-- a batch cut off after its write was counted) or failed by an earlier
-- attempt of the job (an operator's retry_job); a restore job's applied (or
-- scheduled) items without a restore outcome, being restored, or failed
-- before. `state` is the
-- phase's own (outcome or restore_outcome). Raises 55000 for anyone but the
-- holder. Reads only, no locks. The service role only (the worker).
create function public.next_publish_items(p_job_id bigint, p_fencing_token bigint, p_limit integer)
returns table (item_id bigint, hubspot_id text, after jsonb, before jsonb, state text, writes integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  if p_limit is null or p_limit not between 1 and 1000 then
    raise exception 'next_publish_items: limit must be between 1 and 1000' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['plan', 'publish', 'restore'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  if v_job.kind = 'plan' then
    return query
      select i.id, i.hubspot_id, i.after, i.before, i.plan_status, i.writes from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type and i.plan_status is null
       order by i.id limit p_limit;
  elsif v_job.kind = 'publish' then
    return query
      select i.id, i.hubspot_id, i.after, i.before, i.outcome, i.writes from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type
         and i.plan_status = 'ready' and (i.outcome is null or i.outcome in ('writing', 'failed'))
       order by i.id limit p_limit;
  else
    return query
      select i.id, i.hubspot_id, i.after, private.patch_fields_of(i.pre_image, i.after), i.restore_outcome, i.restore_writes
        from public.publish_items i
       where i.plan_id = v_plan and i.content_type = v_job.content_type
         and i.outcome in ('applied', 'scheduled') and (i.restore_outcome is null or i.restore_outcome in ('restoring', 'failed'))
       order by i.id limit p_limit;
  end if;
end;
$$;

-- ==== supabase/schemas/0490_function_record_plan_batch.sql ====
-- public.record_plan_batch(job, fencing_token, item_ids, body): a plan job's batch,
-- HubSpot's batch/read answer (text; private.publish_answer: for redirects the
-- worker's `{"results":[…]}` of its single reads, for HubDB rows the tables'
-- answers as an array) classifies each of the items still unread: not in the
-- results → `missing` (an error naming it that is not OBJECT_NOT_FOUND →
-- `invalid`, with HubSpot's message); HubSpot's update time differs from the
-- edit's base → `conflict` (HubSpot's values beside ours in `current`); the
-- patched fields already hold the targets → `unchanged`; else `ready`, with
-- HubSpot's values in `before` and its update time. Items already classified
-- are left alone (a batch sent again). Progress on the job (the items
-- classified), the job lease extended. Returns {ready, conflict, invalid,
-- unchanged, missing}. 55000 for anyone but the holder; 22023 / 22P02 for
-- ids not the job's or a malformed answer (nothing written). Parses before
-- it locks the job row. The service role only (the worker).
create function public.record_plan_batch(p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb := private.publish_answer(p_body);
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_counts jsonb;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['plan'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), err as (
    select distinct on (k.key) k.key, e as error
      from jsonb_array_elements(v_answer -> 'errors') e
     cross join lateral jsonb_array_elements_text(
             case when jsonb_typeof(e #> '{context,ids}') = 'array' then e #> '{context,ids}' else '[]'::jsonb end) k(key)
     order by k.key
  ), seen as (
    select i.id, r.item, er.error, private.hubspot_item_updated_at(r.item) as updated_at
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
      left join err er on er.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.plan_status is null
  ), classified as (
    update public.publish_items i
       set plan_status = case
             when s.item is null and s.error is not null and coalesce(s.error ->> 'category', '') <> 'OBJECT_NOT_FOUND' then 'invalid'
             when s.item is null then 'missing'
             when s.updated_at is distinct from i.base_updated_at then 'conflict'
             when private.patch_is_applied(s.item, i.after) then 'unchanged'
             else 'ready' end,
           plan_message = case
             when s.item is null and s.error is not null and coalesce(s.error ->> 'category', '') <> 'OBJECT_NOT_FOUND'
               then left(coalesce(s.error ->> 'message', s.error::text), 2000)
             when s.item is null then 'not in HubSpot (deleted or archived since the copy was fetched)'
             when s.updated_at is distinct from i.base_updated_at
               then format('changed in HubSpot since the edit''s base (updated %s, the edit is based on %s)',
                           coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                           to_char(i.base_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           before = case when s.item is not null and s.updated_at is not distinct from i.base_updated_at
                         then private.patch_fields_of(s.item, i.after) end,
           current = case when s.item is not null and s.updated_at is distinct from i.base_updated_at
                          then private.patch_fields_of(s.item, i.after) end,
           planned_updated_at = s.updated_at,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.plan_status
  )
  select jsonb_build_object(
           'ready', count(*) filter (where c.plan_status = 'ready'),
           'conflict', count(*) filter (where c.plan_status = 'conflict'),
           'invalid', count(*) filter (where c.plan_status = 'invalid'),
           'unchanged', count(*) filter (where c.plan_status = 'unchanged'),
           'missing', count(*) filter (where c.plan_status = 'missing'))
    into v_counts
    from classified c;
  perform private.advance_publish_job(v_job,
    (v_counts ->> 'ready')::integer + (v_counts ->> 'conflict')::integer + (v_counts ->> 'invalid')::integer
    + (v_counts ->> 'unchanged')::integer + (v_counts ->> 'missing')::integer);
  return v_counts;
end;
$$;

-- ==== supabase/schemas/0491_function_prepare_publish_batch.sql ====
-- public.prepare_publish_batch(job, fencing_token, item_ids, body, read_at): a
-- publish job's re-read of a batch (HubSpot's batch/read answer, as
-- record_plan_batch takes it), just before its write. Per item never sent
-- (writes 0): gone from HubSpot or its update time no longer the plan's →
-- `conflict` (HubSpot's values in `current`, never written); the targets
-- already there → `unchanged` (no write); else `writing`, with the whole item
-- as its pre-image, its update time (T0) and the re-read's time on HubSpot's
-- clock (`reread_at`: the earliest `startedAt` of the answer, or `p_read_at`
-- when earlier or the answer has none, as a redirect's GET: its Date header),
-- where the item's window starts. Per item sent before (a batch cut off after
-- its write was counted, or an earlier attempt's): the targets there (or the
-- values of HubSpot's answer to that write's first step, kept while the rest
-- was lost: a value HubSpot normalised, a lowercased slug, is recognised)
-- and HubSpot's update time past T0 → `applied` (its own earlier write: never
-- a conflict, not written again; the copy updated); the update time still T0
-- → to write again (HubSpot never applied it); anything else → `conflict`.
-- Returns the items to write now, in id order, and counts each one's write
-- (`writes` + 1) in this transaction, before the worker sends it. Items
-- already settled are left alone. Progress: the items settled. 55000 for
-- anyone but the holder; 22023 / 22P02 for ids not the job's or a malformed
-- answer (nothing written). The service role only (the worker).
create function public.prepare_publish_batch(
  p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text, p_read_at timestamptz default null
)
returns table (item_id bigint, hubspot_id text, after jsonb)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb := private.publish_answer(p_body);
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_write bigint[];
  v_own_ids text[];
  v_own_items jsonb[];
  v_settled integer;
  v_read_at timestamptz := least(p_read_at, (v_answer ->> 'read_at')::timestamptz);
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), seen as (
    select i.id, r.item, private.hubspot_item_updated_at(r.item) as updated_at,
           case when i.writes = 0 then
                  case when r.item is null then 'conflict'
                       when private.hubspot_item_updated_at(r.item) is distinct from i.planned_updated_at then 'conflict'
                       when private.patch_is_applied(r.item, i.after) then 'unchanged'
                       else 'write' end
                else
                  case when r.item is null then 'conflict'
                       when (private.patch_is_applied(r.item, i.after)
                             or (jsonb_typeof(i.answer) = 'object'
                                 and private.patch_is_applied(r.item, private.patch_fields_of(i.answer, i.after))))
                            and private.hubspot_item_updated_at(r.item) > i.pre_updated_at then 'applied'
                       when private.hubspot_item_updated_at(r.item) = i.pre_updated_at then 'write'
                       else 'conflict' end
           end as decision
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.plan_status = 'ready' and (i.outcome is null or i.outcome in ('writing', 'failed'))
  ), decided as (
    update public.publish_items i
       set outcome = case s.decision when 'write' then 'writing' else s.decision end,
           outcome_message = case
             when s.decision <> 'conflict' then null
             when s.item is null then 'deleted in HubSpot since the plan (not written)'
             when i.writes = 0 then format('changed in HubSpot since the plan (updated %s, the plan read %s): not written',
                                           coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                                           coalesce(to_char(i.planned_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'))
             else format('changed in HubSpot while our write was in flight (updated %s, before our write %s): not written again',
                         coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                         to_char(i.pre_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           current = case when s.decision = 'conflict' and s.item is not null then private.patch_fields_of(s.item, i.after) else i.current end,
           pre_image = case when s.decision = 'write' and i.writes = 0 then s.item else i.pre_image end,
           pre_updated_at = case when s.decision = 'write' and i.writes = 0 then s.updated_at else i.pre_updated_at end,
           reread_at = case when s.decision = 'write' then coalesce(i.reread_at, v_read_at) else i.reread_at end,
           applied_updated_at = case when s.decision = 'applied' then s.updated_at else i.applied_updated_at end,
           answer = case when s.decision = 'applied' then s.item else i.answer end,
           writes = i.writes + case when s.decision = 'write' then 1 else 0 end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.id, i.hubspot_id, s.decision, s.item
  )
  select array_agg(d.id order by d.id) filter (where d.decision = 'write'),
         array_agg(d.hubspot_id) filter (where d.decision = 'applied'),
         array_agg(d.item) filter (where d.decision = 'applied'),
         count(*) filter (where d.decision <> 'write')
    into v_write, v_own_ids, v_own_items, v_settled
    from decided d;
  perform private.write_published_copy(v_job, v_own_ids, v_own_items);
  perform private.advance_publish_job(v_job, coalesce(v_settled, 0));
  return query
    select i.id, i.hubspot_id, i.after from public.publish_items i
     where i.id = any (coalesce(v_write, '{}')) order by i.id;
end;
$$;

-- ==== supabase/schemas/0492_function_record_publish_batch.sql ====
-- public.record_publish_batch(job, fencing_token, item_ids, status, body): HubSpot's
-- answer to a publish job's write of a batch (`p_status` 200 or 207 with
-- batch/update's body: results and errors per input; for HubDB rows,
-- redirects and drafts the worker's assembly of its requests' answers, as
-- private.publish_answer reads them). Each result of an item being written
-- (`writing`) → `applied`: its answer, HubSpot's new update time (T2), and
-- the copy updated (private.write_published_copy: the change feed lists it
-- as an update); in a plan of mode schedule → `scheduled` instead: the
-- result is its draft (T2 the draft's update time), nothing is live yet, so
-- the copy is left as it is (the first fetch after publish_at brings the
-- live item). Each error naming items by its context ids → `invalid` with
-- HubSpot's message. A whole-batch refusal (`p_status` 400-499 but 429,
-- HubSpot applied nothing) makes every sent item `invalid` with its message.
-- Items sent but in neither stay `writing`: the next re-read decides
-- (prepare_publish_batch); a `pending` answer naming one (the first step of
-- its write answered, the rest unknown) is kept in its `answer` for that
-- re-read to recognise HubSpot's values by. Returns {applied, scheduled,
-- invalid, writing}. 55000 for anyone but the holder; 22023 / 22P02 for ids
-- not the job's, another status or a malformed answer (nothing written). The
-- service role only (the worker).
create function public.record_publish_batch(
  p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_status integer, p_body text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb;
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_counts jsonb;
  v_ids text[];
  v_items jsonb[];
  v_scheduled boolean;
begin
  if p_status is null or not (p_status in (200, 207) or (p_status between 400 and 499 and p_status <> 429)) then
    raise exception 'record_publish_batch: HubSpot''s status must be 200, 207 or a 4xx refusal other than 429, got %', p_status
      using errcode = '22023';
  end if;
  v_answer := case when p_status in (200, 207) then private.publish_answer(p_body)
                   else private.publish_refusal(p_body) end;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.mode = 'schedule' into v_scheduled from public.publish_plans p where p.id = v_plan;
  -- The first step's answers of writes whose rest is unknown: kept for the next re-read.
  update public.publish_items i
     set answer = d.item, updated_at = now()
    from (select distinct on (x ->> 'id') x ->> 'id' as key, x as item
            from jsonb_array_elements(coalesce(v_answer -> 'pending', '[]'::jsonb)) x
           order by x ->> 'id') d
   where i.id = any (p_item_ids) and i.outcome = 'writing'
     and d.key = private.hubspot_object_id(i.content_type, i.hubspot_id);
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), err as (
    select distinct on (k.key) k.key, e as error
      from jsonb_array_elements(v_answer -> 'errors') e
     cross join lateral jsonb_array_elements_text(
             case when jsonb_typeof(e #> '{context,ids}') = 'array' then e #> '{context,ids}' else '[]'::jsonb end) k(key)
     order by k.key
  ), seen as (
    select i.id, r.item, coalesce(er.error, v_answer -> 'refusal') as error
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
      left join err er on er.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.outcome = 'writing'
       and (r.item is not null or er.error is not null or v_answer ? 'refusal')
  ), recorded as (
    update public.publish_items i
       set outcome = case when s.item is null then 'invalid' when v_scheduled then 'scheduled' else 'applied' end,
           outcome_message = case when s.item is null then left(coalesce(s.error ->> 'message', s.error::text), 2000) end,
           answer = coalesce(s.item, s.error),
           applied_updated_at = case when s.item is not null
                                     then coalesce(private.hubspot_item_updated_at(s.item), i.pre_updated_at) end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.hubspot_id, i.outcome, s.item
  )
  select jsonb_build_object('applied', count(*) filter (where r.outcome = 'applied'),
                            'scheduled', count(*) filter (where r.outcome = 'scheduled'),
                            'invalid', count(*) filter (where r.outcome = 'invalid')),
         array_agg(r.hubspot_id) filter (where r.outcome = 'applied'),
         array_agg(r.item) filter (where r.outcome = 'applied')
    into v_counts, v_ids, v_items
    from recorded r;
  perform private.write_published_copy(v_job, v_ids, v_items);
  perform private.advance_publish_job(v_job,
    (v_counts ->> 'applied')::integer + (v_counts ->> 'scheduled')::integer + (v_counts ->> 'invalid')::integer);
  return v_counts || jsonb_build_object('writing',
    (select count(*) from public.publish_items i where i.id = any (p_item_ids) and i.outcome = 'writing'));
end;
$$;

-- ==== supabase/schemas/0493_function_record_window_events.sql ====
-- public.record_window_events(job, fencing_token, body): a page of HubSpot's CMS
-- audit log (`{"results":[{objectId, objectType, event, timestamp, userId,
-- …}], …}`), read after a publish job's writes over the window
-- publish_job_context gives. First it learns who our writer is: an event on
-- an item the job wrote, stamped exactly at the item's update time after our
-- write (T2, applied_updated_at), is our write's own; its userId is kept
-- (`writer_user_id`). Then each item the job wrote and HubSpot took
-- (`applied`, `scheduled`, writes >= 1) with an event on it (its object id;
-- a HubDB row's table; of the job's type's objectType, private.audit_object_type,
-- when the event names one) whose time is strictly between the pre-image's
-- update time (T0) and ours (T2) — an edit that landed in the window between
-- the batch's re-read and our write, which HubSpot gave no way to refuse —
-- becomes `overwritten`, the events kept in `overwritten_by` (an item already
-- overwritten adds them). In a plan of mode `draft` or `schedule`, our own
-- draft PATCH lands inside that window (so does a retried one): an event by
-- one of the job's writers (the userIds learned above, on this page or an
-- earlier one) is ours, not another's. The worker reads the log newest first,
-- so the event at our latest write comes first. Returns how many items it
-- newly marked. 55000 for anyone but the holder; 22004 / 22P02 / 22023 for a
-- missing, invalid or result-less body. The service role only (the worker).
create function public.record_window_events(p_job_id bigint, p_fencing_token bigint, p_body text)
returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_body jsonb;
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_type text;
  v_drafts boolean;
  v_writers text[];
  v_events jsonb;
  v_marked integer;
begin
  if p_body is null then
    raise exception 'record_window_events: the audit log page is required' using errcode = '22004';
  end if;
  if not pg_input_is_valid(p_body, 'jsonb') then
    raise exception 'record_window_events: the audit log page is not valid JSON' using errcode = '22P02';
  end if;
  v_body := p_body::jsonb;
  if jsonb_typeof(v_body) <> 'object' or coalesce(jsonb_typeof(v_body -> 'results'), '') <> 'array' then
    raise exception 'record_window_events: the audit log page must be an object with a results array' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  v_type := private.audit_object_type(v_job.content_type);
  select p.mode in ('draft', 'schedule') into v_drafts from public.publish_plans p where p.id = v_plan;
  -- The page's events of the job's type, parsed once: the event, its object, user and time (ISO, or epoch milliseconds).
  select coalesce(jsonb_agg(jsonb_build_object('e', e, 'object_id', e ->> 'objectId', 'user_id', e ->> 'userId', 'at',
           case when jsonb_typeof(e -> 'timestamp') = 'number' then timestamptz 'epoch' + (e ->> 'timestamp')::numeric * interval '1 millisecond'
                when jsonb_typeof(e -> 'timestamp') = 'string' and pg_input_is_valid(e ->> 'timestamp', 'timestamptz')
                  then (e ->> 'timestamp')::timestamptz end)), '[]'::jsonb)
    into v_events
    from jsonb_array_elements(v_body -> 'results') e
   where jsonb_typeof(e) = 'object' and e ? 'objectId'
     and (e ->> 'objectType' is null or v_type is null or e ->> 'objectType' = v_type);
  -- Our write's own event: on the item, at its T2.
  update public.publish_items i
     set writer_user_id = ev.user_id, updated_at = now()
    from jsonb_to_recordset(v_events) as ev(e jsonb, object_id text, user_id text, at timestamptz)
   where i.plan_id = v_plan and i.content_type = v_job.content_type
     and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1 and i.writer_user_id is null
     and ev.user_id is not null and ev.at = i.applied_updated_at
     and ev.object_id = private.hubspot_object_id(i.content_type, i.hubspot_id);
  if v_drafts then
    select array_agg(distinct i.writer_user_id) into v_writers
      from public.publish_items i
     where i.plan_id = v_plan and i.content_type = v_job.content_type and i.writer_user_id is not null;
  end if;
  with hits as (
    select i.id, i.outcome as was, jsonb_agg(ev.e order by ev.at) as found
      from public.publish_items i
      join jsonb_to_recordset(v_events) as ev(e jsonb, object_id text, user_id text, at timestamptz)
        on ev.object_id = case when i.content_type = 'hubdb_rows' then split_part(i.hubspot_id, ':', 1) else i.hubspot_id end
     where i.plan_id = v_plan and i.content_type = v_job.content_type
       and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1
       and ev.at > i.pre_updated_at and ev.at < i.applied_updated_at
       and not (v_drafts and coalesce(ev.user_id = any (coalesce(v_writers, '{}')), false))
     group by i.id, i.outcome
  ), marked as (
    update public.publish_items i
       set outcome = 'overwritten',
           overwritten_by = case when i.overwritten_by is null then h.found
                                 else i.overwritten_by || (select coalesce(jsonb_agg(x), '[]'::jsonb) from jsonb_array_elements(h.found) x
                                                           where not i.overwritten_by @> jsonb_build_array(x)) end,
           updated_at = now()
      from hits h
     where i.id = h.id
    returning h.was
  )
  select count(*) filter (where m.was <> 'overwritten') into v_marked from marked m;
  return v_marked;
end;
$$;

-- ==== supabase/schemas/0494_function_record_overwritten_revision.sql ====
-- public.record_overwritten_revision(job, fencing_token, item, revision): the
-- revision to restore for an item of the publish job found `overwritten`
-- (HubSpot's revision of the foreign edit our write overwrote, from the
-- item's revisions). True when recorded; false when the item is not
-- overwritten. 55000 for anyone but the holder; 22023 for an item not the
-- job's or a revision id not 1-100 characters. The service role only (the worker).
create function public.record_overwritten_revision(p_job_id bigint, p_fencing_token bigint, p_item_id bigint, p_revision_id text)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  if p_revision_id is null or char_length(p_revision_id) not between 1 and 100 then
    raise exception 'record_overwritten_revision: a revision id is 1-100 characters' using errcode = '22023';
  end if;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, array[p_item_id]);
  update public.publish_items i
     set overwritten_revision_id = p_revision_id, updated_at = now()
   where i.id = p_item_id and i.outcome = 'overwritten';
  return found;
end;
$$;

-- ==== supabase/schemas/0495_function_prepare_restore_batch.sql ====
-- public.prepare_restore_batch(job, fencing_token, item_ids, body): a restore job's
-- re-read of a batch of applied (or scheduled) items (HubSpot's batch/read
-- answer, as record_plan_batch takes it), just before it writes their
-- pre-images back: the patched fields' values in the pre-image (sparse).
-- An applied item never sent (restore_writes 0): gone from HubSpot or its
-- update time no longer ours (T2, applied_updated_at) → restore `conflict`
-- (changed in HubSpot since our write: listed with HubSpot's values in
-- `current`, never overwritten); the pre-image's values already there →
-- `restored` (no write); else `restoring`. Sent before: those values there
-- and HubSpot's update time past T2 → `restored` (its own earlier write; the
-- copy updated); the update time still T2 → to write again; anything else →
-- `conflict`. A scheduled item (mode schedule: our edit is in its draft,
-- which HubSpot publishes at the plan's publish_at; HubSpot has no way to
-- cancel a schedule): still not live (the live update time is T0) → its
-- draft is written back (`draft` true: the pre-image's values PATCHed into
-- the draft, again on a retry), and the schedule then publishes the fields
-- as they were; gone live by its schedule (update time at or after
-- publish_at, the targets there) → it is `applied` now (T2 and the answer:
-- the live item) and restored as any applied item; the schedule published a
-- draft we had written back (sent before, the pre-image's values there) →
-- `restored`; anything else → `conflict`. Returns the items to write now
-- (id order) with the values to write and whether to write the draft, each
-- counted (`restore_writes` + 1) in this transaction, before it is sent.
-- Progress: the items settled. 55000 for anyone but the holder; 22023 /
-- 22P02 as prepare_publish_batch. The service role only (the worker).
create function public.prepare_restore_batch(p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_body text)
returns table (item_id bigint, hubspot_id text, before jsonb, draft boolean)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb := private.publish_answer(p_body);
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_write bigint[];
  v_drafts bigint[];
  v_publish_at timestamptz;
  v_own_ids text[];
  v_own_items jsonb[];
  v_settled integer;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['restore'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.publish_at into v_publish_at from public.publish_plans p where p.id = v_plan;
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), seen as (
    select i.id, r.item, private.hubspot_item_updated_at(r.item) as updated_at,
           case when r.item is null then 'conflict'
                when i.outcome = 'scheduled' then
                  case when private.hubspot_item_updated_at(r.item) = i.pre_updated_at then 'draft'
                       when private.hubspot_item_updated_at(r.item) >= v_publish_at
                            and private.patch_is_applied(r.item, i.after) then 'gone_live'
                       when private.hubspot_item_updated_at(r.item) >= v_publish_at and i.restore_writes > 0
                            and private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after)) then 'restored'
                       else 'conflict' end
                when i.restore_writes = 0 then
                  case when private.hubspot_item_updated_at(r.item) is distinct from i.applied_updated_at then 'conflict'
                       when private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after)) then 'restored'
                       else 'write' end
                else
                  case when private.patch_is_applied(r.item, private.patch_fields_of(i.pre_image, i.after))
                            and private.hubspot_item_updated_at(r.item) > i.applied_updated_at then 'restored'
                       when private.hubspot_item_updated_at(r.item) = i.applied_updated_at then 'write'
                       else 'conflict' end
           end as decision
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.outcome in ('applied', 'scheduled')
       and (i.restore_outcome is null or i.restore_outcome in ('restoring', 'failed'))
  ), decided as (
    update public.publish_items i
       set restore_outcome = case when s.decision in ('write', 'draft', 'gone_live') then 'restoring' else s.decision end,
           restore_message = case
             when s.decision <> 'conflict' then null
             when s.item is null then 'deleted in HubSpot since our write (not restored)'
             when i.outcome = 'scheduled' then
               format('changed in HubSpot since our schedule (updated %s, before our write %s, publishing at %s): not restored',
                      coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                      to_char(i.pre_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                      to_char(v_publish_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
             else format('changed in HubSpot since our write (updated %s, our write %s): not restored',
                         coalesce(to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'unknown'),
                         to_char(i.applied_updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           -- Gone live by its schedule: applied now, at the time HubSpot published it.
           outcome = case when s.decision = 'gone_live' then 'applied' else i.outcome end,
           applied_updated_at = case when s.decision = 'gone_live' then s.updated_at else i.applied_updated_at end,
           answer = case when s.decision = 'gone_live' then s.item else i.answer end,
           current = case when s.decision = 'conflict' and s.item is not null then private.patch_fields_of(s.item, i.after) else i.current end,
           restored_updated_at = case when s.decision = 'restored' then s.updated_at else i.restored_updated_at end,
           restore_answer = case when s.decision = 'restored' then s.item else i.restore_answer end,
           restore_writes = i.restore_writes + case when s.decision in ('write', 'draft', 'gone_live') then 1 else 0 end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.id, i.hubspot_id, s.decision, s.item, i.restore_writes
  )
  select array_agg(d.id order by d.id) filter (where d.decision in ('write', 'draft', 'gone_live')),
         array_agg(d.id) filter (where d.decision = 'draft'),
         array_agg(d.hubspot_id) filter (where d.decision = 'restored' and d.restore_writes > 0),
         array_agg(d.item) filter (where d.decision = 'restored' and d.restore_writes > 0),
         count(*) filter (where d.decision not in ('write', 'draft', 'gone_live'))
    into v_write, v_drafts, v_own_ids, v_own_items, v_settled
    from decided d;
  perform private.write_published_copy(v_job, v_own_ids, v_own_items);
  perform private.advance_publish_job(v_job, coalesce(v_settled, 0));
  return query
    select i.id, i.hubspot_id, private.patch_fields_of(i.pre_image, i.after), i.id = any (coalesce(v_drafts, '{}'))
      from public.publish_items i
     where i.id = any (coalesce(v_write, '{}')) order by i.id;
end;
$$;

-- ==== supabase/schemas/0496_function_record_restore_batch.sql ====
-- public.record_restore_batch(job, fencing_token, item_ids, status, body): HubSpot's
-- answer to a restore job's write of a batch, as record_publish_batch reads
-- it: each result of an item being restored (`restoring`) → `restored` (its
-- answer, HubSpot's new update time, the copy updated), each error by its
-- context ids (or a whole-batch 4xx refusal) → `invalid` with HubSpot's
-- message; items in neither stay `restoring` for the next re-read. A
-- scheduled item's result is its draft written back: `restored`, the copy
-- left as it is (nothing live changed), its message saying that HubSpot
-- still publishes the draft at the plan's time, with the fields as they were
-- before (HubSpot has no way to cancel a schedule). Returns
-- {restored, invalid, restoring}. 55000 for anyone but the holder; 22023 /
-- 22P02 as record_publish_batch. The service role only (the worker).
create function public.record_restore_batch(
  p_job_id bigint, p_fencing_token bigint, p_item_ids bigint[], p_status integer, p_body text
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_answer jsonb;
  v_held record;
  v_job public.jobs;
  v_plan uuid;
  v_counts jsonb;
  v_ids text[];
  v_items jsonb[];
  v_publish_at timestamptz;
begin
  if p_status is null or not (p_status in (200, 207) or (p_status between 400 and 499 and p_status <> 429)) then
    raise exception 'record_restore_batch: HubSpot''s status must be 200, 207 or a 4xx refusal other than 429, got %', p_status
      using errcode = '22023';
  end if;
  v_answer := case when p_status in (200, 207) then private.publish_answer(p_body)
                   else private.publish_refusal(p_body) end;
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['restore'], true) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  perform private.check_job_items(v_job, v_plan, p_item_ids);
  select p.publish_at into v_publish_at from public.publish_plans p where p.id = v_plan;
  with res as (
    select distinct on (r ->> 'id') r ->> 'id' as key, r as item
      from jsonb_array_elements(v_answer -> 'results') r
     order by r ->> 'id'
  ), err as (
    select distinct on (k.key) k.key, e as error
      from jsonb_array_elements(v_answer -> 'errors') e
     cross join lateral jsonb_array_elements_text(
             case when jsonb_typeof(e #> '{context,ids}') = 'array' then e #> '{context,ids}' else '[]'::jsonb end) k(key)
     order by k.key
  ), seen as (
    select i.id, r.item, coalesce(er.error, v_answer -> 'refusal') as error
      from public.publish_items i
      left join res r on r.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
      left join err er on er.key = private.hubspot_object_id(i.content_type, i.hubspot_id)
     where i.id = any (p_item_ids) and i.restore_outcome = 'restoring'
       and (r.item is not null or er.error is not null or v_answer ? 'refusal')
  ), recorded as (
    update public.publish_items i
       set restore_outcome = case when s.item is not null then 'restored' else 'invalid' end,
           restore_message = case
             when s.item is null then left(coalesce(s.error ->> 'message', s.error::text), 2000)
             when i.outcome = 'scheduled' then format(
               'its draft written back: HubSpot has no way to cancel a schedule, so it still publishes the draft at %s, with these fields as they were before',
               to_char(v_publish_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
           end,
           restore_answer = coalesce(s.item, s.error),
           restored_updated_at = case when s.item is not null
                                      then coalesce(private.hubspot_item_updated_at(s.item), i.applied_updated_at) end,
           updated_at = now()
      from seen s
     where i.id = s.id
    returning i.hubspot_id, i.restore_outcome, i.outcome, s.item
  )
  select jsonb_build_object('restored', count(*) filter (where r.restore_outcome = 'restored'),
                            'invalid', count(*) filter (where r.restore_outcome = 'invalid')),
         array_agg(r.hubspot_id) filter (where r.restore_outcome = 'restored' and r.outcome = 'applied'),
         array_agg(r.item) filter (where r.restore_outcome = 'restored' and r.outcome = 'applied')
    into v_counts, v_ids, v_items
    from recorded r;
  perform private.write_published_copy(v_job, v_ids, v_items);
  perform private.advance_publish_job(v_job, (v_counts ->> 'restored')::integer + (v_counts ->> 'invalid')::integer);
  return v_counts || jsonb_build_object('restoring',
    (select count(*) from public.publish_items i where i.id = any (p_item_ids) and i.restore_outcome = 'restoring'));
end;
$$;

-- ==== supabase/schemas/0497_function_approve_publish_plan.sql ====
-- public.approve_publish_plan(plan, user): the user approves their plan by its
-- id: its publish run is created (kind publish, one job per content type
-- with ready items, totals = its ready items per type) and the plan becomes
-- `approved` (approved_by, approved_at, publish_run_id). Refuses, nothing
-- changed: a plan that is not the user's (P0002, as if it did not exist);
-- approved already (55000, hint already_approved: twice makes one run), not
-- ready (hint not_ready: still planning, failed or discarded), stale (now()
-- past fresh_until, hint stale: plan again), with no ready item (hint
-- nothing_ready), of a disconnected portal (hint disconnected); a publish or
-- restore of the portal still running for one of its types (55006, hint
-- busy). Locks the plan row FOR UPDATE (concurrent approvals queue on it).
-- The service role only (the orchestrator, for the signed-in user).
create function public.approve_publish_plan(p_plan_id uuid, p_user uuid) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_types text[];
  v_totals integer[];
  v_run record;
begin
  if p_plan_id is null or p_user is null then
    raise exception 'approve_publish_plan: plan and user are required' using errcode = '22004';
  end if;
  select * into v_plan from public.publish_plans p where p.id = p_plan_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'approve_publish_plan: plan % not found', p_plan_id using errcode = 'P0002';
  end if;
  if v_plan.status = 'approved' then
    raise exception 'approve_publish_plan: the plan is approved already (its publish run: %)', v_plan.publish_run_id
      using errcode = '55000', hint = 'already_approved';
  end if;
  if v_plan.status <> 'ready' then
    raise exception 'approve_publish_plan: the plan is %, not ready', v_plan.status using errcode = '55000', hint = 'not_ready';
  end if;
  if now() > v_plan.fresh_until then
    raise exception 'approve_publish_plan: the plan is stale (approvable until %): plan again', v_plan.fresh_until
      using errcode = '55000', hint = 'stale';
  end if;
  if exists (select 1 from public.portals p where p.id = v_plan.portal_id and p.disconnected_at is not null) then
    raise exception 'approve_publish_plan: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select array_agg(t.content_type order by t.content_type), array_agg(t.n order by t.content_type)
    into v_types, v_totals
    from (select i.content_type, count(*)::integer as n from public.publish_items i
           where i.plan_id = p_plan_id and i.plan_status = 'ready' group by i.content_type) t;
  if v_types is null then
    raise exception 'approve_publish_plan: the plan has no item to publish (every one is a conflict, unchanged, missing or invalid)'
      using errcode = '55000', hint = 'nothing_ready';
  end if;
  if exists (select 1 from public.runs r
              where r.portal_id = v_plan.portal_id and r.kind in ('publish', 'restore') and r.status in ('pending', 'running')
                and r.content_types && v_types) then
    raise exception 'approve_publish_plan: a publish or restore of this portal is still running for one of these types: approve when it ends'
      using errcode = '55006', hint = 'busy';
  end if;
  select * into v_run from public.create_run(v_plan.portal_id, p_user, 'publish', v_types, v_totals);
  if v_run.run_id is null or cardinality(v_run.duplicate_types) > 0 then
    raise exception 'approve_publish_plan: a publish of this portal is still running for %: approve when it ends',
      array_to_string(v_run.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set status = 'approved', approved_by = p_user, approved_at = now(), publish_run_id = v_run.run_id
   where p.id = p_plan_id;
  return v_run.run_id;
end;
$$;

-- ==== supabase/schemas/0498_function_rollback_publish_run.sql ====
-- public.rollback_publish_run(run, user): the user rolls back their finished
-- publish run: a restore run (kind restore, one job per content type with
-- applied or scheduled items, totals = those items) writes each applied
-- item's pre-image back under the same conflict rule, and each scheduled
-- one's into its draft while it is not live yet (prepare_restore_batch); the
-- plan records restored_by, restored_at, restore_run_id. Items overwritten
-- in the window are not restored (their revision is listed instead), nor
-- unchanged, conflicting or failed ones. Refuses, nothing changed: a run that
-- is not the user's publish run (P0002); not finished (55000, hint running);
-- rolled back already (hint already_rolled_back); nothing applied (hint
-- nothing_applied); a disconnected portal (hint disconnected); a publish or
-- restore of the portal running for one of its types (55006, hint busy).
-- Locks the plan row FOR UPDATE. The service role only (the orchestrator).
create function public.rollback_publish_run(p_run_id uuid, p_user uuid) returns uuid
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_run public.runs;
  v_types text[];
  v_totals integer[];
  v_created record;
begin
  if p_run_id is null or p_user is null then
    raise exception 'rollback_publish_run: run and user are required' using errcode = '22004';
  end if;
  select * into v_plan from public.publish_plans p where p.publish_run_id = p_run_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'rollback_publish_run: publish run % not found', p_run_id using errcode = 'P0002';
  end if;
  select * into v_run from public.runs r where r.id = p_run_id;
  if v_run.finished_at is null then
    raise exception 'rollback_publish_run: the publish run is still running: stop it or wait for it' using errcode = '55000', hint = 'running';
  end if;
  if v_plan.restore_run_id is not null or v_plan.restored_at is not null then
    raise exception 'rollback_publish_run: the run was rolled back already (restore run %)', v_plan.restore_run_id
      using errcode = '55000', hint = 'already_rolled_back';
  end if;
  if exists (select 1 from public.portals p where p.id = v_plan.portal_id and p.disconnected_at is not null) then
    raise exception 'rollback_publish_run: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select array_agg(t.content_type order by t.content_type), array_agg(t.n order by t.content_type)
    into v_types, v_totals
    from (select i.content_type, count(*)::integer as n from public.publish_items i
           where i.plan_id = v_plan.id and i.outcome in ('applied', 'scheduled') group by i.content_type) t;
  if v_types is null then
    raise exception 'rollback_publish_run: the run applied nothing to roll back' using errcode = '55000', hint = 'nothing_applied';
  end if;
  if exists (select 1 from public.runs r
              where r.portal_id = v_plan.portal_id and r.kind in ('publish', 'restore') and r.status in ('pending', 'running')
                and r.content_types && v_types) then
    raise exception 'rollback_publish_run: a publish or restore of this portal is still running for one of these types: roll back when it ends'
      using errcode = '55006', hint = 'busy';
  end if;
  select * into v_created from public.create_run(v_plan.portal_id, p_user, 'restore', v_types, v_totals);
  if v_created.run_id is null or cardinality(v_created.duplicate_types) > 0 then
    raise exception 'rollback_publish_run: a restore of this portal is still running for %: roll back when it ends',
      array_to_string(v_created.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set restored_by = p_user, restored_at = now(), restore_run_id = v_created.run_id
   where p.id = v_plan.id;
  return v_created.run_id;
end;
$$;

-- ==== supabase/schemas/0499_function_discard_publish_plan.sql ====
-- public.discard_publish_plan(plan, user): the user drops their plan that was
-- never approved (ready or failed): `discarded`, its edits pending again
-- (private.return_plan_edits). False when it was discarded already; P0002
-- when it is not the user's; 55000 while it is being made (hint planning:
-- stop its run first) or once approved (hint already_approved). Locks the plan
-- row FOR UPDATE. The service role only (the orchestrator).
create function public.discard_publish_plan(p_plan_id uuid, p_user uuid) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_status text;
begin
  if p_plan_id is null or p_user is null then
    raise exception 'discard_publish_plan: plan and user are required' using errcode = '22004';
  end if;
  select p.status into v_status from public.publish_plans p where p.id = p_plan_id and p.owner_id = p_user for update;
  if not found then
    raise exception 'discard_publish_plan: plan % not found', p_plan_id using errcode = 'P0002';
  end if;
  if v_status = 'discarded' then
    return false;
  end if;
  if v_status = 'planning' then
    raise exception 'discard_publish_plan: the plan is still being made: stop its run first' using errcode = '55000', hint = 'planning';
  end if;
  if v_status = 'approved' then
    raise exception 'discard_publish_plan: the plan is approved: roll its publish run back instead' using errcode = '55000', hint = 'already_approved';
  end if;
  update public.publish_plans p set status = 'discarded' where p.id = p_plan_id;
  perform private.return_plan_edits(p_plan_id);
  return true;
end;
$$;

-- ==== supabase/schemas/0500_function_audit_object_type.sql ====
-- private.audit_object_type(type): the `objectType` HubSpot's CMS audit log
-- gives a content type's events (PublicAuditLog's enum): WEBSITE_PAGE,
-- LANDING_PAGE, BLOG_POST, HUBDB_TABLE (tables and their rows: an event names
-- the table), URL_MAPPING; null for blog authors and tags, which the enum
-- lacks (HubSpot logs no event for them). The SQL copy of
-- shared/hubspot/write-endpoints.ts's AUDIT_OBJECT_TYPE
-- (tests/publish-sql.test.ts keeps them equal). Immutable; for
-- record_window_events; owner only.
create function private.audit_object_type(p_content_type text) returns text
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return case p_content_type
    when 'site_pages' then 'WEBSITE_PAGE'
    when 'landing_pages' then 'LANDING_PAGE'
    when 'blog_posts' then 'BLOG_POST'
    when 'hubdb_tables' then 'HUBDB_TABLE'
    when 'hubdb_rows' then 'HUBDB_TABLE'
    when 'url_redirects' then 'URL_MAPPING'
  end;
end;
$$;

-- ==== supabase/schemas/0501_function_publish_job_context.sql ====
-- public.publish_job_context(job, fencing_token): what the holder of a publish (or
-- restore) job reads of its plan besides its items: the write mode (`live`,
-- `draft`, `schedule`) and publish_at, and, for a publish job, where its
-- window events can be, on HubSpot's clock, for its audit-log read: after
-- `window_after` (the earliest of its written items' windows' starts: each
-- item's re-read time, less a second for the clocks' granularity, but never
-- before its pre-image's update time T0, which alone bounds an item re-read
-- without a time), before `window_before` (just after the latest write's
-- update time T2, so that our own writes' events, which name our writer, are
-- in the read), and how many written items (`applied`, `scheduled`,
-- `overwritten`, writes >= 1) it covers; the window columns are null while
-- none is written, and for a restore job. One row. Reads only, no locks.
-- 55000 for anyone but the holder; 22023 for a job of another kind. The
-- service role only (the worker). docs/publish.md.
create function public.publish_job_context(p_job_id bigint, p_fencing_token bigint)
returns table (mode text, publish_at timestamptz, window_after timestamptz, window_before timestamptz, written integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish', 'restore'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  return query
    select p.mode, p.publish_at, w.after_at, w.before_at, coalesce(w.items, 0)
      from public.publish_plans p
     cross join lateral (
       select min(greatest(i.pre_updated_at, coalesce(i.reread_at - interval '1 second', i.pre_updated_at))) as after_at,
              max(i.applied_updated_at) + interval '1 millisecond' as before_at,
              count(*)::integer as items
         from public.publish_items i
        where v_job.kind = 'publish' and i.plan_id = p.id and i.content_type = v_job.content_type
          and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1) w
     where p.id = v_plan;
end;
$$;

-- ==== supabase/schemas/0502_function_overwritten_publish_items.sql ====
-- public.overwritten_publish_items(job, fencing_token): the holder's publish job's
-- items found `overwritten` in their window (record_window_events) whose
-- revision to restore is not recorded yet, in id order: item id, HubSpot id,
-- the pre-image's update time (T0) and ours (T2), between which the worker
-- looks for that revision (record_overwritten_revision). Reads only, no
-- locks. 55000 for anyone but the holder; 22023 for a job of another kind.
-- The service role only (the worker). docs/publish.md.
create function public.overwritten_publish_items(p_job_id bigint, p_fencing_token bigint)
returns table (item_id bigint, hubspot_id text, pre_updated_at timestamptz, applied_updated_at timestamptz)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  return query
    select i.id, i.hubspot_id, i.pre_updated_at, i.applied_updated_at
      from public.publish_items i
     where i.plan_id = v_plan and i.content_type = v_job.content_type
       and i.outcome = 'overwritten' and i.overwritten_revision_id is null
     order by i.id;
end;
$$;

-- ==== supabase/schemas/0800_policies.sql ====
-- Row-level security policies of the exposed tables: a signed-in user reads
-- only their own portals, runs, jobs, content and notifications, and may mark
-- their notifications read. anon gets nothing; the service role bypasses RLS.
-- (The exports bucket's policy on storage.objects is in 0950.)
create policy "owners read their portals" on public.portals
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their runs" on public.runs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their jobs" on public.jobs
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their content" on public.hubspot_content
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "users read their notifications" on public.notifications
  for select to authenticated using (user_id = (select auth.uid()));
create policy "users mark their notifications read" on public.notifications
  for update to authenticated using (user_id = (select auth.uid())) with check (user_id = (select auth.uid()));
create policy "owners read their sync marks" on public.sync_marks
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their quiet cycles" on public.quiet_cycles
  for select to authenticated using (owner_id = (select auth.uid()));
-- Sync schedules: the owner of the portal reads, creates, changes and deletes
-- it (the fill trigger sets owner_id from the portal, so another user's portal
-- fails the check).
create policy "owners read their sync schedules" on public.sync_schedules
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners create their sync schedules" on public.sync_schedules
  for insert to authenticated with check (owner_id = (select auth.uid()));
create policy "owners change their sync schedules" on public.sync_schedules
  for update to authenticated using (owner_id = (select auth.uid())) with check (owner_id = (select auth.uid()));
create policy "owners delete their sync schedules" on public.sync_schedules
  for delete to authenticated using (owner_id = (select auth.uid()));
-- Publish (docs/publish.md): owners read their plans and items; they write
-- their own pending edits (the fill trigger sets owner_id from the portal, so
-- another user's portal fails the check; planned edits are the plan's).
create policy "owners read their publish plans" on public.publish_plans
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their publish items" on public.publish_items
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners read their edits" on public.content_edits
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "owners create their pending edits" on public.content_edits
  for insert to authenticated with check (owner_id = (select auth.uid()) and status = 'pending' and source = 'app');
create policy "owners change their pending edits" on public.content_edits
  for update to authenticated using (owner_id = (select auth.uid()) and status = 'pending')
  with check (owner_id = (select auth.uid()) and status = 'pending');
create policy "owners delete their pending edits" on public.content_edits
  for delete to authenticated using (owner_id = (select auth.uid()) and status = 'pending');

-- ==== supabase/schemas/0810_grants.sql ====
-- Privileges. Supabase grants everything new in public to anon, authenticated
-- and service_role: taken back, then signed-in users may only read the exposed
-- tables (RLS decides which rows) and set notifications.read_at. Every
-- function in public is the service role's API; private is for nobody but its
-- owner (SECURITY DEFINER functions use it). tests/catalog-security.test.ts checks this.
revoke all on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  from anon, authenticated;
grant select on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to authenticated;
grant update (read_at) on public.notifications to authenticated;
-- Sync: marks are read-only; a schedule's owner sets its intervals, types,
-- overlap and pause (owner and due times are the trigger's and the tick's).
revoke all on public.sync_marks, public.sync_schedules from anon, authenticated;
grant select on public.sync_marks, public.sync_schedules to authenticated;
grant insert (portal_id, content_types, incremental_every_minutes, full_every_minutes, overlap_seconds, paused,
               hubdb_sweep_every_minutes)
  on public.sync_schedules to authenticated;
grant update (content_types, incremental_every_minutes, full_every_minutes, overlap_seconds, paused, hubdb_sweep_every_minutes)
  on public.sync_schedules to authenticated;
grant delete on public.sync_schedules to authenticated;
grant select, insert, update, delete on public.sync_marks, public.sync_schedules to service_role;
-- Quiet-cycle roll-ups are read-only to their owner; settlement writes them.
revoke all on public.quiet_cycles from anon, authenticated;
grant select on public.quiet_cycles to authenticated;
grant select, insert, update, delete on public.quiet_cycles to service_role;
grant select, insert, update, delete on public.portals, public.runs, public.jobs, public.hubspot_content, public.notifications
  to service_role;
-- Publish: plans and items are read-only to their owner; an owner writes their
-- pending edits by these columns (owner, status, plan and source are the
-- trigger's and the functions').
revoke all on public.content_edits, public.publish_plans, public.publish_items from anon, authenticated;
grant select on public.content_edits, public.publish_plans, public.publish_items to authenticated;
grant insert (portal_id, content_type, hubspot_id, base_updated_at, patch) on public.content_edits to authenticated;
grant update (base_updated_at, patch) on public.content_edits to authenticated;
grant delete on public.content_edits to authenticated;
grant select, insert, update, delete on public.content_edits, public.publish_plans, public.publish_items to service_role;
revoke all on all sequences in schema public from anon, authenticated;

revoke all on all tables in schema private from public, anon, authenticated;
revoke all on all sequences in schema private from public, anon, authenticated;
revoke all on all functions in schema private from public, anon, authenticated;

revoke all on all functions in schema public from public, anon, authenticated;
grant execute on all functions in schema public to service_role;

-- ==== supabase/schemas/0950_storage_exports_bucket.sql ====
-- The private Storage bucket `exports` (CSV exports, written by the worker as
-- the service role) and its one policy: a signed-in user reads only objects
-- under their own folder (`<owner uuid>/<run>/<file>`); no write policy, so
-- RLS refuses writes to anon and authenticated. Owns nothing in storage (an
-- upsert of one row, one policy). Idempotent; without Storage's schema a notice.
do $$
begin
  if to_regclass('storage.buckets') is null or to_regclass('storage.objects') is null then
    raise notice 'storage schema not found: the exports bucket and its policy were not created (Supabase projects have it)';
    return;
  end if;

  -- 50 MB: the Free plan's global upload limit; raise both on a paid plan for larger exports.
  insert into storage.buckets (id, name, public, file_size_limit)
  values ('exports', 'exports', false, 52428800)
  on conflict (id) do update set public = false, file_size_limit = excluded.file_size_limit;

  drop policy if exists "exports: owners read their own files" on storage.objects;
  create policy "exports: owners read their own files" on storage.objects
    for select to authenticated
    using (bucket_id = 'exports' and (storage.foldername(name))[1] = (select auth.uid())::text);
end
$$;

-- ==== supabase/schemas/0960_realtime_publication.sql ====
-- Realtime: runs and jobs are in Supabase's publication, so a frontend can
-- subscribe to its runs' and jobs' progress (RLS applies to what it receives).
-- Without the publication: nothing, with a notice.
do $$
begin
  if exists (select 1 from pg_publication where pubname = 'supabase_realtime') then
    alter publication supabase_realtime add table public.runs, public.jobs;
  else
    raise notice 'publication supabase_realtime not found: runs and jobs are not published for realtime';
  end if;
end
$$;
