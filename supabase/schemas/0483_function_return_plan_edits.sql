-- private.return_plan_edits(plan): a plan that failed or was discarded gives
-- its edits back: each planned edit of it is pending again, or discarded
-- when a newer pending edit of its item exists (one pending edit per item).
-- Returns how many are pending again. For create_publish_plan,
-- discard_publish_plan and settlement (private.settle_publish_run); owner only.
create function private.return_plan_edits(p_plan_id uuid) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_pending integer;
begin
  with returned as (
    update public.content_edits e
       set status = case when n.id is null then 'pending' else 'discarded' end,
           plan_id = case when n.id is null then null else e.plan_id end,
           updated_at = now()
      from public.content_edits e0
      left join lateral (select n0.id from public.content_edits n0
                          where n0.portal_id = e0.portal_id and n0.content_type = e0.content_type
                            and n0.hubspot_id = e0.hubspot_id and n0.status = 'pending'
                          limit 1) n on true
     where e0.id = e.id and e.plan_id = p_plan_id and e.status = 'planned'
    returning e.status
  )
  select count(*) filter (where r.status = 'pending') into v_pending from returned r;
  return v_pending;
end;
$$;
