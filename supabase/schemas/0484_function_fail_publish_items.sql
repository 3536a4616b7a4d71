-- private.fail_publish_items(run, all): a publish or restore run's items that
-- will get no final outcome become `failed` (restore: restore_outcome), with
-- the job's last error: those of its jobs that failed or were stopped, or
-- (p_all, the run finished) every item still without one. An item `writing`
-- (or `restoring`) when its job ended may have been written: its message says
-- so (`writes` shows it was sent). An operator's retry_job reopens the job:
-- next_publish_items hands failed items out again. Returns how many. Called
-- by settlement (count_finished_jobs, settle_run, settle_publish_run), which
-- holds the run's lock; owner only.
create function private.fail_publish_items(p_run_id uuid, p_all boolean) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_kind text;
  v_plan uuid;
  v_failed integer;
begin
  select r.kind into v_kind from public.runs r where r.id = p_run_id;
  if v_kind = 'publish' then
    select p.id into v_plan from public.publish_plans p where p.publish_run_id = p_run_id;
  elsif v_kind = 'restore' then
    select p.id into v_plan from public.publish_plans p where p.restore_run_id = p_run_id;
  end if;
  if v_plan is null then
    return 0;
  end if;
  with ended as (
    select j.content_type,
           coalesce(left(j.last_error, 500),
                    case when j.status = 'stopped' then 'the run was stopped' else 'the job ended' end) as reason
      from public.jobs j
     where j.run_id = p_run_id and (p_all or j.status in ('failed', 'stopped'))
  ), failed as (
    update public.publish_items i
       set outcome = case when v_kind = 'publish' then 'failed' else i.outcome end,
           outcome_message = case when v_kind = 'publish'
             then case when i.outcome = 'writing'
                       then format('its job ended after our write was sent, before HubSpot''s answer was recorded (it may be written): %s', e.reason)
                       else format('not written: %s', e.reason) end
             else i.outcome_message end,
           restore_outcome = case when v_kind = 'restore' then 'failed' else i.restore_outcome end,
           restore_message = case when v_kind = 'restore'
             then case when i.restore_outcome = 'restoring'
                       then format('its job ended after our write was sent, before HubSpot''s answer was recorded (it may be restored): %s', e.reason)
                       else format('not restored: %s', e.reason) end
             else i.restore_message end,
           updated_at = now()
      from ended e
     where i.plan_id = v_plan and i.content_type = e.content_type
       and case when v_kind = 'publish'
                then i.plan_status = 'ready' and (i.outcome is null or i.outcome = 'writing')
                else i.outcome in ('applied', 'scheduled') and (i.restore_outcome is null or i.restore_outcome = 'restoring') end
    returning 1
  )
  select count(*) into v_failed from failed;
  return v_failed;
end;
$$;
