-- private.full_fetch_pages: per portal, type and position (the cursor a page
-- was read at), the page a full fetch last saved there: its body's digest and
-- context, the content ids stored from it and what it set next. The items a
-- full fetch saw (complete_fetch_job tombstones the rest), and a page HubSpot
-- sends again byte for byte, whose items nothing wrote since, is saved without
-- being parsed (save_fetched_page_raw). Nobody but the owner reads it.
-- docs/decisions/0042-unchanged-pages-by-digest.md.
create table private.full_fetch_pages (
  portal_id uuid not null references public.portals (id) on delete cascade,
  content_type text not null references private.content_types (content_type),
  -- The job checkpoint's `after` when the page was read ('' for the first page), and for HubDB rows its table.
  page_key text not null,
  job_id bigint not null,
  -- sha256 of the body as HubSpot sent it; null: not to be re-read unparsed (a re-read in one job gave another body).
  digest bytea,
  context jsonb,
  content_ids bigint[] not null,
  -- The greatest change_seq among content_ids once the page was saved: a later write to one moves it past.
  content_seq bigint not null,
  next_after text,
  max_updated timestamptz,
  primary key (portal_id, content_type, page_key)
);
comment on table private.full_fetch_pages is
  'What each page of a portal and type''s last full fetch held: the items it saw, and its digest for re-reading it unparsed.';
-- Not indexed (docs/decisions/0009): the content type key (registry rows are never deleted); the
-- portal's cascade and every lookup start with portal_id, the primary key's first column.
alter table private.full_fetch_pages enable row level security;
