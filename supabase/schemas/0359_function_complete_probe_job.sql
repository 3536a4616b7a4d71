-- public.complete_probe_job(job, fencing_token, answers, tables_pages): the holder of
-- a probe job (docs/decisions/0046) reports what HubSpot answered;
-- private.probe_changed_types decides which of its types changed. The changed
-- types get incremental fetch jobs in the probe's run (a type with an active
-- fetch job meanwhile gets none; a sweep cycle's rows job the counts of
-- stored rows the probe made, decision 0056), and private.record_probe keeps
-- the tables list for them and records the others as synced now. Then the
-- probe completes (result: probed, changed) and the run settles: with nothing
-- changed, a quiet cycle of one job. False when fenced off. Locks the run,
-- then the job (and the portal's list row when it stores). The service role only.
create function public.complete_probe_job(p_job_id bigint, p_fencing_token bigint, p_answers jsonb, p_tables_pages text[] default null)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_job public.jobs;
  v_types text[];
  v_changed text[];
  v_overlap interval;
  v_sweep_every integer;
  v_sweep boolean;
  v_stored_rows jsonb; -- a sweep cycle's live HubDB rows stored per table, counted once: the decision's and the rows job's
  v_added integer := 0;
begin
  perform private.lock_run_of_job(p_job_id);
  select * into v_job from public.jobs j
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
     and j.kind = 'probe'
     for update;
  if not found then
    return false;
  end if;
  select array_agg(k order by k) into v_types from jsonb_object_keys(v_job.checkpoint -> 'types') k;
  v_sweep := coalesce((v_job.checkpoint #>> '{types,hubdb_rows,sweep}')::boolean, false);
  select d.changed_types, d.stored_rows into v_changed, v_stored_rows
    from private.probe_changed_types('complete_probe_job', v_job.portal_id, v_job.checkpoint, p_answers, p_tables_pages) d;

  if v_changed is not null then
    select make_interval(secs => s.overlap_seconds), s.hubdb_sweep_every_minutes into v_overlap, v_sweep_every
      from public.sync_schedules s where s.portal_id = v_job.portal_id;
    insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, max_attempts, checkpoint)
    select v_job.run_id, v_job.portal_id, v_job.owner_id, 'fetch', t.content_type, k.default_max_attempts,
           private.incremental_checkpoint(m, coalesce(v_overlap, interval '120 seconds'), coalesce(v_sweep_every, 0),
                                          case when t.content_type = 'hubdb_rows' then v_stored_rows end)
      from unnest(v_changed) t(content_type)
      left join public.sync_marks m on m.portal_id = v_job.portal_id and m.content_type = t.content_type
      cross join private.job_kinds k
     where k.kind = 'fetch'
     order by t.content_type
    on conflict (portal_id, kind, content_type) where status in ('pending', 'running') do nothing;
    get diagnostics v_added = row_count;
    update public.runs r set jobs_total = r.jobs_total + v_added where r.id = v_job.run_id;
  end if;
  perform private.record_probe(v_job.portal_id, v_job.run_id, v_types, v_changed,
                               case when v_sweep then v_job.created_at end, p_tables_pages);

  return public.complete_job(p_job_id, p_fencing_token,
    jsonb_build_object('mode', 'probe', 'probed', to_jsonb(v_types), 'changed', to_jsonb(coalesce(v_changed, '{}')),
                       'fetched', 0, 'added', 0, 'updated', 0, 'deleted', 0));
end;
$$;
