-- private.hubdb_tables_lists: per portal, the HubDB tables list (every page of
-- GET /cms/v3/hubdb/tables as HubSpot sent it) read for one fetch run, so that
-- run's hubdb_tables and hubdb_rows jobs make one request for it between them,
-- whichever comes first: the run, the job reading it now and until when (its
-- read lease), then the pages and when they were read. Only jobs of that run
-- use it; the next run to need a list takes the row over. Nobody but the owner
-- reads it (take_hubdb_tables_list, store_hubdb_tables_list).
-- docs/decisions/0045-one-tables-list-per-cycle.md.
create table private.hubdb_tables_lists (
  portal_id uuid primary key references public.portals (id) on delete cascade,
  -- The run the list is (being) read for. No foreign key: a row of a run since deleted is never used.
  run_id uuid not null,
  reader_job_id bigint,
  read_lease_expires_at timestamptz,
  pages text[],
  read_at timestamptz,
  constraint hubdb_tables_lists_reader_has_lease check ((reader_job_id is null) = (read_lease_expires_at is null)),
  constraint hubdb_tables_lists_pages_have_time check ((pages is null) = (read_at is null)),
  constraint hubdb_tables_lists_read_or_stored check (pages is null or reader_job_id is null),
  constraint hubdb_tables_lists_has_pages check (pages is null or cardinality(pages) >= 1)
);
comment on table private.hubdb_tables_lists is
  'Per portal, the HubDB tables list read for one fetch run, shared by its hubdb_tables and hubdb_rows jobs (one request).';
alter table private.hubdb_tables_lists enable row level security;
