-- public.prune_oauth_install_states(batch): retention: deletes one bounded
-- batch of expired install states (FOR UPDATE SKIP LOCKED); returns how many.
-- pg_cron calls it (0920). For the service role only.
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
