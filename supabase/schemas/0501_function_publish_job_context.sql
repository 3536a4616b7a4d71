-- public.publish_job_context(job, fencing_token): what the holder of a publish (or
-- restore) job reads of its plan besides its items: the write mode (`live`,
-- `draft`, `schedule`) and publish_at, and, for a publish job, where its
-- window events can be, on HubSpot's clock, for its audit-log read: after
-- `window_after` (the earliest of its written items' windows' starts: each
-- item's re-read time, less a second for the clocks' granularity, but never
-- before its pre-image's update time T0, which alone bounds an item re-read
-- without a time), before `window_before` (just after the latest write's
-- update time T2, so that our own writes' events, which name our writer, are
-- in the read), and how many written items (`applied`, `scheduled`,
-- `overwritten`, writes >= 1) it covers; the window columns are null while
-- none is written, and for a restore job. One row. Reads only, no locks.
-- 55000 for anyone but the holder; 22023 for a job of another kind. The
-- service role only (the worker). docs/publish.md.
create function public.publish_job_context(p_job_id bigint, p_fencing_token bigint)
returns table (mode text, publish_at timestamptz, window_after timestamptz, window_before timestamptz, written integer)
language plpgsql
stable
security definer
set search_path = ''
as $$
declare
  v_held record;
  v_job public.jobs;
  v_plan uuid;
begin
  select h.job, h.plan_id into v_held from private.publish_holder(p_job_id, p_fencing_token, array['publish', 'restore'], false) h;
  v_job := v_held.job;
  v_plan := v_held.plan_id;
  return query
    select p.mode, p.publish_at, w.after_at, w.before_at, coalesce(w.items, 0)
      from public.publish_plans p
     cross join lateral (
       select min(greatest(i.pre_updated_at, coalesce(i.reread_at - interval '1 second', i.pre_updated_at))) as after_at,
              max(i.applied_updated_at) + interval '1 millisecond' as before_at,
              count(*)::integer as items
         from public.publish_items i
        where v_job.kind = 'publish' and i.plan_id = p.id and i.content_type = v_job.content_type
          and i.outcome in ('applied', 'scheduled', 'overwritten') and i.writes >= 1) w
     where p.id = v_plan;
end;
$$;
