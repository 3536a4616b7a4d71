-- private.run_is_quiet(run): whether every job of the run completed having
-- added, updated and deleted nothing (by their results). Settlement asks it
-- only for a scheduled fetch finishing with no failed or stopped job, to set
-- runs.quiet. plpgsql on purpose (docs/decisions/0002); for the owner only.
create function private.run_is_quiet(p_run_id uuid) returns boolean
language plpgsql stable
set search_path = ''
as $$
begin
  return not exists (
    select 1 from public.jobs j
     where j.run_id = p_run_id
       and (j.status <> 'completed'
            or coalesce((j.result ->> 'added')::integer, 0) <> 0
            or coalesce((j.result ->> 'updated')::integer, 0) <> 0
            or coalesce((j.result ->> 'deleted')::integer, 0) <> 0));
end;
$$;
