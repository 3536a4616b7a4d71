-- Fetched pages are parsed in Postgres: the worker hands over HubSpot's response
-- text and the database turns it into items, next to the data and in C, instead
-- of the worker parsing, re-modelling and re-serialising every item.
--
-- private.save_page holds the one implementation of storing a page (used by
-- save_fetched_page and save_fetched_page_raw): a single set-based upsert, no
-- per-row loop anywhere.

-- Stores a validated page for the locked job row p_job (the caller holds it
-- FOR UPDATE and has checked the fence): upserts the items (idempotent on
-- portal + type + HubSpot id), saves the checkpoint, adds to progress and the
-- job's counts, extends the lease and marks the run started. Returns the
-- page's counts {fetched, added, updated, unchanged}.
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
    select i.*, c.hubspot_id is null as is_new,
           (c.hubspot_id is not null and (c.deleted_at is not null
              or c.hubspot_updated_at is distinct from i.updated_at or c.data is distinct from i.data)) as is_changed
      from incoming i
      left join public.hubspot_content c
        on c.portal_id = p_job.portal_id and c.content_type = p_job.content_type and c.hubspot_id = i.id
  ), upserted as (
    insert into public.hubspot_content as c
           (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, fetched_at, last_seen_job_id, deleted_at)
    select p_job.portal_id, p_job.owner_id, p_job.content_type, i.id, i.data, i.updated_at, now(), p_job.id, null
      from incoming i
    on conflict (portal_id, content_type, hubspot_id) do update
       set data = excluded.data, hubspot_updated_at = excluded.hubspot_updated_at, fetched_at = excluded.fetched_at,
           last_seen_job_id = excluded.last_seen_job_id, deleted_at = null
    returning 1
  )
  select jsonb_build_object(
           'fetched', (select count(*) from upserted),
           'added', count(*) filter (where is_new),
           'updated', count(*) filter (where is_changed),
           'unchanged', count(*) filter (where not is_new and not is_changed))
    into v_counts
    from classified;

  update public.jobs j
     set checkpoint = p_checkpoint,
         progress_done = j.progress_done + (v_counts ->> 'fetched')::integer,
         progress_total = coalesce(p_progress_total, j.progress_total),
         result = jsonb_build_object(
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

-- The same function as before (same checks, same answers), now storing through private.save_page.
-- p_items: [{"id": text, "updatedAt": timestamptz|null, "data": object}, ...]
create or replace function public.save_fetched_page(
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

-- Saves one page exactly as HubSpot sent it, for the current lease holder, in
-- one transaction: parses p_body (a CMS v3 list response), takes each of its
-- `results` as an item (id `id`, HubSpot time `updated`, else `updatedAt`,
-- data the whole result), computes the next checkpoint {after, finished} from
-- `paging.next.after`, and stores items and checkpoint like save_fetched_page.
--
-- HubDB rows (the job's type is hubdb_rows): p_context is
-- {"tableId": text, "tableName": text|null, "nextTableId": text|null}; item ids
-- are `<tableId>:<rowId>`, data gets tableId and tableName merged in, and the
-- checkpoint's `after` is the composite cursor {"tableId":…,"after":…} (the
-- next page of this table, else the first page of the next table, else done).
-- Other types ignore p_context.
--
-- Returns {fetched, added, updated, unchanged, checkpoint} (the checkpoint it
-- stored), or null when the caller was fenced off (nothing written). A body
-- that is not JSON or has no results array, or a result without an id, raises
-- (22P02 / 22023) and writes nothing.
create function public.save_fetched_page_raw(p_job_id bigint, p_token bigint, p_body text, p_context jsonb default null)
returns jsonb
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_body jsonb;
  v_results jsonb;
  v_after text;
  v_job public.jobs;
  v_rows boolean;
  v_table_id text;
  v_table_name text;
  v_next_table_id text;
  v_checkpoint jsonb;
  v_ids text[];
  v_updated timestamptz[];
  v_data jsonb[];
  v_counts jsonb;
begin
  if p_body is null then
    raise exception 'save_fetched_page_raw: the page body is required' using errcode = '22004';
  end if;
  if p_context is not null and jsonb_typeof(p_context) not in ('object', 'null') then
    raise exception 'save_fetched_page_raw: context must be a JSON object' using errcode = '22023';
  end if;
  -- Parsed before the job row is locked: the lock is held only for the writes.
  begin
    v_body := p_body::jsonb;
  exception when others then
    raise exception 'save_fetched_page_raw: the HubSpot page is not valid JSON (%)', sqlerrm using errcode = '22P02';
  end;
  v_results := v_body -> 'results';
  if jsonb_typeof(v_body) <> 'object' or coalesce(jsonb_typeof(v_results), '') <> 'array' then
    raise exception 'save_fetched_page_raw: the HubSpot page has no results array' using errcode = '22023';
  end if;
  v_after := case when jsonb_typeof(v_body #> '{paging,next,after}') = 'string' then nullif(v_body #>> '{paging,next,after}', '') end;

  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_token and j.status = 'running' and j.lease_expires_at > now()
     for update;
  if not found then
    return null;
  end if;
  if v_job.kind <> 'fetch' then
    raise exception 'save_fetched_page_raw: job % is a % job, not a fetch job', p_job_id, v_job.kind using errcode = '22023';
  end if;

  v_rows := v_job.content_type = 'hubdb_rows';
  if v_rows then
    v_table_id := nullif(p_context ->> 'tableId', '');
    v_table_name := p_context ->> 'tableName';
    v_next_table_id := nullif(p_context ->> 'nextTableId', '');
    if v_table_id is null and (jsonb_array_length(v_results) > 0 or v_after is not null) then
      raise exception 'save_fetched_page_raw: a page of HubDB rows needs its tableId in the context' using errcode = '22023';
    end if;
  end if;

  -- coalesce: a missing key gives a NULL type, which must fail the check too.
  if exists (select 1 from jsonb_array_elements(v_results) e
              where jsonb_typeof(e) <> 'object' or coalesce(jsonb_typeof(e -> 'id'), '') not in ('string', 'number')
                 or char_length(e ->> 'id') = 0
                 or char_length(case when v_rows then v_table_id || ':' || (e ->> 'id') else e ->> 'id' end) > 200) then
    raise exception 'save_fetched_page_raw: every result must be an object with an id (1-200 characters)' using errcode = '22023';
  end if;

  -- HubSpot's time: `updated` (CMS), else `updatedAt` (HubDB); not a string: none.
  select coalesce(array_agg(case when v_rows then v_table_id || ':' || (e ->> 'id') else e ->> 'id' end), '{}'),
         coalesce(array_agg(case when jsonb_typeof(t.v) = 'string' then (t.v #>> '{}')::timestamptz end), '{}'),
         coalesce(array_agg(case when v_rows then e || jsonb_build_object('tableId', v_table_id, 'tableName', v_table_name) else e end), '{}')
    into v_ids, v_updated, v_data
    from jsonb_array_elements(v_results) e
    cross join lateral (select coalesce(nullif(e -> 'updated', 'null'::jsonb), e -> 'updatedAt') as v) t;

  if not v_rows then
    v_checkpoint := jsonb_build_object('after', v_after, 'finished', v_after is null);
  elsif v_after is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":%s}', to_json(v_table_id), to_json(v_after)), 'finished', false);
  elsif v_next_table_id is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":null}', to_json(v_next_table_id)), 'finished', false);
  else
    v_checkpoint := jsonb_build_object('after', null, 'finished', true);
  end if;

  v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null);
  return v_counts || jsonb_build_object('checkpoint', v_checkpoint);
end;
$$;

revoke all on function private.save_page(public.jobs, text[], timestamptz[], jsonb[], jsonb, integer) from public, anon, authenticated;
revoke all on function public.save_fetched_page_raw(bigint, bigint, text, jsonb) from public, anon, authenticated;
grant execute on function public.save_fetched_page_raw(bigint, bigint, text, jsonb) to service_role;
