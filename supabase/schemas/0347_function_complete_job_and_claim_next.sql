-- public.complete_job_and_claim_next(...): complete_job, then (only when that
-- succeeded) claim_jobs(worker, 1, kinds) in the same transaction; always one
-- row. Takes complete_job's locks, then claim_jobs'. The service role only.
create function public.complete_job_and_claim_next(
  p_job_id bigint, p_token bigint, p_worker_id text, p_result jsonb default null, p_kinds text[] default null
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
  v_completed := public.complete_job(p_job_id, p_token, p_result);
  if v_completed then
    select * into v_next from public.claim_jobs(p_worker_id, 1, p_kinds) c limit 1;
  end if;
  return query select v_completed, v_next.id, v_next.run_id, v_next.portal_id, v_next.kind, v_next.content_type,
    v_next.attempts, v_next.max_attempts, v_next.fencing_token, v_next.lease_expires_at,
    v_next.checkpoint, v_next.progress_done, v_next.progress_total;
end;
$$;
