-- private.content_types: the registry of HubSpot content types the queue
-- knows, the only list of them in SQL. jobs and hubspot_content reference it;
-- create_run checks runs.content_types against it. Adding a type is one row in
-- a migration (plus its TypeScript record). No API role reads it.
create table private.content_types (
  content_type text primary key
    constraint content_types_name_is_valid check (content_type ~ '^[a-z][a-z0-9_]{0,62}$'),
  created_at timestamptz not null default now()
);
comment on table private.content_types is
  'Registry of the HubSpot content types the queue knows; jobs and content reference it. Add a type with a migration row.';
alter table private.content_types enable row level security;

insert into private.content_types (content_type)
values ('site_pages'), ('landing_pages'), ('blog_posts'), ('blog_authors'),
       ('blog_tags'), ('hubdb_tables'), ('hubdb_rows'), ('url_redirects');
