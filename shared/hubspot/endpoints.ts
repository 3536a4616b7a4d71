// The list endpoint of each content type, from the table of every HubSpot
// path (api-paths.ts), called through the official client's generic request
// (one HTTP GET each, the body left as text).

import { apiEndpoint, API_ENDPOINTS, fillPath, type ListedContentType } from './api-paths.ts';

export type { ListedContentType };

/** List path per content type (HubDB rows: see rowsPath). */
export const LIST_PATHS: Readonly<Record<ListedContentType, string>> = Object.fromEntries(
  API_ENDPOINTS.filter((e) => e.kind === 'list').map((e) => [e.type, e.template]),
) as Record<ListedContentType, string>;

/** The rows of one HubDB table. */
export function rowsPath(tableId: string): string {
  return fillPath(apiEndpoint('rows').template, { tableIdOrName: tableId });
}

/** GET the account's details (its portal id and time zone). */
export const ACCOUNT_DETAILS_PATH = apiEndpoint('account_details').template;

/**
 * The HubDB rows column behind a row's `updatedAt` (a built-in column, as `path` is
 * `hs_path`): rows filter on it (`hs_updated_at__gt=<epoch ms>`) and sort by it.
 */
export const ROWS_UPDATED_COLUMN = 'hs_updated_at';

/**
 * An incremental listing (docs/sync.md): items updated strictly after `updatedAfter`
 * (ISO 8601), oldest first by `sort`, archived ones only when `archived`.
 */
export interface ChangedFilter {
  updatedAfter: string;
  sort: string;
  archived: boolean;
}

/**
 * Query string of a list call, in the official client's order: `after` (when
 * continuing), `limit`, `archived` (false unless a changed filter asks for the
 * archive), then a changed filter's `sort` and `updatedAfter`.
 */
export function listQuery(after: string | null | undefined, limit: number, changed: ChangedFilter | null = null): Record<string, string> {
  const qs: Record<string, string> = {};
  if (after) qs['after'] = after;
  qs['limit'] = String(limit);
  qs['archived'] = changed?.archived ? 'true' : 'false';
  if (changed) {
    qs['sort'] = changed.sort;
    qs['updatedAfter'] = changed.updatedAfter;
  }
  return qs;
}

/** The `after` cursor of a list response's forward paging (HubDB random-access paging has none). */
export function nextAfter(page: { paging?: { next?: { after?: unknown } } } | null | undefined): string | null {
  const after = page?.paging?.next?.after;
  return typeof after === 'string' && after !== '' ? after : null;
}
