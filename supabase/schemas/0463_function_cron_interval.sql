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
