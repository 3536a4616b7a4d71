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
