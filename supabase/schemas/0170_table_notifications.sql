-- public.notifications: one message per finished run for its owner (written
-- by the settlement code, unique per run). Users read theirs and may set only
-- read_at (policies in 0800, column grant in 0810); the service role writes.
create table public.notifications (
  id bigint generated always as identity primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  run_id uuid not null references public.runs (id) on delete cascade,
  kind text not null,
  message text not null,
  created_at timestamptz not null default now(),
  read_at timestamptz,
  constraint notifications_one_per_run unique (run_id)
);
create index notifications_user_unread_idx on public.notifications (user_id, created_at desc) where read_at is null;
alter table public.notifications enable row level security;
