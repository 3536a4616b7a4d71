// The CMS v3 list endpoint of each content type, called through the official
// client's generic request (one HTTP GET each, the body left as text).

import { CONTENT_TYPE_REGISTRY, CONTENT_TYPES, type ContentType } from '../content-types.ts';

/** The types HubSpot lists from one endpoint (every type but HubDB rows, listed per table). */
export type ListedContentType = Exclude<ContentType, 'hubdb_rows'>;

/** List path per content type, from the registry (HubDB rows: see rowsPath). The paths are the official client's own. */
export const LIST_PATHS: Readonly<Record<ListedContentType, string>> = Object.fromEntries(
  CONTENT_TYPES.flatMap((t) => {
    const path = CONTENT_TYPE_REGISTRY[t].listPath;
    return path === null ? [] : [[t, path]];
  }),
) as Record<ListedContentType, string>;

/** The rows of one HubDB table. */
export function rowsPath(tableId: string): string {
  return `/cms/v3/hubdb/tables/${encodeURIComponent(tableId)}/rows`;
}

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
