-- private.portal_pauses: the portals an operator paused, one row each (the
-- pause flag lives here, not on public.portals). A paused portal's pending
-- jobs wait with run_after = 'infinity' (private.hold_paused_job, 0453; their own
-- due time and reason kept in jobs.held_run_after / held_waiting_reason), and
-- create_run makes no scheduled run for it. Written only by pause_portal and
-- resume_portal; read by them, hold_paused_job, create_run and operator_portals.
create table private.portal_pauses (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  paused_at timestamptz not null default now(),
  paused_by uuid references auth.users (id) on delete set null,
  reason text not null default 'paused by an operator'
    constraint portal_pauses_reason_length check (char_length(reason) between 1 and 500)
);
comment on table private.portal_pauses is
  'Portals paused by an operator: their jobs are not claimed and their schedule creates no run until resume_portal.';
-- Deleting an operator's user sets paused_by to null: found by this index.
create index portal_pauses_paused_by_idx on private.portal_pauses (paused_by);
alter table private.portal_pauses enable row level security;
