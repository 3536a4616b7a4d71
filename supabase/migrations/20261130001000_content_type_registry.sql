-- The content-type registry: one row per HubSpot content type the queue knows,
-- the only list of them in SQL. jobs.content_type and
-- hubspot_content.content_type reference it (foreign keys); create_run checks
-- runs.content_types, an array no foreign key can reference, against it.
--
-- Adding a content type is one row in a new migration:
--   insert into private.content_types (content_type) values ('<new_type>');
-- plus its TypeScript record (HubSpot path, page size, export columns).

create table private.content_types (
  content_type text primary key
    constraint content_types_name_is_valid check (content_type ~ '^[a-z][a-z0-9_]{0,62}$'),
  created_at timestamptz not null default now()
);
comment on table private.content_types is
  'Registry of the HubSpot content types the queue knows; jobs and content reference it. Add a type with a migration row.';

alter table private.content_types enable row level security;
revoke all on private.content_types from public, anon, authenticated;

insert into private.content_types (content_type)
values ('site_pages'), ('landing_pages'), ('blog_posts'), ('blog_authors'),
       ('blog_tags'), ('hubdb_tables'), ('hubdb_rows'), ('url_redirects');

-- The inline lists go; the foreign keys say the same from the registry. (A
-- foreign key is checked only when the referencing value changes: inserts, never
-- the queue's status updates.)
alter table public.jobs
  drop constraint if exists jobs_content_type_is_known,
  add constraint jobs_content_type_fkey foreign key (content_type) references private.content_types (content_type);
alter table public.hubspot_content
  drop constraint if exists hubspot_content_type_is_known,
  add constraint hubspot_content_content_type_fkey foreign key (content_type) references private.content_types (content_type);
alter table public.runs
  drop constraint if exists runs_content_types_known;

-- Whether a content type is registered.
create or replace function private.is_known_content_type(t text) returns boolean
language sql
stable
parallel safe
set search_path = ''
as $$
  select exists (select 1 from private.content_types c where c.content_type = t)
$$;

-- A non-empty array of distinct registered content types (create_run's check of runs.content_types).
create or replace function private.are_known_content_types(ts text[]) returns boolean
language sql
stable
parallel safe
set search_path = ''
as $$
  select cardinality(ts) >= 1
     and (select count(distinct t.t) = count(*) and count(c.content_type) = count(*)
            from unnest(ts) as t(t)
            left join private.content_types c on c.content_type = t.t)
$$;

revoke all on function private.is_known_content_type(text) from public, anon, authenticated;
revoke all on function private.are_known_content_types(text[]) from public, anon, authenticated;
