-- The index of running jobs' leases serves lease queries only.
--
-- jobs_running_lease_idx was partial on status = 'running' alone, so any
-- statement that asks for running jobs could scan it whole and filter it: a
-- probe of one portal's running jobs (claim_jobs' cap counts and exclusions)
-- as well as the expired-lease scan it exists for. The planner picks that
-- now and then after an ANALYZE taken mid-drain, when the index looks small:
-- it holds an entry for every job that ran since the last vacuum, and under
-- eight concurrent claimers those are recently dead, not yet removable, so
-- every scan reads them all again. Measured with scenario 1's batch-50 loop
-- (8 workers, 20,000 jobs, an ANALYZE of jobs at 200, 400 or 700 ms):
-- pg_stat_user_indexes showed the index read ~700 tuples a scan in runs that
-- stayed fast, and 5 of 39 runs fell from ~14,000 to 440-1,700 jobs/s for the
-- rest of the run (30-90 s of Postgres CPU; perf: index scans fetching dead
-- heap tuples). The benchmark's own repetitions hit it without the ANALYZE
-- too (autovacuum): batch 50 and batch 100 each had one such repetition.
--
-- The predicate now also says lease_expires_at is not null. A running job
-- always has a lease (jobs_running_has_lease), so the index holds the same
-- rows, and every lease query (lease_expires_at <= now(), ordered by it)
-- implies the predicate; a probe that only says status = 'running' does not,
-- so it gets jobs_running_portal_idx or the active-job unique index, keyed by
-- portal. After the change: 0 slow runs in 32 with the same ANALYZE.
drop index if exists public.jobs_running_lease_idx;
create index jobs_running_lease_idx on public.jobs (lease_expires_at)
  where status = 'running' and lease_expires_at is not null;
