-- public.finish_worker_invocation(id, summary): gives the invocation lease back,
-- says whether a claim would find work now, and logs its summary {stopReason, shutdownReason?,
-- claimed, completed, released, failed, cpuMs?} (the log keeps the last hour,
-- at most 500 rows), and counts it in its minute (worker_invocation_minutes,
-- 24 hours kept). Deletes the invocation lease row. stopReason must be one of
-- the stop reasons (the log's CHECK, 0210), else 22023 and nothing is changed.
-- For the service role only.
create function public.finish_worker_invocation(p_invocation_id uuid, p_summary jsonb)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_lease private.worker_invocations;
  v_constraint text;
begin
  if p_invocation_id is null or p_summary is null or jsonb_typeof(p_summary) <> 'object'
     or coalesce(jsonb_typeof(p_summary -> 'stopReason'), '') <> 'string' then
    raise exception 'finish_worker_invocation: an invocation id and a summary object with a stopReason string are required'
      using errcode = '22023';
  end if;
  delete from private.worker_invocations i where i.id = p_invocation_id returning * into v_lease;
  insert into private.worker_invocation_log
    (id, source, started_at, stop_reason, shutdown_reason, claimed, completed, released, failed, cpu_ms)
  values (p_invocation_id, coalesce(v_lease.source, 'unknown'), coalesce(v_lease.started_at, now()),
          p_summary ->> 'stopReason', left(p_summary ->> 'shutdownReason', 40),
          coalesce((p_summary ->> 'claimed')::integer, 0), coalesce((p_summary ->> 'completed')::integer, 0),
          coalesce((p_summary ->> 'released')::integer, 0), coalesce((p_summary ->> 'failed')::integer, 0),
          (p_summary ->> 'cpuMs')::integer)
  on conflict (id) do nothing;
  if found then
    insert into private.worker_invocation_minutes as m (minute, source, stop_reason, invocations, claimed, completed, released, failed)
    select date_trunc('minute', l.ended_at), l.source, l.stop_reason, 1, l.claimed, l.completed, l.released, l.failed
      from private.worker_invocation_log l where l.id = p_invocation_id
    on conflict (minute, source, stop_reason) do update
       set invocations = m.invocations + 1, claimed = m.claimed + excluded.claimed, completed = m.completed + excluded.completed,
           released = m.released + excluded.released, failed = m.failed + excluded.failed;
    delete from private.worker_invocation_minutes m where m.minute < now() - interval '24 hours';
  end if;
  delete from private.worker_invocation_log l
   where l.ended_at < now() - interval '1 hour'
      or l.id in (select x.id from private.worker_invocation_log x order by x.ended_at desc offset 500);
  return public.claimable_jobs_exist(null);
exception
  when invalid_text_representation or numeric_value_out_of_range then
    raise exception 'finish_worker_invocation: summary counts must be integers' using errcode = '22023';
  when check_violation then
    get stacked diagnostics v_constraint = constraint_name;
    if v_constraint = 'stop_reason_is_known' then
      raise exception 'finish_worker_invocation: "%" is not a stop reason', left(p_summary ->> 'stopReason', 40) using errcode = '22023';
    end if;
    raise exception 'finish_worker_invocation: summary counts must not be negative' using errcode = '22023';
end;
$$;
