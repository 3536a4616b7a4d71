-- private.export_columns: the CSV columns of each content type's export after
-- our own hubspot_id and hubspot_updated_at, in order: the SQL copy of the
-- TypeScript registry's exportColumns (shared/content-types.ts, which an export
-- pins in its checkpoint; tests/publish-sql.test.ts keeps the two equal). An
-- import (import_csv_edits) takes these columns and no other. Changed by a
-- migration only, with the registry.
create table private.export_columns (
  content_type text not null references private.content_types (content_type),
  position integer not null constraint export_columns_position_range check (position between 1 and 200),
  column_name text not null constraint export_columns_name_length check (char_length(column_name) between 1 and 200),
  primary key (content_type, column_name),
  constraint export_columns_one_per_position unique (content_type, position)
);
comment on table private.export_columns is
  'The export''s CSV columns per content type (after hubspot_id, hubspot_updated_at), as shared/content-types.ts lists them.';
alter table private.export_columns enable row level security;

insert into private.export_columns (content_type, position, column_name)
select t.content_type, c.position, c.column_name
  from (values ('site_pages'), ('landing_pages')) t(content_type)
 cross join unnest(array['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'domain', 'authorName',
                         'publishDate', 'created', 'updated', 'archivedAt']) with ordinality c(column_name, position)
union all
select v.content_type, c.position, c.column_name
  from (values
    ('blog_posts', array['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'authorName', 'blogAuthorId',
                         'contentGroupId', 'tagIds', 'postSummary', 'publishDate', 'created', 'updated']),
    ('blog_authors', array['fullName', 'displayName', 'email', 'slug', 'bio', 'website', 'language', 'created', 'updated']),
    ('blog_tags', array['name', 'slug', 'language', 'created', 'updated']),
    ('hubdb_tables', array['name', 'label', 'rowCount', 'columnCount', 'published', 'publishedAt', 'createdAt', 'updatedAt']),
    ('hubdb_rows', array['tableId', 'path', 'name', 'values', 'childTableId', 'createdAt', 'updatedAt']),
    ('url_redirects', array['routePrefix', 'destination', 'redirectStyle', 'isMatchFullUrl', 'isMatchQueryString', 'isPattern',
                            'precedence', 'created', 'updated'])
  ) v(content_type, columns)
 cross join unnest(v.columns) with ordinality c(column_name, position);
