// The stable CSV column list per content type. `hubspot_id` and
// `hubspot_updated_at` come from our table; the rest are HubSpot's field names.
// This is the one list: an export pins its type's fields in the job's
// checkpoint when it begins, and Postgres (public.export_header/export_rows)
// reads them from there, so every invocation of a resumed export writes the
// same columns.
import type { ContentType } from '../../shared/content-types.ts';

const PAGE_COLUMNS = ['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'domain', 'authorName', 'publishDate', 'created', 'updated', 'archivedAt'];

export const EXPORT_COLUMNS: Readonly<Record<ContentType, readonly string[]>> = {
  site_pages: PAGE_COLUMNS,
  landing_pages: PAGE_COLUMNS,
  blog_posts: ['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'authorName', 'blogAuthorId', 'contentGroupId', 'tagIds', 'postSummary', 'publishDate', 'created', 'updated'],
  blog_authors: ['fullName', 'displayName', 'email', 'slug', 'bio', 'website', 'language', 'created', 'updated'],
  blog_tags: ['name', 'slug', 'language', 'created', 'updated'],
  hubdb_tables: ['name', 'label', 'rowCount', 'columnCount', 'published', 'publishedAt', 'createdAt', 'updatedAt'],
  hubdb_rows: ['tableId', 'path', 'name', 'values', 'childTableId', 'createdAt', 'updatedAt'],
  url_redirects: ['routePrefix', 'destination', 'redirectStyle', 'isMatchFullUrl', 'isMatchQueryString', 'isPattern', 'precedence', 'created', 'updated'],
};

/** Header row: our two columns, then the type's fields. */
export function exportHeader(type: ContentType): string[] {
  return ['hubspot_id', 'hubspot_updated_at', ...EXPORT_COLUMNS[type]];
}
