-- private.run_notification_message(...): the text of a finished run's
-- notification. Immutable; called by the settling functions (settle_run,
-- complete_job, complete_jobs, fail_job), for the owner only. plpgsql on
-- purpose: docs/decisions/0002-job-state-machine-and-settlement.md.
create function private.run_notification_message(
  p_kind text, p_status text, p_total integer, p_completed integer, p_failed integer, p_stopped integer, p_first_error text
) returns text
language plpgsql immutable
set search_path = ''
as $$
begin
  return case p_status
    when 'completed' then format('%s run completed: all %s jobs succeeded.', initcap(p_kind), p_total)
    when 'partially_failed' then format('%s run partially failed: %s of %s jobs completed, %s failed.%s',
      initcap(p_kind), p_completed, p_total, p_failed, coalesce(' First error: ' || left(p_first_error, 500), ''))
    when 'failed' then format('%s run failed: all %s jobs failed.%s',
      initcap(p_kind), p_total, coalesce(' First error: ' || left(p_first_error, 500), ''))
    else format('%s run stopped: %s of %s jobs had completed, %s stopped.', initcap(p_kind), p_completed, p_total, p_stopped)
  end;
end;
$$;
