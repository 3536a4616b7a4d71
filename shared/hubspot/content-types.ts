// HubSpot CMS content types we export, and the page size we request for each.

import { CONTENT_TYPES, type ContentType } from '../content-types.ts';

export { CONTENT_TYPES, type ContentType };

/**
 * Largest `limit` we ask for per request.
 * - CMS pages / landing pages / blog posts / authors / tags / url-redirects: HubSpot documents
 *   `limit` as "the maximum number of results to return" with a default of 20 (posts) or 100
 *   (pages, per HubSpot's API reference text); 100 is the largest value HubSpot's own examples use
 *   (`/cms/v3/pages/site-pages?limit=100`), so we ask for 100.
 * - HubDB tables and rows: the HubDB docs give a default (and maximum) of 1000 rows per request.
 */
export const PAGE_SIZE: Readonly<Record<ContentType, number>> = {
  site_pages: 100,
  landing_pages: 100,
  blog_posts: 100,
  blog_authors: 100,
  blog_tags: 100,
  hubdb_tables: 1000,
  hubdb_rows: 1000,
  url_redirects: 100,
};

// True when the value is one of the eight content type names.
export function isContentType(value: unknown): value is ContentType {
  return typeof value === 'string' && (CONTENT_TYPES as readonly string[]).includes(value);
}
