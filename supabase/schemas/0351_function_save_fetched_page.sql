-- public.save_fetched_page(job, token, items, checkpoint, total): stores one
-- page of items already shaped as [{id, updatedAt, data}] for the lease holder;
-- the page's counts, null when fenced off. Locks the held job row FOR UPDATE.
-- For the service role only.
create function public.save_fetched_page(
  p_job_id bigint, p_token bigint, p_items jsonb, p_checkpoint jsonb, p_progress_total integer default null
) returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_ids text[];
  v_updated timestamptz[];
  v_data jsonb[];
begin
  if p_items is null or jsonb_typeof(p_items) <> 'array' then
    raise exception 'save_fetched_page: items must be a JSON array' using errcode = '22023';
  end if;
  if p_progress_total < 0 then
    raise exception 'save_fetched_page: progress_total must be non-negative' using errcode = '22023';
  end if;
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     for update;
  if not found then
    return null;
  end if;
  if v_job.kind <> 'fetch' then
    raise exception 'save_fetched_page: job % is a % job, not a fetch job', p_job_id, v_job.kind using errcode = '22023';
  end if;
  -- coalesce: a missing key gives a NULL type, which must fail the check too.
  if exists (select 1 from jsonb_array_elements(p_items) e
              where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') <> 'string'
                 or char_length(e ->> 'id') not between 1 and 200
                 or coalesce(jsonb_typeof(e -> 'data'), '') <> 'object') then
    raise exception 'save_fetched_page: every item needs a string id (1-200 characters) and an object data' using errcode = '22023';
  end if;
  select coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x."updatedAt"), '{}'), coalesce(array_agg(x.data), '{}')
    into v_ids, v_updated, v_data
    from jsonb_to_recordset(p_items) as x(id text, "updatedAt" timestamptz, data jsonb);
  return private.save_page(v_job, v_ids, v_updated, v_data, p_checkpoint, p_progress_total);
end;
$$;
