-- private.settle_finished_run(run, compact): what follows a run's finish, the
-- one place for it: a plan, publish or restore run's own settlement first
-- (private.settle_publish_run: its plan, its items, its status by items), its
-- notification when private.run_notifies says so (the first error in the
-- message; for those kinds private.publish_run_message, with item counts),
-- and, for a quiet cycle with p_compact, the portal's older quiet cycles
-- folded (compact_quiet_cycles). Called by count_finished_jobs and
-- settle_run, which hold the run's lock; owner only.
create function private.settle_finished_run(p_run public.runs, p_compact boolean) returns void
language plpgsql
set search_path = ''
as $$
begin
  if p_run.kind in ('plan', 'publish', 'restore') then
    p_run := private.settle_publish_run(p_run);
  end if;
  if private.run_notifies(p_run) then
    insert into public.notifications (user_id, run_id, kind, message)
    values (p_run.owner_id, p_run.id, 'run_' || p_run.status,
            case when p_run.kind in ('plan', 'publish', 'restore') then private.publish_run_message(p_run)
            else private.run_notification_message(p_run.kind, p_run.status, p_run.jobs_total, p_run.jobs_completed,
              p_run.jobs_failed, p_run.jobs_stopped,
              case when p_run.jobs_failed > 0 then
                (select f.last_error from public.jobs f
                  where f.run_id = p_run.id and f.status = 'failed' order by f.finished_at, f.id limit 1) end) end)
    on conflict (run_id) do nothing;
  end if;
  if p_run.quiet and p_compact then
    perform private.compact_quiet_cycles(p_run.portal_id);
  end if;
end;
$$;
