-- public.report_and_claim_schedule_probe(report..., claim...): a lane going
-- from probe to probe reports one (report_schedule_probe) and claims the next
-- (claim_schedule_probe, with its token and first grant) in one call and one
-- transaction: a fleet's quiet cycle costs one round trip, not two
-- (docs/decisions/0061). One row: the report's outcome (null: fenced off),
-- the next probe's columns (all null when none is due), and jobs_waiting:
-- whether claim_jobs would find a job now (claimable_jobs_exist without
-- schedules), so a lane asks for jobs when there are some, not every few
-- probes. The chained claim takes a schedule due within 20 s, where lanes
-- out of a chain (and the idle poll) look 10 s ahead: chains keep ahead of
-- the due times, and idle lanes are woken only when they fall behind
-- (decision 0063). Locks what the two calls lock, the report's first.
-- The service role only (the worker).
create function public.report_and_claim_schedule_probe(
  p_portal_id uuid, p_token bigint, p_checkpoint jsonb, p_answers jsonb, p_tables_pages text[], p_rate_headers jsonb,
  p_token_holder text, p_refresh_lease_seconds integer default 30, p_min_valid_seconds integer default 5,
  p_max_requests integer default 190, p_window_ms integer default 10000, p_ceiling integer default null,
  p_daily_reserve_percent numeric default 0
)
returns table (outcome text, portal_id uuid, probe_token bigint, checkpoint jsonb, token jsonb, granted integer, jobs_waiting boolean)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_outcome text;
begin
  if p_token_holder is null then
    raise exception 'report_and_claim_schedule_probe: the next claim needs a token holder' using errcode = '22023';
  end if;
  v_outcome := public.report_schedule_probe(p_portal_id, p_token, p_checkpoint, p_answers, p_tables_pages, p_rate_headers);
  return query
    select v_outcome, c.portal_id, c.probe_token, c.checkpoint, c.token, c.granted, public.claimable_jobs_exist(null, false)
      from (select) one
      left join lateral public.claim_schedule_probe(p_token_holder, p_refresh_lease_seconds, p_min_valid_seconds, p_max_requests,
                                                   p_window_ms, p_ceiling, p_daily_reserve_percent, 20) c on true;
end;
$$;
