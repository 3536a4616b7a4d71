-- private.save_page(job, ids, times, data, checkpoint, total, page): stores a
-- validated page for the job row its caller holds FOR UPDATE (after checking
-- the fence): new items inserted, changed ones rewritten (both take a new
-- change_seq), unchanged ones not written at all; a full fetch records the
-- page's items in private.full_fetch_pages (what it saw; `page` adds the
-- body's digest and what it set next); then private.advance_fetch_job.
-- Called by save_fetched_page_raw; owner only. docs/decisions/0005, 0042.
create function private.save_page(
  p_job public.jobs, p_ids text[], p_updated timestamptz[], p_data jsonb[], p_checkpoint jsonb, p_progress_total integer,
  p_page private.full_fetch_pages default null
) returns jsonb
language plpgsql
set search_path = ''
as $$
declare
  v_counts jsonb;
  v_content_ids bigint[];
  v_content_seq bigint;
begin
  with incoming as (
    select distinct on (x.id) x.id, x.updated_at, x.data
      from unnest(p_ids, p_updated, p_data) as x(id, updated_at, data)
     order by x.id
  ), classified as (
    -- One probe of the unique index per item (LIMIT 1 keeps the lookup a
    -- parameterised index scan: a join would let the planner hash-join the
    -- page with every stored item of the portal and type).
    select i.id, i.updated_at, i.data, c.content_id, c.change_seq,
           c.content_id is null as is_new,
           (c.content_id is not null and (c.deleted_at is not null
              or c.hubspot_updated_at is distinct from i.updated_at or c.data is distinct from i.data)) as is_changed
      from incoming i
      left join lateral (
        select s.id as content_id, s.deleted_at, s.hubspot_updated_at, s.data, s.change_seq
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
    returning c.id, c.change_seq
  ), changed as (
    update public.hubspot_content c
       set data = k.data, hubspot_updated_at = k.updated_at, fetched_at = now(), last_seen_job_id = p_job.id, deleted_at = null,
           change_seq = nextval('private.content_change_seq')
      from classified k
     where c.id = any (array(select k2.content_id from classified k2 where k2.is_changed))
       and c.id = k.content_id
    returning c.id, c.change_seq
  ), written as (
    select w.id, w.change_seq from inserted w union all select w.id, w.change_seq from changed w
  )
  -- Unchanged items are not written: a full fetch's page row says it saw them.
  select jsonb_build_object(
           'fetched', count(*),
           'added', count(*) filter (where is_new),
           'updated', count(*) filter (where is_changed),
           'unchanged', count(*) filter (where not is_new and not is_changed)),
         array(select k.content_id from classified k where not k.is_new and not k.is_changed union all select w.id from written w),
         greatest(max(change_seq) filter (where not is_new and not is_changed), (select max(w.change_seq) from written w))
    into v_counts, v_content_ids, v_content_seq
    from classified;

  if not coalesce(p_job.checkpoint ->> 'mode' = 'incremental', false) then
    -- A full fetch re-reading a position in the same job (resumed after a lost job lease) saw both pages' items.
    insert into private.full_fetch_pages as f
           (portal_id, content_type, page_key, job_id, digest, context, content_ids, content_seq, next_after, max_updated)
    values (p_job.portal_id, p_job.content_type, coalesce(p_job.checkpoint ->> 'after', ''), p_job.id, p_page.digest,
            p_page.context, v_content_ids, coalesce(v_content_seq, 0), p_page.next_after, p_page.max_updated)
    on conflict (portal_id, content_type, page_key) do update
       set content_ids = case when f.job_id = excluded.job_id
                              then array(select distinct u from unnest(f.content_ids || excluded.content_ids) u)
                              else excluded.content_ids end,
           digest = case when f.job_id <> excluded.job_id or f.digest = excluded.digest then excluded.digest end,
           job_id = excluded.job_id, context = excluded.context, content_seq = excluded.content_seq,
           next_after = excluded.next_after, max_updated = excluded.max_updated;
  end if;
  perform private.advance_fetch_job(p_job, v_counts, p_checkpoint, p_progress_total);
  return v_counts;
end;
$$;
