-- public.begin_worker_invocation(id, source, lease seconds): takes an invocation
-- lease for that long when fewer than the cap are held (expired ones freed
-- first); false at the cap. Concurrent callers serialise on the settings row
-- (FOR UPDATE). For the service role only (the worker).
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
    raise exception 'begin_worker_invocation: an invocation id, a source (1-40 characters) and an invocation lease of 1-3600 s are required'
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
