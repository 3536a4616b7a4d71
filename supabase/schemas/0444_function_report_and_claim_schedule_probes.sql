-- public.report_and_claim_schedule_probes(reports, claims, holder, ...): a lane
-- holding several schedule probes at once reports them all
-- (report_schedule_probe, in order) and claims up to `claims` next ones
-- (claim_schedule_probe with the holder and budget arguments, 20 s ahead) in
-- one call and one transaction (docs/decisions/0061, 0065): a fleet's quiet
-- cycles cost a fraction of a call each. reports: a JSON array of
-- {portal_id, fencing_token, checkpoint, answers, tables_pages, rate_headers},
-- each as report_schedule_probe takes them (answers null: the probe failed);
-- none: a lane's first claims, of schedules due within 10 s, as the idle
-- poll looks; claims chained to reports look 20 s ahead: chains keep ahead
-- of the due times (decision 0063). One row per report or claim, whichever are more
-- (at least one): row n holds report n's outcome (null: fenced off) and
-- claimed probe n (all null past the last one); jobs_waiting, the same on
-- every row, with claims: whether claim_jobs would find a job now
-- (claimable_jobs_exist without schedules, asked once). A report that
-- raises undoes the call: nothing reported, nothing claimed. Locks what the
-- calls lock, the reports' first. The service role only (the worker).
create function public.report_and_claim_schedule_probes(
  p_reports jsonb, p_claims integer, p_token_holder text, p_refresh_lease_seconds integer default 30,
  p_min_valid_seconds integer default 5, p_max_requests integer default 190, p_window_ms integer default 10000,
  p_ceiling integer default null, p_daily_reserve_percent numeric default 0
)
returns table (ordinality integer, outcome text, portal_id uuid, fencing_token bigint, checkpoint jsonb, token jsonb,
               granted integer, jobs_waiting boolean)
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_report jsonb;
  v_outcomes text[] := '{}';
  v_claimed record;
  v_claims jsonb[] := '{}';
  v_jobs_waiting boolean;
begin
  if jsonb_typeof(p_reports) is distinct from 'array' or jsonb_array_length(p_reports) > 64 then
    raise exception 'report_and_claim_schedule_probes: reports must be an array of at most 64' using errcode = '22023';
  end if;
  if p_claims is null or p_claims not between 0 and 64 then
    raise exception 'report_and_claim_schedule_probes: claims must be between 0 and 64' using errcode = '22023';
  end if;
  if p_claims > 0 and p_token_holder is null then
    raise exception 'report_and_claim_schedule_probes: the claims need a token holder' using errcode = '22023';
  end if;
  for v_report in select r.value from jsonb_array_elements(p_reports) r loop
    v_outcomes := v_outcomes || public.report_schedule_probe(
      (v_report ->> 'portal_id')::uuid, (v_report ->> 'fencing_token')::bigint, v_report -> 'checkpoint',
      nullif(v_report -> 'answers', 'null'::jsonb),
      case when jsonb_typeof(v_report -> 'tables_pages') = 'array'
           then array(select jsonb_array_elements_text(v_report -> 'tables_pages')) end,
      nullif(v_report -> 'rate_headers', 'null'::jsonb));
  end loop;
  for i in 1 .. p_claims loop
    select c.* into v_claimed
      from public.claim_schedule_probe(p_token_holder, p_refresh_lease_seconds, p_min_valid_seconds, p_max_requests,
                                       p_window_ms, p_ceiling, p_daily_reserve_percent,
                                       case when jsonb_array_length(p_reports) = 0 then 10 else 20 end) c;
    exit when not found;
    v_claims := v_claims || to_jsonb(v_claimed);
  end loop;
  if p_claims > 0 then
    v_jobs_waiting := public.claimable_jobs_exist(null, false);
  end if;
  return query
    select n, v_outcomes[n], (v_claims[n] ->> 'portal_id')::uuid, (v_claims[n] ->> 'fencing_token')::bigint,
           v_claims[n] -> 'checkpoint', nullif(v_claims[n] -> 'token', 'null'::jsonb), (v_claims[n] ->> 'granted')::integer,
           v_jobs_waiting
      from generate_series(1, greatest(cardinality(v_outcomes), cardinality(v_claims), 1)) n;
end;
$$;
