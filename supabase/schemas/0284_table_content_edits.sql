-- public.content_edits: an edit, a sparse patch of one stored item (portal,
-- content type, HubSpot id) based on the item's hubspot_updated_at as the
-- editor saw it (base_updated_at). Written by apps through supabase-js under
-- RLS (owners insert, change and delete their own pending edits: policies in
-- 0800, column grants in 0810) and by the service role (import_csv_edits:
-- source csv). At most one pending edit per item. The trigger
-- private.fill_content_edit (0475) sets the owner from the portal and refuses
-- (22023) a patch that is not a non-empty object of editable fields
-- (private.editable_fields) with values of their JSON type, or an item not
-- live in the portal's copy: nothing is stored. create_publish_plan takes the
-- pending edits into a plan (`planned`); a failed or discarded plan gives
-- them back (`pending`, or `discarded` when a newer pending edit of the item
-- exists). docs/publish.md.
create table public.content_edits (
  id bigint generated always as identity primary key,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  hubspot_id text not null constraint content_edits_hubspot_id_length check (char_length(hubspot_id) between 1 and 200),
  base_updated_at timestamptz not null,
  patch jsonb not null,
  source text not null default 'app',
  status text not null default 'pending',
  plan_id uuid references public.publish_plans (id) on delete cascade,
  created_by uuid default auth.uid(),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint content_edits_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint content_edits_source_is_valid check (source in ('app', 'csv')),
  constraint content_edits_status_is_valid check (status in ('pending', 'planned', 'discarded')),
  -- Pending edits belong to no plan; planned ones to theirs (a discarded one keeps the plan that gave it back).
  constraint content_edits_plan_iff_planned check (
    (status = 'pending' and plan_id is null) or (status = 'planned' and plan_id is not null) or status = 'discarded'),
  constraint content_edits_patch_is_object check (jsonb_typeof(patch) = 'object')
);
comment on table public.content_edits is
  'An edit: a sparse patch of one stored item, based on its hubspot_updated_at; owners write their pending edits under RLS.';
comment on column public.content_edits.base_updated_at is
  'The item''s hubspot_updated_at the edit is based on: a plan finds a conflict when HubSpot''s update time differs.';
comment on column public.content_edits.patch is
  'The fields to change and their new values: editable fields of the type only (private.editable_fields); a HubDB row''s values hold only the changed columns.';
comment on column public.content_edits.created_by is
  'Who wrote the edit (auth.uid(), or the importing user). No foreign key: see publish_plans.created_by.';
-- One pending edit per item (an import replaces it; an app updates it).
create unique index content_edits_one_pending_per_item on public.content_edits (portal_id, content_type, hubspot_id)
  where status = 'pending';
-- A plan's edits (given back when it fails or is discarded; the plan's cascade).
create index content_edits_plan_idx on public.content_edits (plan_id) where plan_id is not null;
-- An owner's edits (RLS reads, and the portal cascade: its (portal_id, owner_id) rows are among the owner's).
create index content_edits_owner_idx on public.content_edits (owner_id, id);
-- Not indexed (docs/decisions/0009): content_edits_content_type_fkey (registry rows are never deleted) and
-- content_edits_portal_owner_fkey (the cascade finds the owner's edits by content_edits_owner_idx).
alter table public.content_edits enable row level security;
