// The content-type registry, TypeScript side: one record per HubSpot CMS
// content type. Page sizes, export columns, OAuth scopes and the HTTP API's
// enum are derived from it; its HubSpot list path sits with every other path in
// shared/hubspot/api-paths.ts. The SQL side is the private.content_types table.
// Adding a type = one row there (a migration), one record here and its list
// path there; see docs/sql-api.md, "Add a content type".

/** What the queue needs to know about one content type. */
export interface ContentTypeRecord {
  /**
   * Largest `limit` we ask for per request. HubSpot documents `limit` as "the
   * maximum number of results to return"; 100 is the largest page size its own
   * examples use for the CMS list endpoints (e.g. `/cms/v3/pages/site-pages?limit=100`);
   * the HubDB docs give 1000 as the default and maximum.
   */
  pageSize: number;
  /** The OAuth scope HubSpot requires to read this type. */
  scope: 'content' | 'hubdb';
  /**
   * The CSV columns after our own `hubspot_id` and `hubspot_updated_at`:
   * HubSpot's field names, in order. An export pins them in its checkpoint
   * when it begins, so every invocation of a resumed export writes the same columns.
   */
  exportColumns: readonly string[];
  /**
   * Incremental sync (docs/sync.md): the `sort` value that lists by update
   * time, oldest first, as the type's spec names it (authors say `updated`);
   * null for HubDB rows, which have no update filter (their tables' updatedAt
   * decides which tables are read again). Absent: the type has no update
   * filter, so an incremental job of it lists everything (deletions wait for
   * the full reconcile).
   */
  updatedSort?: 'updatedAt' | 'updated' | null;
}

const PAGE_COLUMNS = ['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'domain', 'authorName', 'publishDate', 'created', 'updated', 'archivedAt'] as const;

export const CONTENT_TYPE_REGISTRY = {
  site_pages: { pageSize: 100, scope: 'content', exportColumns: PAGE_COLUMNS, updatedSort: 'updatedAt' },
  landing_pages: { pageSize: 100, scope: 'content', exportColumns: PAGE_COLUMNS, updatedSort: 'updatedAt' },
  blog_posts: {
    pageSize: 100, scope: 'content',
    exportColumns: ['name', 'slug', 'url', 'state', 'htmlTitle', 'metaDescription', 'language', 'authorName', 'blogAuthorId', 'contentGroupId', 'tagIds', 'postSummary', 'publishDate', 'created', 'updated'],
    updatedSort: 'updatedAt',
  },
  blog_authors: {
    pageSize: 100, scope: 'content',
    exportColumns: ['fullName', 'displayName', 'email', 'slug', 'bio', 'website', 'language', 'created', 'updated'],
    updatedSort: 'updated',
  },
  blog_tags: { pageSize: 100, scope: 'content', exportColumns: ['name', 'slug', 'language', 'created', 'updated'], updatedSort: 'updatedAt' },
  hubdb_tables: {
    pageSize: 1000, scope: 'hubdb',
    exportColumns: ['name', 'label', 'rowCount', 'columnCount', 'published', 'publishedAt', 'createdAt', 'updatedAt'],
    updatedSort: 'updatedAt',
  },
  hubdb_rows: {
    pageSize: 1000, scope: 'hubdb',
    exportColumns: ['tableId', 'path', 'name', 'values', 'childTableId', 'createdAt', 'updatedAt'],
    updatedSort: null,
  },
  url_redirects: {
    pageSize: 100, scope: 'content',
    exportColumns: ['routePrefix', 'destination', 'redirectStyle', 'isMatchFullUrl', 'isMatchQueryString', 'isPattern', 'precedence', 'created', 'updated'],
    updatedSort: 'updatedAt',
  },
} as const satisfies Readonly<Record<string, ContentTypeRecord>>;

export type ContentType = keyof typeof CONTENT_TYPE_REGISTRY;

/** Every content type, in registry order. */
export const CONTENT_TYPES = Object.keys(CONTENT_TYPE_REGISTRY) as [ContentType, ...ContentType[]];

/** The record of one content type. */
export function contentType(type: ContentType): ContentTypeRecord {
  return CONTENT_TYPE_REGISTRY[type];
}

/** True when the value names a registered content type. */
export function isContentType(value: unknown): value is ContentType {
  return typeof value === 'string' && Object.hasOwn(CONTENT_TYPE_REGISTRY, value);
}

/** The OAuth scopes that reading the given types needs (every type by default), deduplicated. */
export function requiredScopes(types: readonly ContentType[] = CONTENT_TYPES): string[] {
  return [...new Set(types.map((t) => CONTENT_TYPE_REGISTRY[t].scope))];
}

/**
 * What a run does (runs.kind): a fetch or an export, which a user asks for by
 * POST /orchestrator (REQUESTED_RUN_KINDS); or a publish's plan, publish and
 * restore runs (docs/publish.md), which only their own calls create
 * (create_publish_plan, approve_publish_plan, rollback_publish_run).
 */
export const RUN_KINDS = ['fetch', 'export', 'plan', 'publish', 'restore'] as const;
export type RunKind = (typeof RUN_KINDS)[number];
/** The run kinds POST /orchestrator's create_run takes. */
export const REQUESTED_RUN_KINDS = ['fetch', 'export'] as const satisfies readonly RunKind[];
/** What a job does (jobs.kind): a run's kind, or the probe a scheduled cycle starts with (docs/decisions/0046). */
export const JOB_KINDS = [...RUN_KINDS, 'probe'] as const;
export type JobKind = (typeof JOB_KINDS)[number];
