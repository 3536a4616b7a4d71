-- public.create_oauth_install_state(user, state_hash): starts an OAuth install:
-- records sha256(state) bound to the user until state_ttl and returns the
-- expiry, dropping the user's expired and oldest open states beyond
-- max_open_states. One user's calls serialise on a transaction-level advisory
-- lock (pooler-safe). For the service role only (the orchestrator).
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
