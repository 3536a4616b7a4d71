-- Constraint diet. Postgres rebuilds every CHECK expression of a table from
-- its stored text at each INSERT or UPDATE statement, and the queue's hot path
-- updates jobs and runs several times per job. The tables keep the CHECKs that
-- state the state machine's invariants:
--   jobs: a valid status, finished iff terminal (one check), running iff it has
--         a lease, a worker and a token, attempts within max;
--   runs: a valid status, finished iff terminal (one check), counts within the total.
-- The rest moves to where it is decided:
--   content types           -> the registry's foreign keys (…1000_content_type_registry);
--   lease_seconds, max_attempts, progress, totals, worker id and error lengths
--                           -> argument validation in the SECURITY DEFINER functions
--                              that write them (create_run, claim_jobs, heartbeat_job,
--                              release_job, fail_job, park_job, save_fetched_page);
--   notification kind and message
--                           -> built only by the settlement code (run_<status>, bounded text).
-- Only the service role writes these tables (see …0600 and tests/rls.test.ts).

alter table public.jobs
  drop constraint if exists jobs_status_is_valid,
  drop constraint if exists jobs_max_attempts_range,
  drop constraint if exists jobs_worker_id_length,
  drop constraint if exists jobs_last_error_length,
  drop constraint if exists jobs_lease_seconds_check,
  drop constraint if exists jobs_progress_done_check,
  drop constraint if exists jobs_progress_total_check,
  drop constraint if exists jobs_finished_iff_terminal,
  add constraint jobs_finished_iff_terminal check (
    (status in ('pending', 'running') and finished_at is null)
    or (status in ('completed', 'failed', 'stopped') and finished_at is not null));

alter table public.runs
  drop constraint if exists runs_status_is_valid,
  drop constraint if exists runs_jobs_total_check,
  drop constraint if exists runs_jobs_completed_check,
  drop constraint if exists runs_jobs_failed_check,
  drop constraint if exists runs_jobs_stopped_check,
  drop constraint if exists runs_finished_iff_terminal,
  add constraint runs_finished_iff_terminal check (
    (status in ('pending', 'running') and finished_at is null)
    or (status in ('completed', 'partially_failed', 'failed', 'stopped') and finished_at is not null));

alter table public.notifications
  drop constraint if exists notifications_kind_is_valid,
  drop constraint if exists notifications_message_check;

comment on constraint jobs_finished_iff_terminal on public.jobs is
  'The status is one of pending, running (not finished) or completed, failed, stopped (finished).';
comment on constraint runs_finished_iff_terminal on public.runs is
  'The status is one of pending, running (not finished) or completed, partially_failed, failed, stopped (finished).';
