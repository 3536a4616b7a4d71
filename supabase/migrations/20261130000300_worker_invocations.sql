-- Worker invocations hold leases here, so a burst of triggers (cron, the
-- orchestrator's wake-up, continuations) can never run more invocations at once
-- than the database's connections allow. A setting caps them; an invocation
-- killed without saying goodbye gives its slot back when its lease expires.

-- Queue-wide settings (one row): the cap on concurrent worker invocations.
create table private.worker_settings (
  id boolean primary key default true check (id),
  max_concurrent_invocations integer not null default 4 check (max_concurrent_invocations between 1 and 200)
);
comment on table private.worker_settings is
  'Worker invocation cap. max_concurrent_invocations × the worker''s pool size bounds the database connections the workers use.';
insert into private.worker_settings default values;

-- One row per running worker invocation.
create table private.worker_invocations (
  id uuid primary key,
  started_at timestamptz not null default now(),
  lease_expires_at timestamptz not null,
  source text not null check (char_length(source) between 1 and 40)
);
create index worker_invocations_lease_idx on private.worker_invocations (lease_expires_at);

alter table private.worker_settings enable row level security;
alter table private.worker_invocations enable row level security;
revoke all on private.worker_settings, private.worker_invocations from public, anon, authenticated;

-- Takes an invocation slot for p_lease_seconds (the invocation's own deadline
-- plus a margin: a killed invocation frees its slot then) when fewer than the
-- cap are held, expired slots freed first. True when taken; false when the cap
-- is reached (the caller answers without working). Concurrent callers
-- serialise on the settings row.
create function public.begin_worker_invocation(p_invocation_id uuid, p_source text, p_lease_seconds integer)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.worker_settings;
  v_active integer;
begin
  if p_invocation_id is null or p_source is null or char_length(p_source) not between 1 and 40
     or p_lease_seconds is null or p_lease_seconds not between 1 and 3600 then
    raise exception 'begin_worker_invocation: an invocation id, a source (1-40 characters) and a lease of 1-3600 s are required'
      using errcode = '22023';
  end if;
  select * into v_settings from private.worker_settings where id for update;
  delete from private.worker_invocations i where i.lease_expires_at <= now();
  select count(*) into v_active from private.worker_invocations;
  if v_active >= v_settings.max_concurrent_invocations then
    return false;
  end if;
  insert into private.worker_invocations (id, lease_expires_at, source)
  values (p_invocation_id, now() + make_interval(secs => p_lease_seconds), p_source)
  on conflict (id) do nothing;
  return true;
end;
$$;

-- Gives the slot back and says whether work is claimable right now (a pending
-- job that is due, or a running job whose lease expired), so the caller can
-- decide to continue in a new invocation.
create function public.end_worker_invocation(p_invocation_id uuid)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
begin
  delete from private.worker_invocations i where i.id = p_invocation_id;
  return exists (select 1 from public.jobs j where j.status = 'pending' and j.run_after <= now())
      or exists (select 1 from public.jobs j where j.status = 'running' and j.lease_expires_at <= now());
end;
$$;

-- How many invocation slots are held now, and the cap (operators, tests).
create function public.worker_invocation_slots()
returns table (active integer, cap integer)
language sql
stable
security definer
set search_path = ''
as $$
  select (select count(*)::integer from private.worker_invocations i where i.lease_expires_at > now()),
         (select s.max_concurrent_invocations from private.worker_settings s where s.id)
$$;

revoke all on function public.begin_worker_invocation(uuid, text, integer) from public, anon, authenticated;
revoke all on function public.end_worker_invocation(uuid) from public, anon, authenticated;
revoke all on function public.worker_invocation_slots() from public, anon, authenticated;
grant execute on function public.begin_worker_invocation(uuid, text, integer) to service_role;
grant execute on function public.end_worker_invocation(uuid) to service_role;
grant execute on function public.worker_invocation_slots() to service_role;
