-- private.publish_run_message(run): the notification text of a finished plan,
-- publish or restore run, with its items' counts (settle_finished_run uses it
-- for these kinds instead of private.run_notification_message). Stable, reads
-- its plan's items; owner only.
create function private.publish_run_message(p_run public.runs) returns text
language plpgsql
stable
set search_path = ''
as $$
declare
  v_plan public.publish_plans;
  v_c record;
begin
  select * into v_plan from public.publish_plans p
   where case p_run.kind when 'plan' then p.plan_run_id when 'publish' then p.publish_run_id else p.restore_run_id end = p_run.id;
  if p_run.kind = 'plan' then
    if v_plan.status = 'ready' then
      return format('Plan ready: %s items, %s to publish, %s conflicts, %s unchanged, %s missing, %s invalid. Approve it by %s UTC.',
        v_plan.items_total, v_plan.items_ready, v_plan.items_conflict, v_plan.items_unchanged, v_plan.items_missing,
        v_plan.items_invalid, to_char(v_plan.fresh_until at time zone 'UTC', 'YYYY-MM-DD HH24:MI'));
    end if;
    return format('Plan %s: %s of %s items read; its edits are pending again.%s',
      case p_run.status when 'stopped' then 'stopped' else 'failed' end,
      v_plan.items_ready + v_plan.items_conflict + v_plan.items_unchanged + v_plan.items_missing + v_plan.items_invalid,
      v_plan.items_total,
      coalesce(' First error: ' || left((select f.last_error from public.jobs f where f.run_id = p_run.id and f.status = 'failed'
                                          order by f.finished_at, f.id limit 1), 500), ''));
  end if;
  if p_run.kind = 'publish' then
    select count(*) as total,
           count(*) filter (where i.outcome = 'applied') as applied,
           count(*) filter (where i.outcome = 'scheduled') as scheduled,
           count(*) filter (where i.outcome = 'overwritten') as overwritten,
           count(*) filter (where i.outcome = 'unchanged') as unchanged,
           count(*) filter (where i.outcome = 'conflict') as conflict,
           count(*) filter (where i.outcome = 'invalid') as invalid,
           count(*) filter (where i.outcome = 'failed') as failed
      into v_c
      from public.publish_items i where i.plan_id = v_plan.id and i.plan_status = 'ready';
    return format('Publish run %s: %s of %s items applied%s%s%s%s%s%s.',
      replace(p_run.status, '_', ' '), v_c.applied + v_c.scheduled + v_c.overwritten, v_c.total,
      case when v_c.scheduled > 0
           then format(' (%s scheduled: HubSpot publishes them at %s UTC)', v_c.scheduled,
                       to_char(v_plan.publish_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI'))
           else '' end,
      case when v_c.unchanged > 0 then format(', %s already as planned', v_c.unchanged) else '' end,
      case when v_c.conflict > 0 then format(', %s conflicts (changed in HubSpot, not written)', v_c.conflict) else '' end,
      case when v_c.invalid > 0 then format(', %s refused by HubSpot', v_c.invalid) else '' end,
      case when v_c.failed > 0 then format(', %s failed', v_c.failed) else '' end,
      case when v_c.overwritten > 0 then format('; %s overwrote an edit made in HubSpot meanwhile (listed with the revision to restore)', v_c.overwritten) else '' end);
  end if;
  select count(*) as total,
         count(*) filter (where i.restore_outcome = 'restored') as restored,
         count(*) filter (where i.restore_outcome = 'conflict') as conflict,
         count(*) filter (where i.restore_outcome = 'invalid') as invalid,
         count(*) filter (where i.restore_outcome = 'failed') as failed
    into v_c
    from public.publish_items i where i.plan_id = v_plan.id and i.outcome in ('applied', 'scheduled');
  return format('Restore run %s: %s of %s items restored%s%s%s.',
    replace(p_run.status, '_', ' '), v_c.restored, v_c.total,
    case when v_c.conflict > 0 then format(', %s changed in HubSpot since our write (not restored)', v_c.conflict) else '' end,
    case when v_c.invalid > 0 then format(', %s refused by HubSpot', v_c.invalid) else '' end,
    case when v_c.failed > 0 then format(', %s failed', v_c.failed) else '' end);
end;
$$;
