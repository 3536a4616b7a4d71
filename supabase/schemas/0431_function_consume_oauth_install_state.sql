-- public.consume_oauth_install_state(user, state_hash): true exactly once for
-- the user's own unexpired state (deleted), false otherwise (nothing changed).
-- Concurrent consumers: the row lock lets one delete it. The service role only.
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
