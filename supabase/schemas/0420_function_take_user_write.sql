-- public.take_user_write(user): the orchestrator's per-user write limit: 0 =
-- go (the write is counted), otherwise ms to wait (429). Concurrent calls for
-- one user serialise on the user's log row (FOR UPDATE). The service role only.
create function public.take_user_write(p_user_id uuid) returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.write_limit_settings;
  v_window interval;
  v_now timestamptz;
  v_log timestamptz[];
begin
  if p_user_id is null then
    raise exception 'take_user_write: a user id is required' using errcode = '22004';
  end if;
  select * into v_settings from private.write_limit_settings s where s.id;
  v_window := make_interval(secs => v_settings.window_seconds);
  insert into private.user_write_log (user_id) values (p_user_id) on conflict (user_id) do nothing;
  select l.written_at into v_log from private.user_write_log l where l.user_id = p_user_id for update;
  v_now := clock_timestamp();
  v_log := array(select t from unnest(v_log) t where t > v_now - v_window order by t);
  if cardinality(v_log) < v_settings.max_writes then
    update private.user_write_log l set written_at = v_log || v_now, updated_at = v_now where l.user_id = p_user_id;
    return 0;
  end if;
  update private.user_write_log l set written_at = v_log, updated_at = v_now where l.user_id = p_user_id;
  return greatest(1, ceil(extract(epoch from (v_log[cardinality(v_log) - v_settings.max_writes + 1] + v_window - v_now)) * 1000)::integer);
end;
$$;
comment on function public.take_user_write(uuid) is
  'Per-user write limit: 0 = go (counted), otherwise ms to wait. Settings in private.write_limit_settings.';
