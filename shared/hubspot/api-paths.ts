// Every HubSpot path the product calls, each with its API version, in one
// table: the content client builds its URLs from it (lists, limit=1 totals,
// HubDB rows, account details), so do the write client (batch reads and
// updates, drafts, push-live, scheduling, revisions, HubDB draft rows and
// publish, URL redirects, the CMS audit log) and the OAuth calls; the
// simulator (hubspot-sim/) routes from it; tests/hubspot-api-paths.test.ts
// checks every entry, and what the product relies on in its answers, against
// HubSpot's published spec of that version. Moving an area to another version
// is one line of API_AREAS (docs/hubspot-api.md).
// Leaf file: it imports nothing of the project but a type.

import type { ContentType } from '../content-types.ts';

/**
 * One of HubSpot's API versions: the legacy `v3`, or a dated release
 * (`2026-03`; a new one each March and September, each supported 18 months).
 */
export type ApiVersion = 'v3' | `${number}-${'03' | '09'}`;

/** Where an area sits: under `/cms` or not, the API's name, the path below its version (`/cms/blogs/<v>/posts`), and the version called. */
export interface ApiAreaRecord {
  readonly version: ApiVersion;
  readonly cms: boolean;
  readonly api: string;
  readonly below?: string;
}

/**
 * Every area the product calls, with the version it calls; an area is one file
 * of HubSpot's spec collection (blog posts, authors and tags are three).
 * Moving an area to another version is its one line, proved by
 * tests/hubspot-api-paths.test.ts.
 */
export const API_AREAS = {
  pages: { version: '2026-03', cms: true, api: 'pages' },
  blog_posts: { version: '2026-03', cms: true, api: 'blogs', below: '/posts' },
  blog_authors: { version: '2026-03', cms: true, api: 'blogs', below: '/authors' },
  blog_tags: { version: '2026-03', cms: true, api: 'blogs', below: '/tags' },
  hubdb: { version: '2026-03', cms: true, api: 'hubdb', below: '/tables' },
  url_redirects: { version: '2026-03', cms: true, api: 'url-redirects' },
  audit_logs: { version: '2026-03', cms: true, api: 'audit-logs' },
  account_info: { version: '2026-03', cms: false, api: 'account-info' },
  // Kept at v3: a refused refresh is told by error codes no spec version publishes (docs/decisions/0073).
  oauth: { version: 'v3', cms: false, api: 'oauth' },
} as const satisfies Readonly<Record<string, ApiAreaRecord>>;

export type ApiArea = keyof typeof API_AREAS;
export type ApiVersions = Readonly<Record<ApiArea, ApiVersion>>;

/** The version each area is called at. */
export const API_VERSIONS: ApiVersions = Object.fromEntries(
  Object.entries(API_AREAS).map(([area, record]) => [area, record.version]),
) as Record<ApiArea, ApiVersion>;

/**
 * A path of an area at a version. A dated version follows the API's name
 * (`/cms/pages/2026-03/site-pages`, `/account-info/2026-03/details`), as v3
 * does outside the CMS (`/oauth/v3/token`); CMS v3 precedes it, as the
 * official client calls it (`/cms/v3/pages/site-pages`), a bare collection with
 * the client's trailing slash (`/cms/v3/url-redirects/`).
 */
export function areaPath(area: ApiArea, rest = '', version: ApiVersion = API_VERSIONS[area]): string {
  const { cms, api, below = '' }: ApiAreaRecord = API_AREAS[area];
  if (cms && version === 'v3') return `/cms/v3/${api}${below}${rest}` + (below + rest === '' ? '/' : '');
  return `${cms ? '/cms' : ''}/${api}/${version}${below}${rest}`;
}

/** A template with its parameters filled in (each URI-encoded). */
export function fillPath(template: string, params: Readonly<Record<string, string>> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`missing path parameter ${name} for ${template}`);
    return encodeURIComponent(value);
  });
}

/** The types HubSpot lists from one endpoint (every type but HubDB rows, listed per table). */
export type ListedContentType = Exclude<ContentType, 'hubdb_rows'>;

/** The types HubSpot reads and updates in batches (`POST …/batch/read`, `…/batch/update`). */
export type BatchContentType = Extract<ContentType, 'site_pages' | 'landing_pages' | 'blog_posts' | 'blog_authors' | 'blog_tags'>;
export const BATCH_CONTENT_TYPES: readonly BatchContentType[] = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags'];

/** The types with a draft, push-live, scheduled publishing and revisions. */
export type VersionedContentType = Extract<BatchContentType, 'site_pages' | 'landing_pages' | 'blog_posts'>;
export const VERSIONED_CONTENT_TYPES: readonly VersionedContentType[] = ['site_pages', 'landing_pages', 'blog_posts'];

/** Each listed type's area and its collection below it. */
const LISTS: Readonly<Record<ListedContentType, { area: ApiArea; path: string }>> = {
  site_pages: { area: 'pages', path: '/site-pages' },
  landing_pages: { area: 'pages', path: '/landing-pages' },
  blog_posts: { area: 'blog_posts', path: '' },
  blog_authors: { area: 'blog_authors', path: '' },
  blog_tags: { area: 'blog_tags', path: '' },
  hubdb_tables: { area: 'hubdb', path: '' },
  url_redirects: { area: 'url_redirects', path: '' },
};

export type WriteEndpointKind =
  | 'batch_read' | 'batch_update'
  | 'draft_read' | 'draft_update' | 'push_live' | 'schedule' | 'revisions' | 'restore'
  | 'hubdb_draft_rows_read' | 'hubdb_draft_rows_update' | 'hubdb_rows_read' | 'hubdb_publish'
  | 'redirect_read' | 'redirect_update'
  | 'audit_logs';
export type ApiEndpointKind = 'list' | 'rows' | 'account_details' | 'oauth_token' | 'oauth_introspect' | WriteEndpointKind;

/**
 * What the product relies on in one endpoint: the query parameters and body
 * fields it sends, and per answer status the fields it reads (`results[].id`,
 * `paging.next.after`; `default`: HubSpot's error answer). The spec check adds
 * each listed type's export columns and each editable type's editable fields.
 */
export interface Relies {
  readonly query?: readonly string[];
  readonly body?: readonly string[];
  readonly answers: Readonly<Record<string, readonly string[]>>;
}

/** One endpoint: its kind, area, method, path template (`{objectId}`, `{revisionId}`, `{tableIdOrName}`, `{urlRedirectId}`), type, scope and reliances. */
export interface ApiEndpoint {
  readonly kind: ApiEndpointKind;
  readonly area: ApiArea;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly template: string;
  /** The content type it lists, reads or writes (HubDB publish: tables); null: the audit log, account details, OAuth. */
  readonly type: ContentType | null;
  /** The OAuth scope the spec's security section names; null: none (account details, OAuth's own endpoints). */
  readonly scope: 'content' | 'hubdb' | null;
  readonly relies: Relies;
}

const ERROR = ['category', 'message', 'correlationId'];
const LIST_QUERY = ['after', 'limit', 'archived', 'sort', 'updatedAfter'];
const PAGE = ['total', 'results[].id', 'paging.next.after'];
const BATCH_ERRORS = ['errors[].category', 'errors[].message', 'errors[].context'];
const answers = (ok: Record<string, readonly string[]>): Relies['answers'] => ({ ...ok, default: ERROR });
/** The field of an item's last update: `updated` on CMS items, `updatedAt` on HubDB's. */
const updatedField = (type: ContentType): string => (type === 'hubdb_tables' || type === 'hubdb_rows' ? 'updatedAt' : 'updated');

/** Every endpoint at the given versions (batch and versioned ones once per type). */
export function apiEndpoints(versions: ApiVersions = API_VERSIONS): ApiEndpoint[] {
  const at = (area: ApiArea, rest = '') => areaPath(area, rest, versions[area]);
  const e = (
    kind: ApiEndpointKind, area: ApiArea, method: ApiEndpoint['method'], template: string, type: ContentType | null,
    scope: ApiEndpoint['scope'], relies: Relies,
  ): ApiEndpoint => ({ kind, area, method, template, type, scope, relies });
  const item = (type: ContentType) => answers({ 200: ['id', updatedField(type)] });
  const batch = (type: ContentType) => answers({ 200: [`results[].id`, `results[].${updatedField(type)}`], 207: ['results', ...BATCH_ERRORS] });
  return [
    ...(Object.keys(LISTS) as ListedContentType[]).map((t) => {
      const read = [...PAGE, `results[].${updatedField(t)}`, ...(t === 'hubdb_tables' ? ['results[].name', 'results[].rowCount'] : [])];
      return e('list', LISTS[t].area, 'GET', at(LISTS[t].area, LISTS[t].path), t, t === 'hubdb_tables' ? 'hubdb' : 'content',
        { query: LIST_QUERY, answers: answers({ 200: read }) });
    }),
    e('rows', 'hubdb', 'GET', at('hubdb', '/{tableIdOrName}/rows'), 'hubdb_rows', 'hubdb',
      { query: ['after', 'limit', 'archived', 'sort'], answers: answers({ 200: [...PAGE, 'results[].updatedAt'] }) }),
    e('account_details', 'account_info', 'GET', at('account_info', '/details'), null, null, { answers: answers({ 200: ['portalId', 'timeZone'] }) }),
    e('oauth_token', 'oauth', 'POST', at('oauth', '/token'), null, null, {
      body: ['grant_type', 'client_id', 'client_secret', 'refresh_token', 'code', 'redirect_uri'],
      answers: { 200: ['access_token', 'refresh_token', 'expires_in', 'token_type', 'hub_id', 'scopes'], default: ['message', 'correlationId'] },
    }),
    e('oauth_introspect', 'oauth', 'POST', at('oauth', '/token/introspect'), null, null, {
      body: ['client_id', 'client_secret', 'token', 'token_type_hint'], answers: { 200: ['active', 'hub_id'], default: ['message', 'correlationId'] },
    }),
    ...BATCH_CONTENT_TYPES.flatMap((t) => {
      const { area, path } = LISTS[t];
      return [
        e('batch_read', area, 'POST', at(area, `${path}/batch/read`), t, 'content', { body: ['inputs'], answers: batch(t) }),
        e('batch_update', area, 'POST', at(area, `${path}/batch/update`), t, 'content', { body: ['inputs'], answers: batch(t) }),
      ];
    }),
    ...VERSIONED_CONTENT_TYPES.flatMap((t) => {
      const { area, path } = LISTS[t];
      return [
        e('draft_read', area, 'GET', at(area, `${path}/{objectId}/draft`), t, 'content', { answers: item(t) }),
        e('draft_update', area, 'PATCH', at(area, `${path}/{objectId}/draft`), t, 'content', { answers: item(t) }),
        e('push_live', area, 'POST', at(area, `${path}/{objectId}/draft/push-live`), t, 'content', { answers: answers({ 204: [] }) }),
        e('schedule', area, 'POST', at(area, `${path}/schedule`), t, 'content', { body: ['id', 'publishDate'], answers: answers({ 204: [] }) }),
        e('revisions', area, 'GET', at(area, `${path}/{objectId}/revisions`), t, 'content',
          { query: ['limit', 'after'], answers: answers({ 200: ['results[].id', 'results[].updatedAt', 'paging.next.after'] }) }),
        e('restore', area, 'POST', at(area, `${path}/{objectId}/revisions/{revisionId}/restore`), t, 'content', { answers: item(t) }),
      ];
    }),
    e('hubdb_draft_rows_read', 'hubdb', 'POST', at('hubdb', '/{tableIdOrName}/rows/draft/batch/read'), 'hubdb_rows', 'hubdb',
      { body: ['inputs'], answers: batch('hubdb_rows') }),
    e('hubdb_draft_rows_update', 'hubdb', 'POST', at('hubdb', '/{tableIdOrName}/rows/draft/batch/update'), 'hubdb_rows', 'hubdb',
      { body: ['inputs[].id', 'inputs[].values', 'inputs[].path', 'inputs[].name'], answers: batch('hubdb_rows') }),
    e('hubdb_rows_read', 'hubdb', 'POST', at('hubdb', '/{tableIdOrName}/rows/batch/read'), 'hubdb_rows', 'hubdb',
      { body: ['inputs'], answers: batch('hubdb_rows') }),
    e('hubdb_publish', 'hubdb', 'POST', at('hubdb', '/{tableIdOrName}/draft/publish'), 'hubdb_tables', 'hubdb', { answers: answers({ 200: ['id'] }) }),
    e('redirect_read', 'url_redirects', 'GET', at('url_redirects', '/{urlRedirectId}'), 'url_redirects', 'content', { answers: item('url_redirects') }),
    e('redirect_update', 'url_redirects', 'PATCH', at('url_redirects', '/{urlRedirectId}'), 'url_redirects', 'content', { answers: item('url_redirects') }),
    e('audit_logs', 'audit_logs', 'GET', at('audit_logs'), null, 'content', {
      query: ['objectType', 'sort', 'limit', 'after', 'before'],
      answers: answers({ 200: ['results[].objectId', 'results[].objectType', 'results[].userId', 'results[].timestamp', 'paging.next.after'] }),
    }),
  ];
}

/** Every endpoint the product calls, at API_VERSIONS. */
export const API_ENDPOINTS: readonly ApiEndpoint[] = apiEndpoints();

/** The endpoint of a kind (for one type where the kind exists per type). */
export function apiEndpoint(kind: ApiEndpointKind, type: ContentType | null = null): ApiEndpoint {
  const found = API_ENDPOINTS.find((x) => x.kind === kind && (type === null || x.type === type));
  if (!found) throw new Error(`no ${kind} endpoint${type ? ` for ${type}` : ''}`);
  return found;
}
