-- Abuse limits for the orchestrator: a per-user rate limit on its writes
-- (creating and stopping runs, connecting portals), kept in Postgres so every
-- function instance shares it, and a way to count connect_portal's HubSpot
-- call in the shared HubSpot budget of a portal that was not known before it.

-- The write limit (one row): at most max_writes per user in any rolling window_seconds.
create table private.write_limit_settings (
  id boolean primary key default true check (id),
  max_writes integer not null default 60 check (max_writes between 1 and 100000),
  window_seconds integer not null default 60 check (window_seconds between 1 and 86400)
);
comment on table private.write_limit_settings is
  'Per-user orchestrator write limit: max_writes in any rolling window_seconds. Change the row to change the limit.';
insert into private.write_limit_settings default values;

-- Times of each user's recent counted writes (a rolling-window log, at most max_writes long).
create table private.user_write_log (
  user_id uuid primary key,
  written_at timestamptz[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table private.user_write_log is 'Recent orchestrator writes per user (rolling window), for the write limit.';

alter table private.write_limit_settings enable row level security;
alter table private.user_write_log enable row level security;
revoke all on private.write_limit_settings, private.user_write_log from public, anon, authenticated;

-- Counts one write for the user when fewer than the limit were counted in the
-- window: returns 0 (go). Otherwise counts nothing and returns how many ms
-- until the oldest counted write leaves the window (the caller answers 429).
-- Concurrent callers for one user serialise on the user's row.
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

-- Counts a HubSpot request that was already made in the portal's shared budget
-- (connect_portal learns the portal id only from HubSpot's answer). The grant
-- is recorded even past the limit: the request happened, and the workers'
-- next grants wait for it.
create function public.record_hubspot_request(p_hubspot_portal_id bigint) returns void
language plpgsql
security definer
set search_path = ''
as $$
begin
  if p_hubspot_portal_id is null or p_hubspot_portal_id <= 0 then
    raise exception 'record_hubspot_request: a positive HubSpot portal id is required' using errcode = '22023';
  end if;
  insert into private.hubspot_request_budgets as b (hubspot_portal_id, granted_at, updated_at)
  values (p_hubspot_portal_id, array[clock_timestamp()], clock_timestamp())
  on conflict (hubspot_portal_id) do update
     set granted_at = array(select t from unnest(b.granted_at) t where t > clock_timestamp() - interval '1 minute' order by t)
                      || clock_timestamp(),
         updated_at = clock_timestamp();
end;
$$;
comment on function public.record_hubspot_request(bigint) is
  'Records an already-made HubSpot request in the portal''s shared request budget.';

revoke all on function public.take_user_write(uuid) from public, anon, authenticated;
revoke all on function public.record_hubspot_request(bigint) from public, anon, authenticated;
grant execute on function public.take_user_write(uuid) to service_role;
grant execute on function public.record_hubspot_request(bigint) to service_role;
