-- public.sync_marks: per portal and content type, the high-water mark of
-- incremental sync (the newest HubSpot update time a completed fetch stored,
-- never past an item it did not save) and when the type was last synced.
-- Written only by complete_fetch_job (so a mark moves only when its job
-- completes); create_run starts an incremental job at high_water minus the
-- schedule's overlap. Owners read their own rows (policy in 0800).
-- Rationale: docs/decisions/0010-incremental-sync.md.
create table public.sync_marks (
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null references private.content_types (content_type),
  high_water timestamptz not null,
  last_full_at timestamptz,
  last_incremental_at timestamptz,
  -- HubDB rows: when the last completed fetch that swept every table for deleted rows (a full one, or a sweep cycle) was created.
  last_sweep_at timestamptz,
  -- The newest archive time a completed fetch stored (at least its since; a full one: its start). A probe asks for archives after it.
  archived_high_water timestamptz,
  last_job_id bigint,
  updated_at timestamptz not null default now(),
  primary key (portal_id, content_type),
  constraint sync_marks_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade
);
comment on table public.sync_marks is
  'High-water mark of incremental sync per portal and content type; moved only by a completed fetch job.';
comment on column public.sync_marks.archived_high_water is
  'The newest archive time a completed fetch stored (an incremental: at least its since; a full: its start); a probe asks HubSpot for archives after it. Null: not known yet (the type is fetched, not probed).';
comment on column public.sync_marks.high_water is
  'A full fetch: its newest stored update time, capped at when it started; an incremental one: the newest update time it stored (never lowered).';
create index sync_marks_owner_idx on public.sync_marks (owner_id);
-- Not indexed (docs/decisions/0009): sync_marks_content_type_fkey (registry rows are never deleted);
-- the portal's cascade finds its marks by the primary key, which starts with portal_id.
alter table public.sync_marks enable row level security;
