// The CMS v3 list endpoint of each content type, called through the official
// client's generic request (one HTTP GET each, the body left as text).

import type { ContentType } from './content-types.ts';

/** List path per content type (HubDB rows: see rowsPath). The paths are the official client's own. */
export const LIST_PATHS: Readonly<Record<Exclude<ContentType, 'hubdb_rows'>, string>> = {
  site_pages: '/cms/v3/pages/site-pages',
  landing_pages: '/cms/v3/pages/landing-pages',
  blog_posts: '/cms/v3/blogs/posts',
  blog_authors: '/cms/v3/blogs/authors',
  blog_tags: '/cms/v3/blogs/tags',
  hubdb_tables: '/cms/v3/hubdb/tables',
  url_redirects: '/cms/v3/url-redirects/',
};

/** The rows of one HubDB table. */
export function rowsPath(tableId: string): string {
  return `/cms/v3/hubdb/tables/${encodeURIComponent(tableId)}/rows`;
}

/** Query string of a list call, in the official client's order: `after` (when continuing), `limit`, `archived=false`. */
export function listQuery(after: string | null | undefined, limit: number): Record<string, string> {
  const qs: Record<string, string> = {};
  if (after) qs['after'] = after;
  qs['limit'] = String(limit);
  qs['archived'] = 'false';
  return qs;
}

/** The `after` cursor of a list response's forward paging (HubDB random-access paging has none). */
export function nextAfter(page: { paging?: { next?: { after?: unknown } } } | null | undefined): string | null {
  const after = page?.paging?.next?.after;
  return typeof after === 'string' && after !== '' ? after : null;
}
