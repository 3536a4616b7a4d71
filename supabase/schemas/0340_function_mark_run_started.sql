-- private.mark_run_started(run): marks a pending run running (and clears its
-- waiting reason) once one of its jobs reports work. Its callers
-- (heartbeat_job, save_page) hold a job row, so the run row is taken FOR UPDATE
-- SKIP LOCKED, never waited for. For the owner only.
create function private.mark_run_started(p_run_id uuid) returns void
language plpgsql
set search_path = ''
as $$
begin
  if exists (select 1 from public.runs r
              where r.id = p_run_id and r.finished_at is null and (r.status = 'pending' or r.waiting_reason is not null)) then
    update public.runs r
       set status = 'running', started_at = coalesce(r.started_at, now()), waiting_reason = null
     where r.id in (select rr.id from public.runs rr
                     where rr.id = p_run_id and rr.finished_at is null and (rr.status = 'pending' or rr.waiting_reason is not null)
                       for update skip locked);
  end if;
end;
$$;
