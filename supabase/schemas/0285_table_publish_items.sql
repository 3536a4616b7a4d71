-- public.publish_items: one item of a plan (one edit), and everything its plan,
-- publish and restore runs learned and did: the fields before → after, the
-- plan status (ready, conflict, invalid, unchanged, missing), the apply's
-- outcome (writing → applied, scheduled, unchanged, conflict, invalid, failed,
-- overwritten), the pre-image kept for rollback, HubSpot's answers and the
-- restore outcome. `scheduled`: a plan of mode schedule wrote the item's
-- draft and HubSpot publishes it at the plan's publish_at (nothing live yet). Written only by the holders of its plan's jobs (0489-0496)
-- and settlement (private.fail_publish_items); the CHECKs pair each status
-- with the fields it needs. `writes` counts our write requests that carried
-- the item, recorded before each is sent (prepare_publish_batch): a measured
-- property, which ends at most 1 unless a write HubSpot never applied had to
-- be sent again. Owners read their own (policy in 0800). The item state
-- machine: docs/publish.md.
create table public.publish_items (
  id bigint generated always as identity primary key,
  plan_id uuid not null references public.publish_plans (id) on delete cascade,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  hubspot_id text not null,
  edit_id bigint references public.content_edits (id) on delete set null,
  base_updated_at timestamptz not null,
  after jsonb not null,
  before jsonb,
  planned_updated_at timestamptz,
  plan_status text,
  plan_message text,
  current jsonb,
  outcome text,
  outcome_message text,
  pre_image jsonb,
  pre_updated_at timestamptz,
  reread_at timestamptz,
  applied_updated_at timestamptz,
  answer jsonb,
  writer_user_id text,
  overwritten_by jsonb,
  overwritten_revision_id text,
  restore_outcome text,
  restore_message text,
  restored_updated_at timestamptz,
  restore_answer jsonb,
  writes integer not null default 0 constraint publish_items_writes_non_negative check (writes >= 0),
  restore_writes integer not null default 0 constraint publish_items_restore_writes_non_negative check (restore_writes >= 0),
  updated_at timestamptz not null default now(),
  constraint publish_items_one_per_item unique (plan_id, content_type, hubspot_id),
  constraint publish_items_plan_status_is_valid check (plan_status in ('ready', 'conflict', 'invalid', 'unchanged', 'missing')),
  constraint publish_items_outcome_is_valid
    check (outcome in ('writing', 'applied', 'scheduled', 'unchanged', 'conflict', 'invalid', 'failed', 'overwritten')),
  constraint publish_items_restore_outcome_is_valid
    check (restore_outcome in ('restoring', 'restored', 'conflict', 'invalid', 'failed')),
  -- What each plan status carries: HubSpot's values (before) and update time when read, HubSpot's
  -- values beside ours for a conflict, a message for an invalid item, nothing read for a missing one.
  constraint publish_items_plan_status_fields check (
    plan_status is null
    or (plan_status in ('ready', 'unchanged') and before is not null and planned_updated_at is not null)
    or (plan_status = 'conflict' and current is not null and plan_message is not null)
    or (plan_status = 'invalid' and plan_message is not null)
    or (plan_status = 'missing' and before is null and plan_message is not null)),
  -- Only a ready item is applied; only an applied (or scheduled) one restored.
  constraint publish_items_outcome_needs_ready check (outcome is null or plan_status is not distinct from 'ready'),
  constraint publish_items_restore_needs_applied check (restore_outcome is null or outcome in ('applied', 'scheduled')),
  -- A write is under way or done: the pre-image and its update time are kept, and the write was counted first.
  constraint publish_items_written_has_pre_image check (
    outcome is null or outcome not in ('writing', 'applied', 'scheduled', 'overwritten')
    or (pre_image is not null and pre_updated_at is not null and writes >= 1)),
  constraint publish_items_applied_has_answer check (
    outcome is null or outcome not in ('applied', 'scheduled', 'overwritten') or (applied_updated_at is not null and answer is not null)),
  constraint publish_items_overwritten_has_events check ((outcome is not distinct from 'overwritten') = (overwritten_by is not null)),
  constraint publish_items_revision_needs_overwritten check (
    overwritten_revision_id is null or outcome is not distinct from 'overwritten'),
  constraint publish_items_outcome_message check (
    outcome is null or outcome not in ('conflict', 'invalid', 'failed') or outcome_message is not null),
  constraint publish_items_restored_has_time check (
    restore_outcome is null or restore_outcome <> 'restored' or restored_updated_at is not null),
  constraint publish_items_restore_message check (
    restore_outcome is null or restore_outcome not in ('conflict', 'invalid', 'failed') or restore_message is not null),
  constraint publish_items_writes_need_outcome check (writes = 0 or outcome is not null),
  constraint publish_items_restore_writes_need_outcome check (restore_writes = 0 or restore_outcome is not null)
);
comment on table public.publish_items is
  'One item of a plan: before → after, plan status, apply outcome, pre-image, HubSpot''s answers, restore outcome.';
comment on column public.publish_items.after is 'The edit''s patch: the target values of the patched fields.';
comment on column public.publish_items.before is 'HubSpot''s values of the patched fields when the plan read the item.';
comment on column public.publish_items.current is 'HubSpot''s values of the patched fields when a conflict was found (plan, apply or restore), shown beside ours.';
comment on column public.publish_items.pre_image is 'The whole item as HubSpot had it at the apply''s re-read: what a rollback writes back (its patched fields).';
comment on column public.publish_items.pre_updated_at is 'HubSpot''s update time of the pre-image (T0).';
comment on column public.publish_items.reread_at is
  'HubSpot''s time of the re-read that decided the write (the batch/read answer''s startedAt, or the read''s Date header): where the window starts.';
comment on column public.publish_items.applied_updated_at is
  'HubSpot''s update time after our write (T2): a restore''s conflict base; for a scheduled item, its draft''s.';
comment on column public.publish_items.answer is
  'HubSpot''s per-item answer to our write (or its error); while writing, the answer to the write''s first step when the rest was lost (a draft).';
comment on column public.publish_items.writer_user_id is
  'HubSpot''s user of our write''s own audit event (on the item at applied_updated_at): in a draft''s window, that user''s events are ours.';
comment on column public.publish_items.overwritten_by is 'The foreign audit-log events that landed between the re-read and our write.';
comment on column public.publish_items.writes is 'Our write requests that carried this item, counted before each was sent.';
-- A job's batches, in id order; and the items each phase still has to handle.
create index publish_items_batch_idx on public.publish_items (plan_id, content_type, id);
create index publish_items_to_plan_idx on public.publish_items (plan_id, content_type, id) where plan_status is null;
create index publish_items_to_publish_idx on public.publish_items (plan_id, content_type, id)
  where plan_status = 'ready' and (outcome is null or outcome in ('writing', 'failed'));
create index publish_items_to_restore_idx on public.publish_items (plan_id, content_type, id)
  where outcome in ('applied', 'scheduled') and (restore_outcome is null or restore_outcome in ('restoring', 'failed'));
-- An edit's items (an edit deleted sets them null).
create index publish_items_edit_idx on public.publish_items (edit_id) where edit_id is not null;
create index publish_items_owner_idx on public.publish_items (owner_id, plan_id);
-- Not indexed (docs/decisions/0009): publish_items_content_type_fkey (registry rows are never deleted).
-- No (portal_id, owner_id) key of its own: the plan's cascade removes the items; the columns are its copies, for RLS.
alter table public.publish_items enable row level security;
