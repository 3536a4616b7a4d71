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
