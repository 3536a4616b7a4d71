-- HubSpot OAuth install states: the `state` of an install the orchestrator
-- started, bound to the user who started it, single-use and expiring. Only a
-- SHA-256 of the state is stored; the PKCE code_verifier is not stored at all
-- (the orchestrator derives it from the state with HMAC-SHA256 keyed by the
-- app's client secret, a function secret), so a dump of this table yields
-- neither a usable state nor a verifier.

-- Settings (one row): how long a state stays valid, how many open states one
-- user may hold (starting another drops that user's oldest), and how many
-- expired states one prune call deletes at most.
create table private.oauth_install_settings (
  id boolean primary key default true check (id),
  state_ttl interval not null default interval '10 minutes'
    constraint oauth_install_settings_state_ttl_range check (state_ttl between interval '1 minute' and interval '1 hour'),
  max_open_states integer not null default 5
    constraint oauth_install_settings_max_open_states_range check (max_open_states between 1 and 100),
  prune_batch_size integer not null default 5000
    constraint oauth_install_settings_prune_batch_size_range check (prune_batch_size between 1 and 100000)
);
comment on table private.oauth_install_settings is
  'OAuth install states: valid for state_ttl, at most max_open_states open per user (a new one drops the oldest), prune_batch_size expired states deleted per prune call.';
insert into private.oauth_install_settings default values;

create table private.oauth_install_states (
  state_hash bytea primary key
    constraint oauth_install_states_state_hash_is_sha256 check (octet_length(state_hash) = 32),
  user_id uuid not null references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  constraint oauth_install_states_expires_after_created check (expires_at > created_at)
);
comment on table private.oauth_install_states is
  'Open HubSpot OAuth installs: sha256(state) of each, the user it is bound to and when it expires. Consumed (deleted) by the one callback that presents it.';
create index oauth_install_states_user_idx on private.oauth_install_states (user_id, created_at);
create index oauth_install_states_expires_idx on private.oauth_install_states (expires_at);

alter table private.oauth_install_settings enable row level security;
alter table private.oauth_install_states enable row level security;
revoke all on private.oauth_install_settings, private.oauth_install_states from public, anon, authenticated;

-- Records a new install state for the user and returns when it expires. The
-- user's expired states are deleted, and their oldest open ones too when the
-- user already holds max_open_states. One user's calls serialise on a
-- transaction-level advisory lock (released at commit: pooler-safe), so the
-- bound holds under concurrency. A state hash already recorded raises 23505.
create function public.create_oauth_install_state(p_user_id uuid, p_state_hash bytea)
returns timestamptz
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_settings private.oauth_install_settings;
  v_expires_at timestamptz;
begin
  if p_user_id is null or p_state_hash is null or octet_length(p_state_hash) <> 32 then
    raise exception 'create_oauth_install_state: a user id and a 32-byte state hash are required' using errcode = '22023';
  end if;
  select * into v_settings from private.oauth_install_settings s where s.id;
  perform pg_advisory_xact_lock(hashtextextended('oauth_install_states:' || p_user_id::text, 0));
  delete from private.oauth_install_states s where s.user_id = p_user_id and s.expires_at <= now();
  delete from private.oauth_install_states s
   where s.state_hash in (
     select o.state_hash from private.oauth_install_states o
      where o.user_id = p_user_id
      order by o.created_at desc, o.state_hash
     offset v_settings.max_open_states - 1);
  v_expires_at := now() + v_settings.state_ttl;
  insert into private.oauth_install_states (state_hash, user_id, expires_at)
  values (p_state_hash, p_user_id, v_expires_at);
  return v_expires_at;
end;
$$;
comment on function public.create_oauth_install_state(uuid, bytea) is
  'Starts an OAuth install: stores sha256(state) bound to the user until state_ttl; returns the expiry. At most max_open_states per user (oldest dropped).';

-- Consumes the user's install state: true exactly once for a state this user
-- started that has not expired; false (and nothing changed) for a forged,
-- replayed or expired state, or one another user started. Concurrent consumers
-- of one state: the row lock lets one delete it, the others find it gone.
create function public.consume_oauth_install_state(p_user_id uuid, p_state_hash bytea)
returns boolean
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_found boolean;
begin
  if p_user_id is null or p_state_hash is null then
    return false;
  end if;
  with gone as (
    delete from private.oauth_install_states s
     where s.state_hash = p_state_hash and s.user_id = p_user_id and s.expires_at > now()
    returning 1
  )
  select exists (select 1 from gone) into v_found;
  return v_found;
end;
$$;
comment on function public.consume_oauth_install_state(uuid, bytea) is
  'Completes an OAuth install''s state check: true once for the user''s own unexpired state (deleted), false otherwise (nothing changed).';

-- Retention: deletes one bounded batch of expired install states (default
-- batch: the setting). Returns how many; call again until 0. pg_cron calls it.
create function public.prune_oauth_install_states(p_batch_size integer default null)
returns integer
language plpgsql
security definer
set search_path = ''
as $$
declare
  v_batch integer;
  v_deleted integer;
begin
  select coalesce(p_batch_size, s.prune_batch_size) into v_batch from private.oauth_install_settings s where s.id;
  if v_batch is null or v_batch not between 1 and 100000 then
    raise exception 'prune_oauth_install_states: a batch size of 1-100000 is required' using errcode = '22023';
  end if;
  with gone as (
    delete from private.oauth_install_states s
     where s.state_hash in (
       select o.state_hash from private.oauth_install_states o
        where o.expires_at <= now()
        order by o.expires_at
        limit v_batch
          for update skip locked)
    returning 1
  )
  select count(*) into v_deleted from gone;
  return v_deleted;
end;
$$;
comment on function public.prune_oauth_install_states(integer) is
  'Retention: deletes one bounded batch of expired OAuth install states; returns how many. pg_cron calls it.';

do $$
declare
  f regprocedure;
begin
  foreach f in array array[
    'public.create_oauth_install_state(uuid, bytea)'::regprocedure,
    'public.consume_oauth_install_state(uuid, bytea)'::regprocedure,
    'public.prune_oauth_install_states(integer)'::regprocedure]
  loop
    execute format('revoke all on function %s from public, anon, authenticated', f);
    execute format('grant execute on function %s to service_role', f);
  end loop;
end
$$;

-- Expired states are pruned every 5 minutes next to the queue's retention
-- (20261130001600); without pg_cron this does nothing and says so.
do $$
begin
  if not exists (select 1 from pg_extension where extname = 'pg_cron') then
    raise notice 'pg_cron is not installed: expired OAuth install states are not pruned on a schedule (call public.prune_oauth_install_states())';
    return;
  end if;
  execute $sql$
    select cron.schedule(
      'prune-oauth-install-states',
      '*/5 * * * *',
      $cmd$select public.prune_oauth_install_states()$cmd$)
  $sql$;
end
$$;
