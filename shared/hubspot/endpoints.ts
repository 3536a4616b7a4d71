// One list call per content type through the official @hubspot/api-client (one HTTP request each).

import type { Client } from '@hubspot/api-client';
import type { ContentType } from './content-types.ts';
import type { ResponseProbe } from './transport.ts';

export interface ListPage {
  results: unknown[];
  total: number;
  after: string | null;
}

export type ListFn = (after: string | undefined, limit: number, probe: ResponseProbe) => Promise<ListPage>;
export type RowsFn = (tableId: string, after: string | undefined, limit: number, probe: ResponseProbe) => Promise<ListPage>;

interface Paged {
  total: number;
  results: unknown[];
  paging?: { next?: { after?: string } | { offset?: number } };
}

// Normalises the three response shapes (forward paging, HubDB streaming, HubDB random access).
function toListPage(data: Paged): ListPage {
  const next = data.paging?.next;
  const after = next && 'after' in next && next.after ? next.after : null;
  return { results: data.results ?? [], total: data.total ?? 0, after };
}

const u = undefined;

/**
 * Builds the per-type list functions. The API objects are created eagerly: @hubspot/api-client keeps
 * its retry/limiter decorators in a process-wide singleton that each `new Client()` overwrites, and it
 * applies them when an API object is created, so creating them right after our (decorator-free)
 * Client guarantees no hidden retries or Bottleneck queueing.
 */
export function createListers(client: Client): { list: Record<Exclude<ContentType, 'hubdb_rows'>, ListFn>; rows: RowsFn } {
  const sitePages = client.cms.pages.sitePagesApi;
  const landingPages = client.cms.pages.landingPagesApi;
  const posts = client.cms.blogs.blogPosts.basicApi;
  const authors = client.cms.blogs.authors.blogAuthorsApi;
  const tags = client.cms.blogs.tags.blogTagsApi;
  const tables = client.cms.hubdb.tablesApi;
  const rowsApi = client.cms.hubdb.rowsApi;
  const redirects = client.cms.urlRedirects.redirectsApi;

  const list: Record<Exclude<ContentType, 'hubdb_rows'>, ListFn> = {
    site_pages: async (after, limit, probe) =>
      toListPage((await sitePages.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, u, probe.options())).data),
    landing_pages: async (after, limit, probe) =>
      toListPage((await landingPages.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, u, probe.options())).data),
    blog_posts: async (after, limit, probe) =>
      toListPage((await posts.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, u, probe.options())).data),
    blog_authors: async (after, limit, probe) =>
      toListPage((await authors.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, u, probe.options())).data),
    blog_tags: async (after, limit, probe) =>
      toListPage((await tags.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, u, probe.options())).data),
    hubdb_tables: async (after, limit, probe) =>
      toListPage((await tables.getAllTablesWithHttpInfo(u, after, limit, u, u, u, u, u, u, u, false, u, probe.options())).data),
    url_redirects: async (after, limit, probe) =>
      toListPage((await redirects.getPageWithHttpInfo(u, u, u, u, u, u, u, after, limit, false, probe.options())).data),
  };
  const rows: RowsFn = async (tableId, after, limit, probe) =>
    toListPage((await rowsApi.getTableRowsWithHttpInfo(tableId, u, after, limit, u, u, false, probe.options())).data);
  return { list, rows };
}
