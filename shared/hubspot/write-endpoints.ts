// Every HubSpot path a publish uses, in one table that the client and the
// simulator (hubspot-sim/) both read: batch read and update of the
// five batch types, page and post drafts, push-live, scheduling and
// revisions, HubDB draft rows and publish, one URL redirect, and the CMS
// audit log. CMS v3 paths, as the official client (@hubspot/api-client 13)
// calls them; HubSpot's spec collection (v3 files) lists the same ones, but
// for the audit log, which its newest v3 file lists at /cms/audit-logs/v3
// (docs/testing.md). Leaf file: it imports nothing of the project but a type.

import type { ContentType } from '../content-types.ts';

/** The types HubSpot reads and updates in batches (`POST …/batch/read`, `…/batch/update`). */
export type BatchContentType = Extract<ContentType, 'site_pages' | 'landing_pages' | 'blog_posts' | 'blog_authors' | 'blog_tags'>;
export const BATCH_CONTENT_TYPES: readonly BatchContentType[] = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags'];

/** The types with a draft, push-live, scheduled publishing and revisions. */
export type VersionedContentType = Extract<BatchContentType, 'site_pages' | 'landing_pages' | 'blog_posts'>;
export const VERSIONED_CONTENT_TYPES: readonly VersionedContentType[] = ['site_pages', 'landing_pages', 'blog_posts'];

/**
 * Most inputs in one batch request. The HubDB spec states it for draft rows
 * ("with a maximum of 100 rows per call"); the CMS batch endpoints take the
 * same 100 (HubSpot's batch limit across its v3 APIs).
 */
export const BATCH_LIMIT = 100;

export type WriteEndpointKind =
  | 'batch_read' | 'batch_update'
  | 'draft_read' | 'draft_update' | 'push_live' | 'schedule' | 'revisions' | 'restore'
  | 'hubdb_draft_rows_read' | 'hubdb_draft_rows_update' | 'hubdb_rows_read' | 'hubdb_publish'
  | 'redirect_read' | 'redirect_update'
  | 'audit_logs';

/** One endpoint: its method, path template (`{objectId}`, `{revisionId}`, `{tableIdOrName}`, `{urlRedirectId}`), type and scope. */
export interface WriteEndpoint {
  readonly kind: WriteEndpointKind;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly template: string;
  /** The content type it reads or writes (HubDB: rows or, for publish, tables); null: the audit log. */
  readonly type: ContentType | null;
  /** The OAuth scope the spec's security section names (writes and reads alike). */
  readonly scope: 'content' | 'hubdb';
}

const BASE: Readonly<Record<BatchContentType, string>> = {
  site_pages: '/cms/v3/pages/site-pages',
  landing_pages: '/cms/v3/pages/landing-pages',
  blog_posts: '/cms/v3/blogs/posts',
  blog_authors: '/cms/v3/blogs/authors',
  blog_tags: '/cms/v3/blogs/tags',
};
const TABLE = '/cms/v3/hubdb/tables/{tableIdOrName}';

function endpoint(kind: WriteEndpointKind, method: WriteEndpoint['method'], template: string, type: ContentType | null, scope: WriteEndpoint['scope'] = 'content'): WriteEndpoint {
  return { kind, method, template, type, scope };
}

/** Every endpoint, batch and versioned ones once per type. */
export const WRITE_ENDPOINTS: readonly WriteEndpoint[] = [
  ...BATCH_CONTENT_TYPES.flatMap((t) => [
    endpoint('batch_read', 'POST', `${BASE[t]}/batch/read`, t),
    endpoint('batch_update', 'POST', `${BASE[t]}/batch/update`, t),
  ]),
  ...VERSIONED_CONTENT_TYPES.flatMap((t) => [
    endpoint('draft_read', 'GET', `${BASE[t]}/{objectId}/draft`, t),
    endpoint('draft_update', 'PATCH', `${BASE[t]}/{objectId}/draft`, t),
    endpoint('push_live', 'POST', `${BASE[t]}/{objectId}/draft/push-live`, t),
    endpoint('schedule', 'POST', `${BASE[t]}/schedule`, t),
    endpoint('revisions', 'GET', `${BASE[t]}/{objectId}/revisions`, t),
    endpoint('restore', 'POST', `${BASE[t]}/{objectId}/revisions/{revisionId}/restore`, t),
  ]),
  endpoint('hubdb_draft_rows_read', 'POST', `${TABLE}/rows/draft/batch/read`, 'hubdb_rows', 'hubdb'),
  endpoint('hubdb_draft_rows_update', 'POST', `${TABLE}/rows/draft/batch/update`, 'hubdb_rows', 'hubdb'),
  endpoint('hubdb_rows_read', 'POST', `${TABLE}/rows/batch/read`, 'hubdb_rows', 'hubdb'),
  endpoint('hubdb_publish', 'POST', `${TABLE}/draft/publish`, 'hubdb_tables', 'hubdb'),
  endpoint('redirect_read', 'GET', '/cms/v3/url-redirects/{urlRedirectId}', 'url_redirects'),
  endpoint('redirect_update', 'PATCH', '/cms/v3/url-redirects/{urlRedirectId}', 'url_redirects'),
  endpoint('audit_logs', 'GET', '/cms/v3/audit-logs/', null),
];

/** The endpoint of a kind (for one type where the kind exists per type). */
export function writeEndpoint(kind: WriteEndpointKind, type: ContentType | null = null): WriteEndpoint {
  const found = WRITE_ENDPOINTS.find((e) => e.kind === kind && (type === null || e.type === type));
  if (!found) throw new Error(`no ${kind} endpoint${type ? ` for ${type}` : ''}`);
  return found;
}

/** A template with its parameters filled in (each URI-encoded). */
export function fillPath(template: string, params: Readonly<Record<string, string>> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`missing path parameter ${name} for ${template}`);
    return encodeURIComponent(value);
  });
}

export const batchReadPath = (type: BatchContentType): string => writeEndpoint('batch_read', type).template;
export const batchUpdatePath = (type: BatchContentType): string => writeEndpoint('batch_update', type).template;
export const draftPath = (type: VersionedContentType, objectId: string): string => fillPath(writeEndpoint('draft_update', type).template, { objectId });
export const pushLivePath = (type: VersionedContentType, objectId: string): string => fillPath(writeEndpoint('push_live', type).template, { objectId });
export const schedulePath = (type: VersionedContentType): string => writeEndpoint('schedule', type).template;
export const revisionsPath = (type: VersionedContentType, objectId: string): string => fillPath(writeEndpoint('revisions', type).template, { objectId });
export const restorePath = (type: VersionedContentType, objectId: string, revisionId: string): string =>
  fillPath(writeEndpoint('restore', type).template, { objectId, revisionId });
export const hubdbDraftRowsReadPath = (tableIdOrName: string): string => fillPath(writeEndpoint('hubdb_draft_rows_read').template, { tableIdOrName });
export const hubdbDraftRowsUpdatePath = (tableIdOrName: string): string => fillPath(writeEndpoint('hubdb_draft_rows_update').template, { tableIdOrName });
export const hubdbRowsReadPath = (tableIdOrName: string): string => fillPath(writeEndpoint('hubdb_rows_read').template, { tableIdOrName });
export const hubdbPublishPath = (tableIdOrName: string): string => fillPath(writeEndpoint('hubdb_publish').template, { tableIdOrName });
export const redirectPath = (urlRedirectId: string): string => fillPath(writeEndpoint('redirect_update').template, { urlRedirectId });
export const AUDIT_LOGS_PATH = writeEndpoint('audit_logs').template;

/** A batch read's body (the spec's BatchInputString: the ids themselves, not objects). */
export function batchReadBody(ids: readonly string[]): { inputs: string[] } {
  return { inputs: [...ids] };
}

/**
 * The audit log's `objectType` of each content type's events (PublicAuditLog's
 * enum); a type without one (blog authors and tags: the enum has none) shows no
 * event in HubSpot's audit log. Read it with auditObjectType.
 */
export const AUDIT_OBJECT_TYPE: Readonly<Partial<Record<ContentType, string>>> = {
  site_pages: 'WEBSITE_PAGE',
  landing_pages: 'LANDING_PAGE',
  blog_posts: 'BLOG_POST',
  hubdb_tables: 'HUBDB_TABLE',
  hubdb_rows: 'HUBDB_TABLE',
  url_redirects: 'URL_MAPPING',
};

/** The audit log's `objectType` of a content type's events; null: the audit log shows none. */
export function auditObjectType(type: ContentType): string | null {
  return AUDIT_OBJECT_TYPE[type] ?? null;
}
