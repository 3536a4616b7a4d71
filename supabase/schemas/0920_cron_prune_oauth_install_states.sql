-- pg_cron job prune-oauth-install-states: every 5 minutes one bounded batch of
-- expired OAuth install states is deleted (public.prune_oauth_install_states).
-- Without pg_cron: nothing, with a notice.
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
      $cmd$select public.prune_oauth_install_states()$cmd$);
    select private.record_cron_job('prune-oauth-install-states');
  $sql$;
end
$$;
