-- private.job_kinds: one row per job kind (fetch, export) with its lease,
-- retries, backoff, portal cap (running jobs per portal) and stalled-release limit.
-- Read by the queue functions; changed by operators (SQL), never by the API.
-- Rationale for the fetch cap: docs/decisions/0003-claiming.md.
create table private.job_kinds (
  kind text primary key,
  lease_seconds integer not null check (lease_seconds between 5 and 3600),
  default_max_attempts integer not null check (default_max_attempts between 1 and 100),
  backoff_base_seconds integer not null check (backoff_base_seconds between 0 and 3600),
  backoff_max_seconds integer not null check (backoff_max_seconds >= backoff_base_seconds),
  portal_cap integer
    constraint job_kinds_portal_cap_range check (portal_cap between 1 and 1000),
  max_stalled_releases integer not null default 5 check (max_stalled_releases between 1 and 1000)
);
comment on table private.job_kinds is 'Per-kind queue settings: lease length, default max attempts, retry backoff, portal cap, stalled-release limit.';
comment on column private.job_kinds.portal_cap is
  'The portal cap: running jobs of this kind per portal at most (null: none). fetch: 4 ≈ HubSpot''s 19 req/s per portal ÷ ~4.5 req/s one fetch job sends.';
comment on column private.job_kinds.max_stalled_releases is
  'Releases in a row without progress after which release_job fails the job instead.';
alter table private.job_kinds enable row level security;

insert into private.job_kinds (kind, lease_seconds, default_max_attempts, backoff_base_seconds, backoff_max_seconds, portal_cap)
values ('fetch', 300, 3, 10, 600, 4),
       ('export', 120, 3, 5, 300, null);
