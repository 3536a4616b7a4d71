-- Trigger jobs_set_claim_rank: before each job insert, sets claim_rank to 1 +
-- the portal's active jobs, so claims (by claim_rank, run_after, id) interleave
-- portals. Reads only; the trigger function is for the owner only.
-- Rationale: docs/decisions/0003-claiming.md.
create function private.set_claim_rank() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  new.claim_rank := 1 + (select count(*) from public.jobs j
                          where j.portal_id = new.portal_id and j.status in ('pending', 'running'));
  return new;
end;
$$;
create trigger jobs_set_claim_rank before insert on public.jobs
  for each row execute function private.set_claim_rank();
