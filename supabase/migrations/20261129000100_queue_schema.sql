-- Queue schema: portals, runs, jobs, fetched content, notifications.
-- User-visible tables live in `public` (RLS in a later migration); secrets and
-- queue internals live in `private`, which the API never exposes.

create schema if not exists private;
revoke all on schema private from public;

-- Job kinds and their named settings: one place for leases, retries and backoff.
create table private.job_kinds (
  kind text primary key,
  lease_seconds integer not null check (lease_seconds between 5 and 3600),
  default_max_attempts integer not null check (default_max_attempts between 1 and 100),
  backoff_base_seconds integer not null check (backoff_base_seconds between 0 and 3600),
  backoff_max_seconds integer not null check (backoff_max_seconds >= backoff_base_seconds)
);
comment on table private.job_kinds is 'Per-kind queue settings: lease length, default max attempts, retry backoff.';

insert into private.job_kinds (kind, lease_seconds, default_max_attempts, backoff_base_seconds, backoff_max_seconds)
values ('fetch', 300, 3, 10, 600),
       ('export', 120, 3, 5, 300);

-- Content types the system knows (argument validation; the table checks spell the list out inline).
create function private.is_known_content_type(t text) returns boolean
language sql immutable parallel safe
set search_path = ''
as $$
  select t in ('site_pages', 'landing_pages', 'blog_posts', 'blog_authors',
               'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects')
$$;

-- A non-empty array of distinct known content types.
create function private.are_known_content_types(ts text[]) returns boolean
language sql immutable parallel safe
set search_path = ''
as $$
  select cardinality(ts) between 1 and 8
     and (select bool_and(private.is_known_content_type(t)) and count(distinct t) = count(*)
          from unnest(ts) as t)
$$;

-- Fencing tokens: every claim gets a new, never reused number.
create sequence private.fencing_token_seq as bigint;

create table public.portals (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid not null references auth.users (id) on delete cascade,
  hubspot_portal_id bigint not null check (hubspot_portal_id > 0),
  name text not null check (char_length(name) between 1 and 200),
  created_at timestamptz not null default now(),
  constraint portals_one_per_owner_and_hubspot_portal unique (owner_id, hubspot_portal_id),
  -- target of the (portal_id, owner_id) foreign keys below, which keep
  -- denormalised owners consistent with their portal
  constraint portals_id_owner_key unique (id, owner_id)
);
comment on table public.portals is 'A HubSpot portal connected by a user. The access token is in private.portal_credentials.';

create table private.portal_credentials (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  access_token text not null check (char_length(access_token) between 1 and 4096),
  updated_at timestamptz not null default now()
);
comment on table private.portal_credentials is 'HubSpot access tokens; readable only by the service role through private functions.';

create table public.runs (
  id uuid primary key default gen_random_uuid(),
  portal_id uuid not null,
  owner_id uuid not null,
  requested_by uuid not null references auth.users (id) on delete cascade,
  kind text not null references private.job_kinds (kind),
  status text not null default 'pending',
  content_types text[] not null,
  jobs_total integer not null default 0 check (jobs_total >= 0),
  jobs_completed integer not null default 0 check (jobs_completed >= 0),
  jobs_failed integer not null default 0 check (jobs_failed >= 0),
  jobs_stopped integer not null default 0 check (jobs_stopped >= 0),
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  constraint runs_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint runs_status_is_valid check (status in ('pending', 'running', 'completed', 'partially_failed', 'failed', 'stopped')),
  constraint runs_finished_iff_terminal check (
    (status in ('completed', 'partially_failed', 'failed', 'stopped')) = (finished_at is not null)),
  constraint runs_counts_within_total check (jobs_completed + jobs_failed + jobs_stopped <= jobs_total),
  -- Inline checks (no function calls): they run on every row write. Distinctness is create_run's job.
  constraint runs_content_types_known check (
    cardinality(content_types) between 1 and 8
    and content_types <@ array['site_pages', 'landing_pages', 'blog_posts', 'blog_authors',
                               'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects']::text[])
);
create index runs_portal_created_idx on public.runs (portal_id, created_at desc);
create index runs_owner_created_idx on public.runs (owner_id, created_at desc);
create index runs_unfinished_idx on public.runs (created_at) where finished_at is null;

create table public.jobs (
  id bigint generated always as identity primary key,
  run_id uuid not null references public.runs (id) on delete cascade,
  portal_id uuid not null,
  owner_id uuid not null,
  kind text not null references private.job_kinds (kind),
  content_type text not null,
  status text not null default 'pending',
  attempts integer not null default 0,
  max_attempts integer not null default 3,
  lease_seconds integer check (lease_seconds between 1 and 3600),
  lease_expires_at timestamptz,
  worker_id text,
  fencing_token bigint,
  run_after timestamptz not null default now(),
  progress_done integer not null default 0 check (progress_done >= 0),
  progress_total integer check (progress_total >= 0),
  checkpoint jsonb,
  result jsonb,
  last_error text,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now(),
  constraint jobs_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint jobs_status_is_valid check (status in ('pending', 'running', 'completed', 'failed', 'stopped')),
  constraint jobs_content_type_is_known check (content_type in ('site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects')),
  constraint jobs_attempts_within_max check (attempts between 0 and max_attempts),
  constraint jobs_max_attempts_range check (max_attempts between 1 and 100),
  constraint jobs_running_has_lease check (
    (status = 'running') = (lease_expires_at is not null and worker_id is not null and fencing_token is not null)),
  constraint jobs_finished_iff_terminal check (
    (status in ('completed', 'failed', 'stopped')) = (finished_at is not null)),
  constraint jobs_worker_id_length check (char_length(worker_id) <= 200),
  constraint jobs_last_error_length check (char_length(last_error) <= 4000)
);
comment on column public.jobs.fencing_token is 'Issued anew at every claim; only the holder of the current token may write.';
comment on column public.jobs.checkpoint is 'Where a resumed job continues (a fetch: the HubSpot after-cursor).';

-- Dedup: at most one active job per portal + kind + content type (race-free with ON CONFLICT).
create unique index jobs_one_active_per_portal_kind_type
  on public.jobs (portal_id, kind, content_type)
  where status in ('pending', 'running');
-- Claiming stays O(log n) however many finished jobs pile up: only claimable rows are indexed.
create index jobs_pending_due_idx on public.jobs (run_after, id) where status = 'pending';
create index jobs_running_lease_idx on public.jobs (lease_expires_at) where status = 'running';
create index jobs_run_idx on public.jobs (run_id);
create index jobs_finished_idx on public.jobs (finished_at) where finished_at is not null;
create index jobs_portal_idx on public.jobs (portal_id);

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
  constraint hubspot_content_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint hubspot_content_type_is_known check (content_type in ('site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects')),
  constraint hubspot_content_one_per_item unique (portal_id, content_type, hubspot_id)
);
create index hubspot_content_live_idx on public.hubspot_content (portal_id, content_type, id) where deleted_at is null;
create index hubspot_content_owner_idx on public.hubspot_content (owner_id);

create table public.notifications (
  id bigint generated always as identity primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  run_id uuid not null references public.runs (id) on delete cascade,
  kind text not null,
  message text not null check (char_length(message) <= 2000),
  created_at timestamptz not null default now(),
  read_at timestamptz,
  constraint notifications_kind_is_valid check (kind in ('run_completed', 'run_partially_failed', 'run_failed', 'run_stopped')),
  constraint notifications_one_per_run unique (run_id)
);
create index notifications_user_unread_idx on public.notifications (user_id, created_at desc) where read_at is null;

-- HubSpot request budget shared by every worker: a rolling-window log per HubSpot portal.
create table private.hubspot_request_budgets (
  hubspot_portal_id bigint primary key,
  granted_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table private.hubspot_request_budgets is 'Grant times of recent HubSpot requests per portal (rolling window), shared by all workers.';
