-- private.oauth_install_settings: the one row saying how long an OAuth install
-- state stays valid, how many open states one user may hold and how many
-- expired states one prune call deletes. Read by the install-state functions
-- (0430-0432); changed by operators (SQL).
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
alter table private.oauth_install_settings enable row level security;
insert into private.oauth_install_settings default values;
