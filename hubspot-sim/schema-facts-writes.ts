// Facts about HubSpot's published CMS write endpoints: request bodies and the
// answers of batch read/update, drafts, schedule, revisions, HubDB draft rows
// and publish, URL redirects and the CMS audit log. Beside schema-facts.ts (the
// list answers), from the same snapshot of HubSpot/HubSpot-public-api-spec-collection
// (2026-08-21), version 2026-03 of each API (the same schemas as v3 but for
// UrlMapping, schema-facts.ts):
//   pages:          PublicApiSpecs/CMS/Pages/Rollouts/59888/2026-03/pages.json
//   blog posts:     PublicApiSpecs/CMS/Posts/Rollouts/635/2026-03/posts.json
//   blog authors:   PublicApiSpecs/CMS/Authors/Rollouts/635/2026-03/authors.json
//   blog tags:      PublicApiSpecs/CMS/Tags/Rollouts/635/2026-03/tags.json
//   HubDB:          PublicApiSpecs/CMS/Hubdb/Rollouts/243927/2026-03/hubdb.json
//   URL redirects:  PublicApiSpecs/CMS/Url Redirects/Rollouts/149916/2026-03/urlRedirects.json
//   audit log:      PublicApiSpecs/CMS/Cms Content Audit/Rollouts/144888/2026-03/cmsContentAudit.json
//                   (and 2025-09/cmsContentAudit.json for the parameter descriptions)
//
// What the specs say, and how the simulator reads them:
// - batch/read takes BatchInputString: `{"inputs": ["<id>", …]}`, the ids as strings (not `{id}`
//   objects); batch/update takes BatchInputJsonNode: `{"inputs": [{…}, …]}`, each a JSON object.
//   Both take `archived` ("whether to return / update deleted …, defaults to false") and answer
//   200 BatchResponse<Item> or 207 BatchResponse<Item>WithErrors (`errors`: StandardError, each
//   with status, category, message, context, errors, links). No maxItems; HubDB's draft rows
//   state "a maximum of 100 rows per call", the limit the simulator applies to every batch.
// - PATCH …/{objectId}/draft takes a Page / BlogPost body and says "You only need to specify
//   the values for the details that you're modifying": a sparse update. The simulator reads
//   batch/update inputs the same way (`id` names the item). The schemas mark no field
//   readOnly; their descriptions call url, currentState and pageRedirected "generated". The
//   simulator ignores those, the stamps HubSpot sets (created, updated, publishedAt,
//   archivedAt, deletedAt, createdById, updatedById, currentlyPublished) and `id`
//   (READ_ONLY_FIELDS), and answers VALIDATION_ERROR for a field the item's schema does not
//   have or a value of the wrong type (its own reading: the specs say nothing of unknown
//   fields). `language` is checked as a string (the simulator knows only part of its enum).
// - POST …/schedule takes ContentScheduleRequestVNext `{id, publishDate}` and answers 204;
//   push-live answers 204; GET …/{objectId}/revisions answers CollectionResponseWithTotal
//   PageVersion / BlogPostVersion (`after`, `before`, `limit`: "Default is 100"); restore
//   answers the Page / BlogPost.
// - HubDB draft rows batch/update takes HubDbTableRowV3BatchUpdateRequest items, which the
//   schema marks as requiring childTableId, displayIndex and values; the single-row PATCH
//   says "Only the columns or fields that needs to be modified can be specified", and the
//   simulator reads the batch the same way (given fields change, `id` names the row;
//   displayIndex is accepted and not kept). Publish answers the HubDbTableV3.
// - PATCH /cms/url-redirects/<version>/{urlRedirectId} takes a UrlMapping (all 13 fields
//   required at 2026-03, 11 at v3); the simulator applies the fields given, as the product
//   sends them (sparse). redirectStyle: "301 (permanent), 302 (temporary), or 305 (proxy)".
// - Audit log: GET /cms/audit-logs/<version>. Query: objectType, objectId, userId,
//   eventType (arrays), after, before, limit, sort. PublicAuditLog's objectType enum has no
//   blog author or tag, so their writes record no event.
// - Security: every write names scope `content` (pages, posts, authors, tags, redirects,
//   audit log) or `hubdb` (HubDB), as shared/hubspot/write-endpoints.ts records.

import type { BatchContentType } from '../shared/hubspot/write-endpoints.ts';
import { SHAPES, type FieldType, type ListShapeName, type Shape, type ShapeName, type WriteShapeName } from './schema-facts.ts';

/** The item schema of each type a write touches. */
export const ITEM_SHAPE = {
  site_pages: 'Page', landing_pages: 'Page', blog_posts: 'BlogPost', blog_authors: 'BlogAuthor', blog_tags: 'Tag',
  url_redirects: 'UrlMapping', hubdb_rows: 'HubDbTableRowV3', hubdb_tables: 'HubDbTableV3',
} as const satisfies Record<string, ListShapeName>;

const CONTENT_STAMPS = ['id', 'created', 'updated', 'createdById', 'updatedById', 'url', 'currentState', 'currentlyPublished', 'archivedAt'] as const;

/** Fields an update names without effect: HubSpot sets them (stamps, generated fields, the id). */
export const READ_ONLY_FIELDS: Readonly<Record<BatchContentType | 'url_redirects' | 'hubdb_rows', readonly string[]>> = {
  site_pages: [...CONTENT_STAMPS, 'pageRedirected'],
  landing_pages: [...CONTENT_STAMPS, 'pageRedirected'],
  blog_posts: [...CONTENT_STAMPS, 'publishedAt'],
  blog_authors: ['id', 'created', 'updated', 'deletedAt'],
  blog_tags: ['id', 'created', 'updated', 'deletedAt'],
  url_redirects: ['id', 'created', 'updated'],
  hubdb_rows: ['id', 'createdAt', 'updatedAt', 'publishedAt'],
};

/** The published type of every field of an item schema (required and optional alike). */
export function fieldTypes(name: ListShapeName): Readonly<Record<string, FieldType>> {
  const shape = SHAPES[name];
  return { ...shape.required, ...shape.optional };
}

const shape = (name: ShapeName): FieldType => ({ shape: name });
const STRINGS: FieldType = { arrayOf: 'string' };
const BATCH_STATUS: FieldType = { enum: ['CANCELED', 'COMPLETE', 'PENDING', 'PROCESSING'] };
const sparse = (item: ListShapeName, withId: boolean): Shape => {
  const { id: _id, ...rest } = fieldTypes(item);
  return { required: withId ? { id: 'string' } : {}, optional: rest };
};
const batchResponse = (item: ListShapeName, withErrors: boolean): Shape => ({
  required: { completedAt: 'date-time', results: { arrayOf: shape(item) }, startedAt: 'date-time', status: BATCH_STATUS },
  optional: {
    links: { mapOf: 'string' }, requestedAt: 'date-time',
    ...(withErrors ? { errors: { arrayOf: shape('StandardError') }, numErrors: 'integer' } : {}),
  },
});
const versions = (version: WriteShapeName): Shape => ({
  required: { results: { arrayOf: shape(version) }, total: 'integer' },
  optional: { paging: shape('Paging') },
});
const version = (item: ListShapeName): Shape => ({
  required: { id: 'string', object: shape(item), updatedAt: 'date-time', user: shape('VersionUser') },
});

/** PublicAuditLog's enums. */
export const AUDIT_EVENTS = ['CREATED', 'DELETED', 'PUBLISHED', 'RESTORE', 'UNPUBLISHED', 'UPDATED'] as const;
export const AUDIT_OBJECT_TYPES = [
  'BLOG', 'BLOG_POST', 'CASE_STUDY', 'CONTENT_SETTINGS', 'CSS', 'CTA', 'DOMAIN', 'EMAIL', 'FILE', 'GLOBAL_MODULE', 'HUBDB_TABLE',
  'JS', 'KNOWLEDGE_BASE', 'KNOWLEDGE_BASE_ARTICLE', 'LANDING_PAGE', 'MODULE', 'PODCAST', 'QUOTE', 'SERVERLESS_FUNCTION',
  'TEMPLATE', 'THEME', 'URL_MAPPING', 'WEB_INTERACTIVE', 'WEBSITE_PAGE',
] as const;

export const WRITE_SHAPES: Readonly<Record<WriteShapeName, Shape>> = {
  // Requests.
  BatchInputString: { required: { inputs: STRINGS } },
  BatchInputJsonNode: { required: { inputs: { arrayOf: 'object' } } },
  // A batch/update input of each type: `id` and any of the item's fields (sparse).
  PageBatchInput: sparse('Page', true),
  BlogPostBatchInput: sparse('BlogPost', true),
  BlogAuthorBatchInput: sparse('BlogAuthor', true),
  TagBatchInput: sparse('Tag', true),
  // A draft PATCH body: any of the item's fields (sparse).
  PageDraftInput: sparse('Page', false),
  BlogPostDraftInput: sparse('BlogPost', false),
  ContentScheduleRequestVNext: { required: { id: 'string', publishDate: 'date-time' } },
  BatchInputHubDbTableRowV3BatchUpdateRequest: { required: { inputs: { arrayOf: shape('HubDbTableRowV3BatchUpdateRequest') } } },
  HubDbTableRowV3BatchUpdateRequest: {
    required: { childTableId: 'integer', displayIndex: 'integer', values: 'object' },
    optional: { id: 'string', name: 'string', path: 'string' },
  },
  // Answers.
  BatchResponsePage: batchResponse('Page', false),
  BatchResponsePageWithErrors: batchResponse('Page', true),
  BatchResponseBlogPost: batchResponse('BlogPost', false),
  BatchResponseBlogPostWithErrors: batchResponse('BlogPost', true),
  BatchResponseBlogAuthor: batchResponse('BlogAuthor', false),
  BatchResponseBlogAuthorWithErrors: batchResponse('BlogAuthor', true),
  BatchResponseTag: batchResponse('Tag', false),
  BatchResponseTagWithErrors: batchResponse('Tag', true),
  BatchResponseHubDbTableRowV3: batchResponse('HubDbTableRowV3', false),
  BatchResponseHubDbTableRowV3WithErrors: batchResponse('HubDbTableRowV3', true),
  StandardError: {
    required: {
      category: 'string', context: { mapOf: STRINGS }, errors: { arrayOf: shape('ErrorDetail') }, links: { mapOf: 'string' },
      message: 'string', status: 'string',
    },
    optional: { id: 'string', subCategory: 'object' },
  },
  ErrorDetail: {
    required: { message: 'string' },
    optional: { code: 'string', context: { mapOf: STRINGS }, in: 'string', subCategory: 'string' },
  },
  // The default error answer (400, 404, …) of every endpoint.
  Error: {
    required: { category: 'string', correlationId: 'string', message: 'string' },
    optional: { context: { mapOf: STRINGS }, errors: { arrayOf: shape('ErrorDetail') }, links: { mapOf: 'string' }, subCategory: 'string' },
  },
  CollectionResponseWithTotalPageVersion: versions('PageVersion'),
  PageVersion: version('Page'),
  CollectionResponseWithTotalBlogPostVersion: versions('VersionBlogPost'),
  VersionBlogPost: version('BlogPost'),
  VersionUser: { required: { email: 'string', fullName: 'string', id: 'string' } },
  CollectionResponsePublicAuditLog: { required: { results: { arrayOf: shape('PublicAuditLog') } }, optional: { paging: shape('Paging') } },
  PublicAuditLog: {
    required: {
      event: { enum: AUDIT_EVENTS }, fullName: 'string', meta: 'object', objectId: 'string', objectName: 'string',
      objectType: { enum: AUDIT_OBJECT_TYPES }, timestamp: 'date-time', userId: 'string',
    },
  },
};

/** Every schema the checker knows: the list answers' and the write side's. */
export const ALL_SHAPES: Readonly<Record<ShapeName, Shape>> = { ...SHAPES, ...WRITE_SHAPES };

/** The batch/update input, draft body and batch answers of each batch type. */
export const BATCH_BODIES: Readonly<Record<BatchContentType, {
  readonly updateInput: WriteShapeName; readonly draftInput: WriteShapeName | null; readonly ok: WriteShapeName; readonly multiStatus: WriteShapeName;
}>> = {
  site_pages: { updateInput: 'PageBatchInput', draftInput: 'PageDraftInput', ok: 'BatchResponsePage', multiStatus: 'BatchResponsePageWithErrors' },
  landing_pages: { updateInput: 'PageBatchInput', draftInput: 'PageDraftInput', ok: 'BatchResponsePage', multiStatus: 'BatchResponsePageWithErrors' },
  blog_posts: { updateInput: 'BlogPostBatchInput', draftInput: 'BlogPostDraftInput', ok: 'BatchResponseBlogPost', multiStatus: 'BatchResponseBlogPostWithErrors' },
  blog_authors: { updateInput: 'BlogAuthorBatchInput', draftInput: null, ok: 'BatchResponseBlogAuthor', multiStatus: 'BatchResponseBlogAuthorWithErrors' },
  blog_tags: { updateInput: 'TagBatchInput', draftInput: null, ok: 'BatchResponseTag', multiStatus: 'BatchResponseTagWithErrors' },
};

/** The revisions answer of pages and posts. */
export const REVISIONS_BODY = {
  site_pages: 'CollectionResponseWithTotalPageVersion',
  landing_pages: 'CollectionResponseWithTotalPageVersion',
  blog_posts: 'CollectionResponseWithTotalBlogPostVersion',
} as const satisfies Record<string, WriteShapeName>;
