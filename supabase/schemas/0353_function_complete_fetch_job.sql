-- public.complete_fetch_job(job, fencing_token): completes the holder's fetch job and
-- moves the type's sync mark (public.sync_marks), the only place it moves. A
-- full fetch tombstones its type's items none of its pages held (private.
-- full_fetch_pages) and sets the mark to the newest update time it saved,
-- capped at its start (the archive mark: its start); a HubDB tables one
-- that tombstoned tables tombstones their stored rows too
-- (private.tombstone_rows_of_gone_tables, counted as hubdbRowsDeleted in its
-- result); an incremental one deletes nothing (its archived listings and
-- sweeps did) and only raises the marks (the archive mark to its newest
-- archive, at least its since). A
-- probe (complete_probe_job) moves no mark. Settles the run; false
-- for anyone else. Locks the run, then the job. The service role only.
create function public.complete_fetch_job(p_job_id bigint, p_fencing_token bigint) returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_deleted integer := 0;
  v_rows_deleted integer;
  v_incremental boolean;
  v_max timestamptz;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'fetch'
     for update;
  if not found then
    return false;
  end if;
  v_incremental := coalesce(v_job.checkpoint ->> 'mode' = 'incremental', false);
  v_max := (v_job.checkpoint ->> 'maxUpdated')::timestamptz;

  if not v_incremental then
    -- Live items less those this job's pages held: EXCEPT (hashed or sorted, spilling if it must).
    update public.hubspot_content c
       set deleted_at = now(), last_seen_job_id = p_job_id, change_seq = nextval('private.content_change_seq')
     where c.deleted_at is null and c.id = any (array(
             select s.id from public.hubspot_content s
              where s.portal_id = v_job.portal_id and s.content_type = v_job.content_type and s.deleted_at is null
             except
             select unnest(f.content_ids) from private.full_fetch_pages f
              where f.portal_id = v_job.portal_id and f.content_type = v_job.content_type and f.job_id = p_job_id));
    get diagnostics v_deleted = row_count;
    -- A table gone takes its rows in the same transaction, whether or not a rows job runs this cycle.
    if v_deleted > 0 and v_job.content_type = 'hubdb_tables' then
      v_rows_deleted := private.tombstone_rows_of_gone_tables(v_job);
    end if;
    -- Positions this job did not read again hold nothing it saw.
    delete from private.full_fetch_pages f
     where f.portal_id = v_job.portal_id and f.content_type = v_job.content_type and f.job_id <> p_job_id;
    insert into public.sync_marks as m (portal_id, owner_id, content_type, high_water, last_full_at, last_job_id, last_sweep_at,
                                        archived_high_water)
    values (v_job.portal_id, v_job.owner_id, v_job.content_type, least(v_max, v_job.started_at), now(), p_job_id,
            case when v_job.content_type = 'hubdb_rows' then v_job.created_at end, v_job.started_at)
    on conflict (portal_id, content_type) do update
       set high_water = excluded.high_water, last_full_at = excluded.last_full_at,
           last_job_id = excluded.last_job_id, last_sweep_at = excluded.last_sweep_at,
           archived_high_water = excluded.archived_high_water, updated_at = now();
  else
    v_deleted := coalesce((v_job.result ->> 'deleted')::integer, 0);
    insert into public.sync_marks as m (portal_id, owner_id, content_type, high_water, last_incremental_at, last_job_id, last_sweep_at,
                                        archived_high_water)
    values (v_job.portal_id, v_job.owner_id, v_job.content_type,
            coalesce(v_max, (v_job.checkpoint ->> 'since')::timestamptz), now(), p_job_id,
            case when v_job.content_type = 'hubdb_rows' and coalesce((v_job.checkpoint ->> 'hubdbSweep')::boolean, true)
                 then v_job.created_at end,
            -- Its archived listing read every archive after since as of the read.
            greatest((v_job.checkpoint ->> 'maxArchived')::timestamptz, (v_job.checkpoint ->> 'since')::timestamptz))
    on conflict (portal_id, content_type) do update
       set high_water = greatest(m.high_water, excluded.high_water), last_incremental_at = excluded.last_incremental_at,
           last_job_id = excluded.last_job_id, last_sweep_at = coalesce(excluded.last_sweep_at, m.last_sweep_at),
           archived_high_water = greatest(m.archived_high_water, excluded.archived_high_water), updated_at = now();
  end if;

  return public.complete_job(p_job_id, p_fencing_token,
    jsonb_build_object('mode', case when v_incremental then 'incremental' else 'full' end,
      'deleted', v_deleted, 'fetched', coalesce((v_job.result ->> 'fetched')::integer, 0),
      'added', coalesce((v_job.result ->> 'added')::integer, 0),
      'updated', coalesce((v_job.result ->> 'updated')::integer, 0))
    || case when v_rows_deleted is not null then jsonb_build_object('hubdbRowsDeleted', v_rows_deleted) else '{}'::jsonb end);
end;
$$;
