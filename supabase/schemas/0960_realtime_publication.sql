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
