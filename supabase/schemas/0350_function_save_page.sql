-- private.save_page(job, ids, times, data, checkpoint, total): stores a
-- validated page for the job row its caller holds FOR UPDATE (after checking
-- the fence): new items inserted, changed ones rewritten, unchanged ones only
-- marked seen (inserts and changes take a new change_seq); checkpoint,
-- progress, counts, lease; the run marked started.
-- Called by save_fetched_page(_raw); owner only. docs/decisions/0005.
create function private.save_page(
  p_job public.jobs, p_ids text[], p_updated timestamptz[], p_data jsonb[], p_checkpoint jsonb, p_progress_total integer
) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_counts jsonb;
begin
  with incoming as (
    select distinct on (x.id) x.id, x.updated_at, x.data
      from unnest(p_ids, p_updated, p_data) as x(id, updated_at, data)
     order by x.id
  ), classified as (
    -- One probe of the unique index per item (LIMIT 1 keeps the lookup a
    -- parameterised index scan: a join would let the planner hash-join the
    -- page with every stored item of the portal and type).
    select i.id, i.updated_at, i.data, c.content_id,
           c.content_id is null as is_new,
           (c.content_id is not null and (c.deleted_at is not null
              or c.hubspot_updated_at is distinct from i.updated_at or c.data is distinct from i.data)) as is_changed
      from incoming i
      left join lateral (
        select s.id as content_id, s.deleted_at, s.hubspot_updated_at, s.data
          from public.hubspot_content s
         where s.portal_id = p_job.portal_id and s.content_type = p_job.content_type and s.hubspot_id = i.id
         limit 1) c on true
  ), inserted as (
    -- One number per new row for both change_seq and inserted_seq (two column defaults would draw two).
    insert into public.hubspot_content as c
           (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, fetched_at, last_seen_job_id, deleted_at,
            change_seq, inserted_seq)
    select p_job.portal_id, p_job.owner_id, p_job.content_type, k.id, k.data, k.updated_at, now(), p_job.id, null, k.seq, k.seq
      from (select k0.*, nextval('private.content_change_seq') as seq from classified k0 where k0.is_new) k
    on conflict (portal_id, content_type, hubspot_id) do update
       set data = excluded.data, hubspot_updated_at = excluded.hubspot_updated_at, fetched_at = excluded.fetched_at,
           last_seen_job_id = excluded.last_seen_job_id, deleted_at = null,
           change_seq = nextval('private.content_change_seq')
    returning 1
  ), changed as (
    update public.hubspot_content c
       set data = k.data, hubspot_updated_at = k.updated_at, fetched_at = now(), last_seen_job_id = p_job.id, deleted_at = null,
           change_seq = nextval('private.content_change_seq')
      from classified k
     where c.id = any (array(select k2.content_id from classified k2 where k2.is_changed))
       and c.id = k.content_id
    returning 1
  ), unchanged as (
    -- Data and HubSpot's time stay as stored: no new TOAST value, no recompression.
    update public.hubspot_content c
       set fetched_at = now(), last_seen_job_id = p_job.id
     where c.id = any (array(select k.content_id from classified k where not k.is_new and not k.is_changed))
    returning 1
  )
  select jsonb_build_object(
           'fetched', (select count(*) from inserted) + (select count(*) from changed) + (select count(*) from unchanged),
           'added', count(*) filter (where is_new),
           'updated', count(*) filter (where is_changed),
           'unchanged', count(*) filter (where not is_new and not is_changed))
    into v_counts
    from classified;

  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + (v_counts ->> 'fetched')::integer,
         progress_total = coalesce(p_progress_total, j.progress_total),
         result = coalesce(j.result, '{}'::jsonb) || jsonb_build_object(
           'fetched', coalesce((j.result ->> 'fetched')::integer, 0) + (v_counts ->> 'fetched')::integer,
           'added', coalesce((j.result ->> 'added')::integer, 0) + (v_counts ->> 'added')::integer,
           'updated', coalesce((j.result ->> 'updated')::integer, 0) + (v_counts ->> 'updated')::integer,
           'unchanged', coalesce((j.result ->> 'unchanged')::integer, 0) + (v_counts ->> 'unchanged')::integer,
           'pages', coalesce((j.result ->> 'pages')::integer, 0) + 1),
         lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
         updated_at = now()
    from private.job_kinds k
   where j.id = p_job.id and k.kind = j.kind;
  perform private.mark_run_started(p_job.run_id);
  return v_counts;
end;
$$;
