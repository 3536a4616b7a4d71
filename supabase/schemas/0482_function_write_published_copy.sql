-- private.write_published_copy(job, ids, items): HubSpot's answers for items a
-- publish or restore job wrote (or found written by its own earlier request)
-- into the copy: each live public.hubspot_content row of the job's portal and
-- type among `ids` takes the answer as the fetch would store it (a HubDB row
-- with its tableId merged in), HubSpot's update time and a new change_seq,
-- unless the copy already holds that time or a newer one (a fetch stored it
-- meanwhile); tombstones are left alone. Returns how many rows it wrote.
-- The change feed's rule (0160: within a portal and type, change_seq follows
-- commit order) holds because the numbers are drawn under the lock every fetch
-- write holds: the type's active fetch job row, FOR UPDATE (waiting for a page
-- being saved); and no fetch job can start writing meanwhile, because the
-- portal's claim lock (claim_jobs' advisory lock, taken here and held to the
-- end of the transaction) keeps any job of the portal from being claimed until
-- this commits. A restore and a publish of one portal serialise on that lock
-- too. The caller holds its own job row. Owner only. docs/decisions/0070.
create function private.write_published_copy(p_job public.jobs, p_ids text[], p_items jsonb[]) returns integer
language plpgsql
set search_path = ''
as $$
declare
  v_written integer;
begin
  if coalesce(cardinality(p_ids), 0) = 0 then
    return 0;
  end if;
  perform pg_advisory_xact_lock(1903520117, hashtext(p_job.portal_id::text));
  perform 1 from public.jobs f
   where f.portal_id = p_job.portal_id and f.kind = 'fetch' and f.content_type = p_job.content_type
     and f.status in ('pending', 'running')
     for update;
  with incoming as (
    -- One probe of the unique index per item, by its key alone (LIMIT 1, as save_page's lookup).
    select distinct on (x.id) s.content_id,
           case when p_job.content_type = 'hubdb_rows'
                then x.item || jsonb_build_object('tableId', split_part(x.id, ':', 1)) else x.item end as data,
           private.hubspot_item_updated_at(x.item) as updated_at
      from unnest(p_ids, p_items) as x(id, item)
     cross join lateral (
       select c0.id as content_id from public.hubspot_content c0
        where c0.portal_id = p_job.portal_id and c0.content_type = p_job.content_type and c0.hubspot_id = x.id
        limit 1) s
     order by x.id
  )
  update public.hubspot_content c
     set data = i.data, hubspot_updated_at = coalesce(i.updated_at, c.hubspot_updated_at), fetched_at = now(),
         change_seq = nextval('private.content_change_seq')
    from incoming i
   where c.id = i.content_id
     and c.deleted_at is null
     and (c.hubspot_updated_at is null or i.updated_at is null or c.hubspot_updated_at < i.updated_at);
  get diagnostics v_written = row_count;
  return v_written;
end;
$$;
