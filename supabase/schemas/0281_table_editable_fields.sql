-- private.editable_fields: the registry of what a publish may write, per
-- content type: the fields of HubSpot's published update request schemas we
-- accept in an edit's patch, with their JSON type (`string` fields take null
-- too; `object` is a HubDB row's `values`, sparse by column key). Every other
-- field, and every field of a type without rows here (HubDB tables), is
-- read-only. The TypeScript side (shared/publish-fields.ts) mirrors it
-- (tests/publish-sql.test.ts keeps them equal). Read by
-- private.check_edit_patch and import_csv_edits; changed by a migration only.
create table private.editable_fields (
  content_type text not null references private.content_types (content_type),
  field text not null constraint editable_fields_field_name check (field ~ '^[A-Za-z][A-Za-z0-9_]{0,99}$'),
  json_type text not null
    constraint editable_fields_json_type_is_valid
    check (json_type in ('string', 'integer', 'number', 'boolean', 'array_of_integers', 'object')),
  primary key (content_type, field)
);
comment on table private.editable_fields is
  'The fields an edit may change, per content type, with their JSON type; everything else is read-only.';
alter table private.editable_fields enable row level security;

insert into private.editable_fields (content_type, field, json_type)
select t.content_type, f.field, f.json_type
  from (values ('site_pages'), ('landing_pages')) t(content_type)
 cross join (values ('name', 'string'), ('slug', 'string'), ('htmlTitle', 'string'), ('metaDescription', 'string'),
                    ('authorName', 'string')) f(field, json_type)
union all
select 'blog_posts', f.field, f.json_type
  from (values ('name', 'string'), ('slug', 'string'), ('htmlTitle', 'string'), ('metaDescription', 'string'),
               ('postSummary', 'string'), ('blogAuthorId', 'string'), ('tagIds', 'array_of_integers')) f(field, json_type)
union all
select 'blog_authors', f.field, 'string'
  from (values ('fullName'), ('displayName'), ('email'), ('bio'), ('website')) f(field)
union all
select 'blog_tags', 'name', 'string'
union all
select 'hubdb_rows', f.field, f.json_type
  from (values ('path', 'string'), ('name', 'string'), ('values', 'object')) f(field, json_type)
union all
select 'url_redirects', f.field, f.json_type
  from (values ('routePrefix', 'string'), ('destination', 'string'), ('redirectStyle', 'integer'), ('precedence', 'integer'),
               ('isMatchFullUrl', 'boolean'), ('isMatchQueryString', 'boolean'), ('isPattern', 'boolean')) f(field, json_type);
