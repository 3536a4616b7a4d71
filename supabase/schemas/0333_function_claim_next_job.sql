-- public.claim_next_job(worker, kinds): claim_jobs(worker, 1, kinds), one job
-- or none; its locks are claim_jobs'. For the service role only.
create function public.claim_next_job(p_worker_id text, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
as $$
begin
  return query select * from public.claim_jobs(p_worker_id, 1, p_kinds);
end;
$$;
comment on function public.claim_next_job(text, text[]) is 'Claims the next job (or none): claim_jobs with one job. See claim_jobs.';
