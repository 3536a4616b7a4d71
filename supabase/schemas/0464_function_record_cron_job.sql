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
