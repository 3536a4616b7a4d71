-- public.hubspot_content: the fetched HubSpot items, one row per portal,
-- content type and HubSpot id (written by private.save_page; marked deleted,
-- never removed, when a fetch no longer sees them or lists them archived:
-- tombstones). Owners read their own rows (policy in 0800); only the service
-- role writes. change_seq orders every insert, change and deletion: the change
-- feed (docs/sync.md). Storage choices (lz4, or inline without it):
-- docs/decisions/0005-fetched-pages.md.
create sequence private.content_change_seq as bigint;

create table public.hubspot_content (
  id bigint generated always as identity primary key,
  portal_id uuid not null,
  owner_id uuid not null,
  content_type text not null,
  hubspot_id text not null check (char_length(hubspot_id) between 1 and 200),
  data jsonb not null,
  hubspot_updated_at timestamptz,
  fetched_at timestamptz not null default now(),
  last_seen_job_id bigint,
  deleted_at timestamptz,
  -- Drawn while the writer holds the type's one active fetch job FOR UPDATE, so
  -- within a portal and type the numbers follow commit order. Other writers take
  -- the same locks: the rows of a deleted HubDB table (its tables job, holding the
  -- portal's claim lock and the running rows job; tombstone_rows_of_gone_tables),
  -- and a publish or restore writing HubSpot's answers (that lock and the portal's
  -- claim lock, so that no fetch starts meanwhile: private.write_published_copy).
  -- save_page gives a new row one number for both (the defaults are for other writers).
  change_seq bigint not null default nextval('private.content_change_seq'),
  inserted_seq bigint not null default nextval('private.content_change_seq'),
  constraint hubspot_content_portal_owner_fkey foreign key (portal_id, owner_id)
    references public.portals (id, owner_id) on delete cascade,
  constraint hubspot_content_one_per_item unique (portal_id, content_type, hubspot_id),
  constraint hubspot_content_content_type_fkey foreign key (content_type) references private.content_types (content_type)
);
-- A portal's live items by type, in id order (exports page by it). owner_id is carried
-- so the owner's count per type (shared/sql/content.ts, the page's content overview)
-- is an index-only scan under RLS (`owner_id = auth.uid()`): ~7 ms for a 41,705-item
-- portal, against ~250 ms reading the heap without it (docs/decisions/0066).
create index hubspot_content_live_idx on public.hubspot_content (portal_id, content_type, id) include (owner_id)
  where deleted_at is null;
create index hubspot_content_owner_idx on public.hubspot_content (owner_id);
-- The change feed: a portal and type's changes after a cursor, in order.
-- Partial on a predicate always true (numbers start at 1) so that only a
-- query saying `change_seq > 0` can use it: as a plain index, save_page's
-- generic-plan lookup by (portal, type, hubspot_id) chose it over the unique
-- index and scanned the whole type per item (4-6x the CPU per stored item, bench 9).
create index hubspot_content_changes_idx on public.hubspot_content (portal_id, content_type, change_seq) where change_seq > 0;
-- A portal's live HubDB rows by table (ids `<tableId>:<rowId>`): counted per table, and a
-- table's ids for its sweep, by index-only scans (hubspot_id included: rows are wide).
create index hubspot_content_hubdb_table_idx on public.hubspot_content (portal_id, (split_part(hubspot_id, ':', 1))) include (hubspot_id)
  where content_type = 'hubdb_rows' and deleted_at is null;
-- Not indexed (docs/decisions/0009): hubspot_content_content_type_fkey (registry rows are never
-- deleted) and hubspot_content_portal_owner_fkey (a portal's cascade finds its items by
-- hubspot_content_one_per_item, which starts with portal_id).
comment on column public.hubspot_content.fetched_at is
  'When a fetch last wrote the row (inserted, changed or deleted it); an unchanged item is not written again.';
comment on column public.hubspot_content.last_seen_job_id is
  'The fetch job that last wrote the row; what a full fetch saw is in private.full_fetch_pages.';
comment on column public.hubspot_content.deleted_at is
  'When a fetch found the item deleted (listed archived, absent from a full listing, or a HubDB row of a table found deleted); the row stays as a tombstone.';
comment on column public.hubspot_content.change_seq is
  'Position of the row''s last insert, change or deletion in the change feed (per portal and type in commit order).';
comment on column public.hubspot_content.inserted_seq is
  'Position of the row''s insert: a change after cursor c with inserted_seq > c is an insert.';
alter table public.hubspot_content enable row level security;

-- Items are ~2.4 KB of JSON: compressed with lz4 where the server has it,
-- else stored inline and uncompressed up to a full page (pglz costs too much CPU).
do $$
begin
  if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table public.hubspot_content alter column data set compression lz4;
  else
    alter table public.hubspot_content set (toast_tuple_target = 8160);
  end if;
end
$$;
