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
