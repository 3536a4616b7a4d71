// Routes of the list endpoints and account details, from the product's table of
// HubSpot paths (shared/hubspot/api-paths.ts), and the HubSpot paging rules behind them.

import { API_ENDPOINTS, API_VERSIONS, apiEndpoints, type ApiEndpoint, type ApiVersions } from '../shared/hubspot/api-paths.ts';
import type { ContentType } from '../shared/hubspot/content-types.ts';
import { itemBytes, itemJson, type Collection } from './collection.ts';
import type { Portal } from './portal.ts';
import { decodeSortedCursor, isQueried, parseListQuery, project, queriedPage } from './query.ts';
import { badRequest, json, notFound, rawJson, type SimResponse } from './responses.ts';

/**
 * Page sizes the simulator applies (larger `limit` values are clamped, like HubSpot's CMS APIs):
 * - CMS pages, landing pages, blog posts/authors/tags, url-redirects: default 20, max 100. HubSpot's
 *   blog posts reference documents a default of 20; 100 is the largest page size HubSpot's own
 *   examples use for these endpoints (e.g. `/cms/v3/pages/site-pages?limit=100`).
 * - HubDB tables and rows: default 1000, max 1000 (HubDB docs: "Defaults to 1000").
 */
export const LIMITS: Record<ContentType, { default: number; max: number }> = {
  site_pages: { default: 20, max: 100 },
  landing_pages: { default: 20, max: 100 },
  blog_posts: { default: 20, max: 100 },
  blog_authors: { default: 20, max: 100 },
  blog_tags: { default: 20, max: 100 },
  url_redirects: { default: 20, max: 100 },
  hubdb_tables: { default: 1000, max: 1000 },
  hubdb_rows: { default: 1000, max: 1000 },
};

export interface Route {
  key: string; // endpoint name used in stats, e.g. "GET /cms/hubdb/2026-03/tables/{tableIdOrName}/rows"
  scope: string | null;
  type: ContentType | null; // null = account details
  tableIdOrName?: string;
}

/**
 * The endpoints served: the product's table (shared/hubspot/api-paths.ts) and, as
 * HubSpot answers every supported version at once, the same at v3: the paths the
 * official client's typed APIs call (@hubspot/api-client 13), which tests and
 * benchmarks compare with.
 */
export const SERVED_ENDPOINTS: readonly ApiEndpoint[] = [
  ...API_ENDPOINTS,
  ...apiEndpoints(Object.fromEntries(Object.keys(API_VERSIONS).map((a) => [a, 'v3'])) as ApiVersions),
].filter((e, i, all) => all.findIndex((o) => o.method === e.method && o.template === e.template) === i);

// Each list path served (trailing slashes dropped) and its type; null: account details.
const LIST_ROUTES: ReadonlyMap<string, ContentType | null> = new Map(SERVED_ENDPOINTS
  .filter((e) => e.kind === 'list' || e.kind === 'account_details')
  .map((e) => [e.template.replace(/\/+$/, ''), e.type]));
const ROWS_PATHS = SERVED_ENDPOINTS.filter((e) => e.kind === 'rows')
  .map((e) => ({ key: `GET ${e.template}`, pattern: new RegExp(`^${e.template.replace('{tableIdOrName}', '([^/]+)')}$`) }));

// Matches a GET path (trailing slash ignored: the client calls v3's `/cms/v3/url-redirects/`).
export function matchRoute(method: string, rawPath: string): Route | null {
  if (method !== 'GET') return null;
  const path = rawPath.length > 1 ? rawPath.replace(/\/+$/, '') : rawPath;
  const type = LIST_ROUTES.get(path);
  if (type === null) return { key: `GET ${path}`, scope: null, type: null };
  if (type) return { key: `GET ${path}`, scope: type === 'hubdb_tables' ? 'hubdb' : 'content', type };
  for (const { key, pattern } of ROWS_PATHS) {
    const rows = pattern.exec(path);
    if (rows) return { key, scope: 'hubdb', type: 'hubdb_rows', tableIdOrName: decodeURIComponent(rows[1]!) };
  }
  return null;
}

// Opaque `after` token for "continue after this id".
export function encodeCursor(id: number): string {
  return Buffer.from(`sim:${id}`).toString('base64url');
}

// Id encoded in an `after` token, or null if it is not one of ours.
export function decodeCursor(after: string): number | null {
  const match = /^sim:(\d+)$/.exec(Buffer.from(after, 'base64url').toString('utf8'));
  return match ? Number(match[1]) : null;
}

// Answers a routed request for one portal.
export function handleRoute(route: Route, portal: Portal, query: URLSearchParams, pathname: string, baseUrl: string): SimResponse {
  if (route.type === null) return json(200, accountDetails(portal));
  const type = route.type;
  let collection: Collection = portal.collection(type);
  if (type === 'hubdb_rows') {
    const table = portal.findTable(route.tableIdOrName ?? '');
    if (!table) return notFound(`The table ${route.tableIdOrName} could not be found.`);
    collection = portal.tableRows(table.id);
  }
  const limits = LIMITS[type];
  const rawLimit = query.get('limit');
  const limit = rawLimit === null ? limits.default : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1) return badRequest(`Invalid limit: ${rawLimit}`);
  const pageSize = Math.min(limit, limits.max);
  const archived = query.get('archived') === 'true';
  const after = query.get('after');
  const offset = query.get('offset');
  if (type === 'hubdb_rows' && offset !== null && !after) {
    return randomAccessRows(collection, Number(offset), pageSize, archived, query, pathname, baseUrl);
  }
  if (isQueried(query)) return queriedRows(type, portal, collection, archived, after, pageSize, query, pathname, baseUrl);
  let afterId: number | null = null;
  if (after) {
    afterId = decodeCursor(after);
    if (afterId === null) return badRequest(`Invalid paging cursor: ${after}`);
  }
  const slice = collection.page(afterId, pageSize, archived);
  // Items as cached UTF-8 bytes (tables carry a live row count: rendered each time).
  const results = slice.results.map((item) => (type === 'hubdb_tables' ? Buffer.from(tableJson(portal, item.id, item.body)) : itemBytes(item)));
  let paging = '';
  if (slice.lastId !== null) {
    const next = encodeCursor(slice.lastId);
    paging = `,"paging":${JSON.stringify({ next: { after: next, link: nextLink(baseUrl, pathname, query, { after: next }) } })}`;
  }
  const typeField = type === 'hubdb_rows' ? '"type":"STREAMING",' : '';
  const parts: Buffer[] = [Buffer.from(`{${typeField}"total":${collection.count(archived)},"results":[`)];
  results.forEach((bytes, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(bytes);
  });
  parts.push(Buffer.from(`]${paging}}`));
  return rawJson(Buffer.concat(parts));
}

const COMMA = Buffer.from(',');

// A list request with filters, a sort or a projection (query.ts): the slower, general path.
function queriedRows(
  type: ContentType, portal: Portal, collection: Collection, archived: boolean, after: string | null, pageSize: number,
  query: URLSearchParams, pathname: string, baseUrl: string,
): SimResponse {
  const q = parseListQuery(type, query);
  if (typeof q === 'string') return badRequest(q);
  let cursor = null;
  if (after) {
    cursor = decodeSortedCursor(after);
    if (cursor === null) return badRequest(`Invalid paging cursor: ${after}`);
  }
  const page = queriedPage(collection.active(archived), type, q, cursor, pageSize);
  const results = page.results.map((item) => {
    const body = type === 'hubdb_tables' ? (JSON.parse(tableJson(portal, item.id, item.body)) as Record<string, unknown>) : item.body;
    return q.projection === null && type !== 'hubdb_tables' ? itemJson(item) : JSON.stringify(project(type, body, q.projection));
  });
  const paging = page.next === null ? '' : `,"paging":${JSON.stringify({ next: { after: page.next, link: nextLink(baseUrl, pathname, query, { after: page.next }) } })}`;
  const typeField = type === 'hubdb_rows' ? '"type":"STREAMING",' : '';
  return rawJson(`{${typeField}"total":${page.total},"results":[${results.join(',')}]${paging}}`);
}

// HubDB rows requested with `offset` (HubSpot answers with type RANDOM_ACCESS and offset paging).
function randomAccessRows(
  collection: Collection, offset: number, pageSize: number, archived: boolean,
  query: URLSearchParams, pathname: string, baseUrl: string,
): SimResponse {
  if (!Number.isInteger(offset) || offset < 0) return badRequest(`Invalid offset: ${offset}`);
  const all = collection.active(archived);
  const page = all.slice(offset, offset + pageSize);
  const body: Record<string, unknown> = { type: 'RANDOM_ACCESS', total: all.length, results: [] };
  const nextOffset = offset + page.length;
  if (nextOffset < all.length) {
    body['paging'] = { next: { offset: nextOffset, link: nextLink(baseUrl, pathname, query, { offset: String(nextOffset) }) } };
  }
  const text = JSON.stringify(body).replace('"results":[]', `"results":[${page.map(itemJson).join(',')}]`);
  return rawJson(text);
}

export function tableJson(portal: Portal, tableId: number, body: Record<string, unknown>): string {
  const columns = Array.isArray(body['columns']) ? body['columns'].length : 0;
  return JSON.stringify({ ...body, rowCount: portal.tableRows(tableId).count(false), columnCount: columns });
}

function nextLink(baseUrl: string, pathname: string, query: URLSearchParams, set: Record<string, string>): string {
  const params = new URLSearchParams(query);
  for (const [k, v] of Object.entries(set)) params.set(k, v);
  return `${baseUrl}${pathname}?${params.toString()}`;
}

// GET /account-info/<version>/details (PortalInformationResponse): the account's time zone and its UTC offset now.
function accountDetails(portal: Portal): Record<string, unknown> {
  const offsetMs = utcOffsetMs(portal.timeZone, Date.now());
  const abs = Math.abs(offsetMs) / 60_000;
  return {
    portalId: portal.portalId,
    accountType: 'STANDARD',
    timeZone: portal.timeZone,
    companyCurrency: 'USD',
    additionalCurrencies: ['EUR'],
    utcOffset: `${offsetMs < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`,
    utcOffsetMilliseconds: offsetMs,
    uiDomain: 'app.hubspot.com',
    dataHostingLocation: 'na1',
  };
}

/** The zone's offset from UTC at `now`, in ms (negative west of Greenwich). */
export function utcOffsetMs(timeZone: string, now: number): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
  }).formatToParts(now);
  const get = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return local - Math.floor(now / 1000) * 1000;
}
