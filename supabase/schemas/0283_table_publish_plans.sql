-- public.publish_plans: a plan, a dry run over a portal's pending edits
-- (public.content_edits) that a person or an app approves by its id while it is
-- fresh; its items are public.publish_items. `planning` while its plan run
-- (kind plan, one job per content type) reads the items from HubSpot, then
-- `ready` (approvable until fresh_until) or `failed` (its edits pending again),
-- `approved` once approve_publish_plan made its publish run, `discarded` when
-- a newer plan or discard_publish_plan replaced it. The audit trail: who
-- planned, approved and rolled back, and when; the counts kept when the plan
-- run settled (private.settle_publish_run). Owners read their own (policy in
-- 0800); only the service role writes, through the functions of 0483-0499.
-- docs/publish.md, docs/decisions/0070-publish.md.
create table public.publish_plans (
  id uuid primary key default gen_random_uuid(),
  portal_id uuid not null,
  owner_id uuid not null,
  created_by uuid not null,
  created_at timestamptz not null default now(),
  content_types text[] not null,
  status text not null default 'planning',
  mode text not null default 'live',
  publish_at timestamptz,
  plan_run_id uuid references public.runs (id) on delete set null,
  planned_at timestamptz,
  fresh_until timestamptz,
  approved_by uuid,
  approved_at timestamptz,
  publish_run_id uuid references public.runs (id) on delete set null,
  restored_by uuid,
  restored_at timestamptz,
  restore_run_id uuid references public.runs (id) on delete set null,
  items_total integer not null default 0,
  items_ready integer not null default 0,
  items_conflict integer not null default 0,
  items_invalid integer not null default 0,
  items_unchanged integer not null default 0,
  items_missing integer not null default 0,
  constraint publish_plans_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint publish_plans_status_is_valid check (status in ('planning', 'ready', 'approved', 'failed', 'discarded')),
  constraint publish_plans_mode_is_valid check (mode in ('live', 'draft', 'schedule')),
  constraint publish_plans_schedule_has_time check ((mode = 'schedule') = (publish_at is not null)),
  constraint publish_plans_types_not_empty check (cardinality(content_types) >= 1),
  -- Settled (the plan run finished) exactly when no longer planning; approvable only with a time limit.
  constraint publish_plans_settled_iff_not_planning check ((status = 'planning') = (planned_at is null)),
  constraint publish_plans_ready_is_fresh_until check (status not in ('ready', 'approved') or fresh_until is not null),
  constraint publish_plans_approved_iff_approval check (
    (status = 'approved') = (approved_at is not null) and (approved_at is null) = (approved_by is null)),
  constraint publish_plans_restored_after_approval check (
    (restored_at is null) = (restored_by is null) and (restored_at is null or status = 'approved')),
  constraint publish_plans_counts_within_total check (
    least(items_ready, items_conflict, items_invalid, items_unchanged, items_missing) >= 0
    and items_ready + items_conflict + items_invalid + items_unchanged + items_missing <= items_total)
);
comment on table public.publish_plans is
  'A plan: the dry run over a portal''s pending edits, approved by its id while fresh; then its publish run and perhaps its restore run.';
comment on column public.publish_plans.status is
  'planning (its plan run reads HubSpot), ready (approvable until fresh_until), approved, failed (edits pending again), discarded.';
comment on column public.publish_plans.mode is
  'How pages and posts are written: live (the live object), draft (the draft, then pushed live), schedule (the draft, published at publish_at).';
comment on column public.publish_plans.fresh_until is
  'Approvable until then: the plan run''s end plus private.publish_settings.plan_fresh_minutes.';
comment on column public.publish_plans.created_by is
  'Who planned (the portal''s owner). No foreign key, nor on approved_by and restored_by: the audit trail names who acted; deleting the owner deletes the portal and its plans.';
-- Run lookups (a plan's job finds its plan by its run): one plan per run, and the runs' prune sets them null by these.
create unique index publish_plans_plan_run_idx on public.publish_plans (plan_run_id);
create unique index publish_plans_publish_run_idx on public.publish_plans (publish_run_id);
create unique index publish_plans_restore_run_idx on public.publish_plans (restore_run_id);
-- A portal's plans newest first (the page's list, a new plan's look at the open ones, the portal cascade).
create index publish_plans_portal_created_idx on public.publish_plans (portal_id, created_at desc);
create index publish_plans_owner_created_idx on public.publish_plans (owner_id, created_at desc);
-- Not indexed (docs/decisions/0009): publish_plans_portal_owner_fkey (the cascade finds a portal's plans by
-- publish_plans_portal_created_idx, which starts with portal_id).
alter table public.publish_plans enable row level security;
