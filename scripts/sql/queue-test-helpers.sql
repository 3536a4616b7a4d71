-- Test-only SQL: functions the tests and the benchmarks call but the product
-- never does, kept out of the API (schema queue_test, which PostgREST does not
-- expose and no migration creates). Created after the migrations by
-- createMigratedDatabase({ testHelpers: true }) (tests/support/global-setup.ts,
-- bench/lib/pg.ts). For the service role only, like the API they wrap.
create schema if not exists queue_test;
revoke all on schema queue_test from public;
grant usage on schema queue_test to service_role;

-- queue_test.claim_next_job(worker, kinds): claim_jobs(worker, 1, kinds), one job
-- or none; its locks are claim_jobs'.
create or replace function queue_test.claim_next_job(p_worker_id text, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
as $$
begin
  return query select * from public.claim_jobs(p_worker_id, 1, p_kinds);
end;
$$;
comment on function queue_test.claim_next_job(text, text[]) is 'Claims the next job (or none): claim_jobs with one job. See claim_jobs.';

-- queue_test.complete_job_and_claim_next(...): complete_job, then (only when that
-- succeeded) claim_jobs(worker, 1, kinds) in the same transaction; always one
-- row. Takes complete_job's locks, then claim_jobs'.
create or replace function queue_test.complete_job_and_claim_next(
  p_job_id bigint, p_fencing_token bigint, p_worker_id text, p_result jsonb default null, p_kinds text[] default null
) returns table (
  completed boolean, id bigint, run_id uuid, portal_id uuid, kind text, content_type text,
  attempts integer, max_attempts integer, fencing_token bigint, lease_expires_at timestamptz,
  checkpoint jsonb, progress_done integer, progress_total integer
)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_completed boolean;
  v_next public.jobs;
begin
  if p_worker_id is null or char_length(p_worker_id) not between 1 and 200 then
    raise exception 'worker_id must be 1-200 characters' using errcode = '22023';
  end if;
  v_completed := public.complete_job(p_job_id, p_fencing_token, p_result);
  if v_completed then
    select * into v_next from public.claim_jobs(p_worker_id, 1, p_kinds) c limit 1;
  end if;
  return query select v_completed, v_next.id, v_next.run_id, v_next.portal_id, v_next.kind, v_next.content_type,
    v_next.attempts, v_next.max_attempts, v_next.fencing_token, v_next.lease_expires_at,
    v_next.checkpoint, v_next.progress_done, v_next.progress_total;
end;
$$;

-- queue_test.save_fetched_page(job, token, items, checkpoint, total): stores one
-- page of items already shaped as [{id, updatedAt, data}] for the lease holder;
-- the page's counts, null when fenced off. Locks the held job row FOR UPDATE.
--
create or replace function queue_test.save_fetched_page(
  p_job_id bigint, p_fencing_token bigint, p_items jsonb, p_checkpoint jsonb, p_progress_total integer default null
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
   where j.id = p_job_id and j.fencing_token = p_fencing_token and j.status = 'running' and j.lease_expires_at > now()
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

revoke all on all functions in schema queue_test from public, anon, authenticated;
grant execute on all functions in schema queue_test to service_role;
