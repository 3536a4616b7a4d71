-- public.create_publish_plan(portal, user, types, mode, publish_at): a plan
-- of the portal's pending edits (of the given types; null: all): the user's
-- earlier plans of the portal that were never approved (ready or failed)
-- covering one of these types are discarded first, their edits pending again
-- (private.return_plan_edits); then the pending edits become `planned`, one
-- item each (in content type and HubSpot id order: HubDB rows grouped by
-- table), and a `plan` run reads them (create_run, one job per type, totals =
-- items per type). Refuses, with nothing changed: a portal that is not the
-- user's (P0002), disconnected (55000), no pending edits (P0002), more than
-- private.publish_settings.max_edits_per_plan (54000), a plan of the portal
-- still planning one of the types (55006, hint busy), draft or schedule mode
-- for types other than pages and posts, schedule without a future time
-- (22023). Takes the portal's plan lock (an advisory lock: one plan made at
-- a time per portal), then the edits' rows. The service role only (the
-- orchestrator, for the signed-in user). docs/publish.md.
create function public.create_publish_plan(
  p_portal_id uuid, p_user uuid, p_content_types text[] default null, p_mode text default 'live',
  p_publish_at timestamptz default null
) returns table (plan_id uuid, run_id uuid, items integer)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_portal public.portals;
  v_settings private.publish_settings;
  v_plan uuid;
  v_old uuid;
  v_types text[];
  v_totals integer[];
  v_items integer;
  v_run record;
begin
  if p_portal_id is null or p_user is null then
    raise exception 'create_publish_plan: portal and user are required' using errcode = '22004';
  end if;
  if p_mode is null or p_mode not in ('live', 'draft', 'schedule') then
    raise exception 'create_publish_plan: mode must be live, draft or schedule' using errcode = '22023';
  end if;
  if (p_mode = 'schedule') <> (p_publish_at is not null) then
    raise exception 'create_publish_plan: a publish time goes with schedule mode, and only with it' using errcode = '22023';
  end if;
  if p_publish_at <= now() then
    raise exception 'create_publish_plan: the publish time must be in the future' using errcode = '22023';
  end if;
  if p_content_types is not null and not private.are_known_content_types(p_content_types) then
    raise exception 'create_publish_plan: content types must be 1-8 distinct known types, got %', p_content_types using errcode = '22023';
  end if;
  select * into v_portal from public.portals p where p.id = p_portal_id and p.owner_id = p_user;
  if not found then
    raise exception 'create_publish_plan: portal % not found', p_portal_id using errcode = 'P0002';
  end if;
  if v_portal.disconnected_at is not null then
    raise exception 'create_publish_plan: the portal is disconnected: reconnect it first' using errcode = '55000', hint = 'disconnected';
  end if;
  select * into v_settings from private.publish_settings s where s.id;

  -- One plan made at a time per portal (a lock class of its own; claim_jobs' is 1903520117).
  perform pg_advisory_xact_lock(1903520118, hashtext(p_portal_id::text));
  if exists (select 1 from public.publish_plans p
              where p.portal_id = p_portal_id and p.status = 'planning'
                and (p_content_types is null or p.content_types && p_content_types)) then
    raise exception 'create_publish_plan: a plan of this portal is still being made for one of these types: wait for it'
      using errcode = '55006', hint = 'busy';
  end if;
  for v_old in
    update public.publish_plans p set status = 'discarded'
     where p.portal_id = p_portal_id and p.status in ('ready', 'failed')
       and (p_content_types is null or p.content_types && p_content_types)
    returning p.id
  loop
    perform private.return_plan_edits(v_old);
  end loop;

  insert into public.publish_plans (portal_id, owner_id, created_by, content_types, mode, publish_at)
  values (p_portal_id, v_portal.owner_id, p_user,
          coalesce(p_content_types, array(select distinct f.content_type from private.editable_fields f order by 1)), p_mode, p_publish_at)
  returning id into v_plan;

  with taken as (
    update public.content_edits e
       set status = 'planned', plan_id = v_plan, updated_at = now()
     where e.portal_id = p_portal_id and e.status = 'pending'
       and (p_content_types is null or e.content_type = any (p_content_types))
    returning e.id, e.content_type, e.hubspot_id, e.base_updated_at, e.patch
  ), inserted as (
    insert into public.publish_items (plan_id, portal_id, owner_id, content_type, hubspot_id, edit_id, base_updated_at, after)
    select v_plan, p_portal_id, v_portal.owner_id, t.content_type, t.hubspot_id, t.id, t.base_updated_at, t.patch
      from taken t
     order by t.content_type, t.hubspot_id
    returning content_type
  ), per_type as (
    select i.content_type, count(*)::integer as n from inserted i group by i.content_type
  )
  select array_agg(pt.content_type order by pt.content_type), array_agg(pt.n order by pt.content_type), sum(pt.n)::integer
    into v_types, v_totals, v_items
    from per_type pt;

  if v_types is null then
    raise exception 'create_publish_plan: no pending edits to plan' using errcode = 'P0002', hint = 'no_edits';
  end if;
  if v_items > v_settings.max_edits_per_plan then
    raise exception 'create_publish_plan: % pending edits, more than one plan takes (%)', v_items, v_settings.max_edits_per_plan
      using errcode = '54000', hint = 'too_many';
  end if;
  if p_mode <> 'live' and exists (select 1 from unnest(v_types) t where t not in ('site_pages', 'landing_pages', 'blog_posts')) then
    raise exception 'create_publish_plan: % mode writes pages and posts only: plan the other types (%) apart',
      p_mode, array_to_string(array(select t from unnest(v_types) t where t not in ('site_pages', 'landing_pages', 'blog_posts')), ', ')
      using errcode = '22023';
  end if;

  select * into v_run from public.create_run(p_portal_id, p_user, 'plan', v_types, v_totals);
  if v_run.run_id is null or cardinality(v_run.duplicate_types) > 0 then
    raise exception 'create_publish_plan: a plan of this portal is still being made for %: wait for it',
      array_to_string(v_run.duplicate_types, ', ') using errcode = '55006', hint = 'busy';
  end if;
  update public.publish_plans p
     set content_types = v_types, plan_run_id = v_run.run_id, items_total = v_items
   where p.id = v_plan;
  return query select v_plan, v_run.run_id, v_items;
end;
$$;
