// Every HubSpot path a publish uses, from the table of every path the
// product calls (api-paths.ts), which the simulator (hubspot-sim/)
// routes from too: batch read and update of the five batch types, page and
// post drafts, push-live, scheduling and revisions, HubDB draft rows and
// publish, one URL redirect, and the CMS audit log; and the helpers that fill
// them in. Leaf file: it imports nothing of the project but the table and a type.

import type { ContentType } from '../content-types.ts';
import { API_ENDPOINTS, fillPath, type ApiEndpoint, type BatchContentType, type VersionedContentType, type WriteEndpointKind } from './api-paths.ts';

export { BATCH_CONTENT_TYPES, fillPath, VERSIONED_CONTENT_TYPES, type BatchContentType, type VersionedContentType, type WriteEndpointKind } from './api-paths.ts';

/**
 * Most inputs in one batch request. The HubDB spec states it for draft rows
 * ("with a maximum of 100 rows per call"); the CMS batch endpoints take the
 * same 100 (HubSpot's batch limit across its CMS APIs).
 */
export const BATCH_LIMIT = 100;

/** One write-side endpoint: its method, path template (`{objectId}`, `{revisionId}`, `{tableIdOrName}`, `{urlRedirectId}`), type and scope. */
export interface WriteEndpoint extends ApiEndpoint {
  readonly kind: WriteEndpointKind;
  /** The OAuth scope the spec's security section names (writes and reads alike). */
  readonly scope: 'content' | 'hubdb';
}

const WRITE_KINDS: ReadonlySet<string> = new Set<WriteEndpointKind>([
  'batch_read', 'batch_update', 'draft_read', 'draft_update', 'push_live', 'schedule', 'revisions', 'restore',
  'hubdb_draft_rows_read', 'hubdb_draft_rows_update', 'hubdb_rows_read', 'hubdb_publish', 'redirect_read', 'redirect_update', 'audit_logs',
]);

/** Whether an endpoint is one of the write side's. */
export function isWriteEndpoint(e: ApiEndpoint): e is WriteEndpoint {
  return WRITE_KINDS.has(e.kind);
}

/** Every write-side endpoint, batch and versioned ones once per type. */
export const WRITE_ENDPOINTS: readonly WriteEndpoint[] = API_ENDPOINTS.filter(isWriteEndpoint);

/** The endpoint of a kind (for one type where the kind exists per type). */
export function writeEndpoint(kind: WriteEndpointKind, type: ContentType | null = null): WriteEndpoint {
  const found = WRITE_ENDPOINTS.find((e) => e.kind === kind && (type === null || e.type === type));
  if (!found) throw new Error(`no ${kind} endpoint${type ? ` for ${type}` : ''}`);
  return found;
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
