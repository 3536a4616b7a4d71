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
