-- public.save_fetched_page_raw(job, fencing_token, body, context): stores one page as
-- HubSpot sent it (a CMS v3 list response, parsed here; HubDB rows take their
-- table's id from context, and nothing else of their table: its name lives in
-- its hubdb_tables item, so a renamed table renames no row) and the next checkpoint, for the job's holder only:
-- {fetched, added, updated, unchanged, checkpoint}, null when fenced off. The
-- job row is locked FOR UPDATE after parsing. An incremental job (checkpoint
-- mode 'incremental') keeps its mode, since and phase in the checkpoint: its
-- 'changed' listing is upserted, then its 'archived' listing becomes
-- tombstones (save_archived_page); HubDB rows read their changed rows
-- ('changed'), then, when the checkpoint's hubdbSweep is not false (a sweep
-- cycle: create_run; its changed pass lists in 'recount' the tables it wrote
-- rows to, counted again for the sweep), sweep the tables that lost rows instead ('sweep': a page
-- per table read whole, its rows changed since upserted and 'missingIds',
-- the ids of its stored rows HubSpot no longer lists (all of them for a table
-- no longer live), given to save_swept_table). Every job tracks 'maxUpdated', the newest
-- update time saved (HubDB rows: of their tables), for the sync mark, and an
-- incremental one 'maxArchived', the newest of its archived listing. A full
-- fetch's page that HubSpot sends again byte for byte (its digest and context
-- as private.full_fetch_pages holds them at its position) and whose items
-- nothing wrote since is counted unchanged without being parsed. The service
-- role only (the worker).
create function public.save_fetched_page_raw(p_job_id bigint, p_fencing_token bigint, p_body text, p_context jsonb default null)
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
  v_next_table_id text;
  v_checkpoint jsonb;
  v_ids text[];
  v_updated timestamptz[];
  v_data jsonb[];
  v_counts jsonb;
  v_incremental boolean;
  v_archived boolean;
  v_sweep boolean;
  v_max timestamptz;
  v_keep jsonb;
  v_digest bytea;
  v_known private.full_fetch_pages;
  v_peeked jsonb;
  v_look boolean := false;
  v_page_max timestamptz;
begin
  if p_body is null then
    raise exception 'save_fetched_page_raw: the page body is required' using errcode = '22004';
  end if;
  if p_context is not null and jsonb_typeof(p_context) not in ('object', 'null') then
    raise exception 'save_fetched_page_raw: context must be a JSON object' using errcode = '22023';
  end if;
  -- A full fetch's page may be one its position gave before, unchanged (a look, not a lock).
  -- Small pages (an empty listing's end, a few items) are parsed: cheaper than the look.
  if octet_length(p_body) >= 4096 then
    select j.checkpoint into v_peeked from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       and j.kind = 'fetch' and not coalesce(j.checkpoint ->> 'mode' = 'incremental', false);
    v_look := found;
  end if;
  if v_look then
    v_digest := sha256(convert_to(p_body, 'UTF8'));
    select f.* into v_known from public.jobs j
      join private.full_fetch_pages f
        on f.portal_id = j.portal_id and f.content_type = j.content_type and f.page_key = coalesce(j.checkpoint ->> 'after', '')
     where j.id = p_job_id and f.digest = v_digest and f.context is not distinct from p_context
       and not exists (select 1 from public.hubspot_content c
                        where c.id = any (f.content_ids) and (c.deleted_at is not null or c.change_seq > f.content_seq));
  end if;
  if v_known.page_key is not null then
    select * into v_job from public.jobs j
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
       for update;
    if not found then
      return null;
    end if;
    if v_job.checkpoint is distinct from v_peeked then
      v_known := null; -- moved on meanwhile: parsed below
    end if;
  end if;

  if v_known.page_key is not null then
    v_after := v_known.next_after;
    v_page_max := v_known.max_updated;
    v_results := '[]'::jsonb;
    v_rows := v_job.content_type = 'hubdb_rows';
    v_table_id := nullif(p_context ->> 'tableId', '');
    v_next_table_id := nullif(p_context ->> 'nextTableId', '');
  else
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
     where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
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
           coalesce(array_agg(case when v_rows then e || jsonb_build_object('tableId', v_table_id) else e end), '{}')
      into v_ids, v_updated, v_data
      from jsonb_array_elements(v_results) e
      cross join lateral (select coalesce(nullif(e -> 'updated', 'null'::jsonb), e -> 'updatedAt') as v) t;
    v_page_max := (select max(u) from unnest(v_updated) u);
  end if;

  v_incremental := coalesce(v_job.checkpoint ->> 'mode' = 'incremental', false);
  v_archived := v_incremental and not v_rows and coalesce(v_job.checkpoint ->> 'phase' = 'archived', false);
  v_sweep := v_incremental and v_rows and coalesce(v_job.checkpoint ->> 'phase' = 'sweep', false);
  if v_incremental and not v_rows and v_after is null and not v_archived then
    -- The changed listing is done: the archived one comes next.
    v_checkpoint := jsonb_build_object('after', null, 'finished', false, 'phase', 'archived');
  elsif not v_rows then
    v_checkpoint := jsonb_build_object('after', v_after, 'finished', v_after is null);
  elsif v_after is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":%s}', to_json(v_table_id), to_json(v_after)), 'finished', false);
  elsif v_next_table_id is not null then
    v_checkpoint := jsonb_build_object('after', format('{"tableId":%s,"after":null}', to_json(v_next_table_id)), 'finished', false);
  elsif v_incremental and coalesce(v_job.checkpoint ->> 'phase', 'changed') <> 'sweep'
        and coalesce((v_job.checkpoint ->> 'hubdbSweep')::boolean, true) then
    -- The changed rows are read: on a sweep cycle (create_run's hubdbSweep) the tables that lost rows are next.
    v_checkpoint := jsonb_build_object('after', null, 'finished', false, 'phase', 'sweep');
  else
    v_checkpoint := jsonb_build_object('after', null, 'finished', true);
  end if;

  -- What the job keeps across pages: its mode, since and phase, and the newest update time saved.
  v_keep := coalesce(v_job.checkpoint, '{}'::jsonb) - 'after' - 'finished';
  if not v_archived then
    v_max := greatest((v_keep ->> 'maxUpdated')::timestamptz,
                      case when v_rows then (p_context ->> 'tableUpdatedAt')::timestamptz
                           else v_page_max end);
    if v_max is not null then
      v_keep := v_keep || jsonb_build_object('maxUpdated', v_max);
    end if;
  elsif v_page_max is not null then
    -- The newest archive time saved, for the mark a probe asks archives after (sync_marks.archived_high_water).
    v_keep := v_keep || jsonb_build_object('maxArchived', greatest((v_keep ->> 'maxArchived')::timestamptz, v_page_max));
  end if;
  -- A sweep cycle's changed pass: the tables it writes rows to are counted again for the sweep (decision 0056).
  if v_rows and v_incremental and not v_sweep and v_keep ? 'storedRows' and cardinality(v_ids) > 0
     and not coalesce(v_keep -> 'recount' ? v_table_id, false) then
    v_keep := v_keep || jsonb_build_object('recount', coalesce(v_keep -> 'recount', '[]'::jsonb) || to_jsonb(v_table_id));
  end if;
  v_checkpoint := v_keep || v_checkpoint;

  if v_known.page_key is not null then
    v_counts := jsonb_build_object('fetched', cardinality(v_known.content_ids), 'added', 0, 'updated', 0,
                                   'unchanged', cardinality(v_known.content_ids));
    update private.full_fetch_pages f set job_id = v_job.id
     where f.portal_id = v_known.portal_id and f.content_type = v_known.content_type and f.page_key = v_known.page_key;
    perform private.advance_fetch_job(v_job, v_counts, v_checkpoint, null);
  elsif cardinality(v_ids) = 0 and not (v_sweep and v_table_id is not null) then
    -- Nothing listed (a quiet cycle's pages, a listing's end): only the job moves on.
    v_counts := jsonb_build_object('fetched', 0, 'added', 0, 'updated', 0, 'unchanged', 0);
    perform private.advance_fetch_job(v_job, v_counts, v_checkpoint, null);
  elsif v_archived then
    v_counts := private.save_archived_page(v_job, v_ids, v_checkpoint);
  elsif v_sweep and v_table_id is not null then
    if coalesce(jsonb_typeof(v_body -> 'missingIds'), '') <> 'array'
       or jsonb_path_exists(v_body, '$.missingIds[*] ? ((@.type() != "string" && @.type() != "number") || @ == "")') then
      raise exception 'save_fetched_page_raw: a sweep page needs missingIds, the ids of its table''s stored rows HubSpot no longer lists' using errcode = '22023';
    end if;
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null)
                || private.save_swept_table(v_job, v_table_id, array(select jsonb_array_elements_text(v_body -> 'missingIds')));
  elsif v_incremental then
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null);
  else
    v_counts := private.save_page(v_job, v_ids, v_updated, v_data, v_checkpoint, null,
      row(null, null, null, null, v_digest, p_context, null, null, v_after, v_page_max)::private.full_fetch_pages);
  end if;
  return v_counts || jsonb_build_object('checkpoint', v_checkpoint);
end;
$$;
