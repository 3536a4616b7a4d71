// Facts about HubSpot's published CMS list responses: for each list endpoint we
// call, the fields HubSpot's OpenAPI schema marks required, with their types.
//
// Read from the public repository HubSpot/HubSpot-public-api-spec-collection
// (snapshot of 2026-08-21), version 2026-03 of each API (the version
// shared/hubspot/api-paths.ts calls; its schemas are v3's, field for field, but
// for UrlMapping, which marks created and updated required):
//   pages:          PublicApiSpecs/CMS/Pages/Rollouts/59888/2026-03/pages.json (Page, for site and landing pages)
//   blog posts:     PublicApiSpecs/CMS/Posts/Rollouts/635/2026-03/posts.json (BlogPost)
//   blog authors:   PublicApiSpecs/CMS/Authors/Rollouts/635/2026-03/authors.json (BlogAuthor)
//   blog tags:      PublicApiSpecs/CMS/Tags/Rollouts/635/2026-03/tags.json (Tag)
//   HubDB:          PublicApiSpecs/CMS/Hubdb/Rollouts/243927/2026-03/hubdb.json (HubDbTableV3, HubDbTableRowV3)
//   URL redirects:  PublicApiSpecs/CMS/Url Redirects/Rollouts/149916/2026-03/urlRedirects.json (UrlMapping)
// The paths themselves, and what the product relies on in each answer, are checked against
// the same files by tests/hubspot-api-paths.test.ts.
// Only field names and types are recorded here, not the specs themselves.
//
// Notes on the specs:
// - HubDB rows: the list answers one of two envelopes (STREAMING by default, RANDOM_ACCESS when
//   called with `offset`). Their items point at a HubDbTableRowV3Wrapper the file never defines;
//   the row schema it does define (HubDbTableRowV3) is used. Its `values` entries are typed
//   "object" in the schema, yet the spec's own example (and HubSpot) sends strings, numbers and
//   booleans for TEXT/NUMBER/BOOLEAN columns, so the entries are not typed here.
// - `language` is an enum of 891 locale codes in every CMS schema; LANGUAGES lists the codes the
//   simulator may send, each a member of that enum.
// - Paging: every envelope's `paging` is optional; when present, `next.after` (cursor paging) or
//   `next.offset` (HubDB random access) is required.
// Optional fields are recorded only where the simulator sends them and they have required parts
// of their own (HubDB column options, table owners, paging).

import type { ContentType } from '../shared/hubspot/content-types.ts';

/** A published field type. `date-time` is an ISO 8601 string; `object` is any JSON object. */
export type FieldType =
  | 'string' | 'date-time' | 'integer' | 'number' | 'boolean' | 'object'
  | { readonly enum: readonly string[] }
  | { readonly arrayOf: FieldType }
  | { readonly mapOf: FieldType } // object with arbitrary keys, each value of this type
  | { readonly shape: ShapeName };

export interface Shape {
  readonly required: Readonly<Record<string, FieldType>>;
  readonly optional?: Readonly<Record<string, FieldType>>; // checked only when present
}

/** Locale codes the simulator sends (all members of the published 891-value `language` enum). */
export const LANGUAGES = ['en', 'en-us', 'en-gb', 'de', 'fr', 'es', 'pt-br', 'ja', 'nl'] as const;

const language: FieldType = { enum: LANGUAGES };
const AB_STATUS: FieldType = {
  enum: ['automated_loser_variant', 'automated_master', 'automated_variant', 'loser_variant', 'mab_master', 'mab_variant', 'master', 'variant'],
};
const CONTENT_TYPE_CATEGORY: FieldType = { enum: Array.from({ length: 23 }, (_, i) => String(i)) };
const CURRENT_STATE: FieldType = {
  enum: [
    'AGENT_GENERATED', 'AUTOMATED', 'AUTOMATED_AB', 'AUTOMATED_AB_VARIANT', 'AUTOMATED_DRAFT', 'AUTOMATED_DRAFT_AB',
    'AUTOMATED_DRAFT_ABVARIANT', 'AUTOMATED_FOR_FORM', 'AUTOMATED_FOR_FORM_BUFFER', 'AUTOMATED_FOR_FORM_DRAFT',
    'AUTOMATED_FOR_FORM_LEGACY', 'AUTOMATED_LOSER_ABVARIANT', 'AUTOMATED_SENDING', 'BLOG_EMAIL_DRAFT', 'BLOG_EMAIL_PUBLISHED',
    'DRAFT', 'DRAFT_AB', 'DRAFT_AB_VARIANT', 'ERROR', 'LOSER_AB_VARIANT', 'PAGE_STUB', 'PRE_PROCESSING', 'PROCESSING',
    'PUBLISHED', 'PUBLISHED_AB', 'PUBLISHED_AB_VARIANT', 'PUBLISHED_OR_SCHEDULED', 'RSS_TO_EMAIL_DRAFT',
    'RSS_TO_EMAIL_PUBLISHED', 'SCHEDULED', 'SCHEDULED_AB', 'SCHEDULED_OR_PUBLISHED',
  ],
};
const HUBDB_COLUMN_TYPE: FieldType = {
  enum: [
    'BOOLEAN', 'CODE', 'COMPOSITE', 'CTA', 'CURRENCY', 'DATE', 'DATETIME', 'EMBED', 'FILE', 'FOREIGN_ID', 'HUBSPOT_VIDEO',
    'IMAGE', 'JSON', 'LOCATION', 'MULTISELECT', 'NULL', 'NUMBER', 'RICHTEXT', 'SELECT', 'TEXT', 'URL', 'VIDEO',
  ],
};
const VERTICAL: FieldType = { enum: ['BOTTOM', 'MIDDLE', 'TOP'] };
const shape = (name: ShapeName): FieldType => ({ shape: name });

// Fields Page and BlogPost share (both schemas mark every one of their fields required).
const CONTENT_COMMON: Record<string, FieldType> = {
  abStatus: AB_STATUS,
  abTestId: 'string',
  archivedInDashboard: 'boolean',
  attachedStylesheets: { arrayOf: { mapOf: 'object' } },
  authorName: 'string',
  campaign: 'string',
  categoryId: 'integer',
  contentGroupId: 'string',
  contentTypeCategory: CONTENT_TYPE_CATEGORY,
  created: 'date-time',
  createdById: 'string',
  currentState: CURRENT_STATE,
  currentlyPublished: 'boolean',
  domain: 'string',
  dynamicPageDataSourceId: 'string',
  dynamicPageDataSourceType: 'integer',
  dynamicPageHubDbTableId: 'string',
  enableDomainStylesheets: 'boolean',
  enableLayoutStylesheets: 'boolean',
  featuredImage: 'string',
  featuredImageAltText: 'string',
  folderId: 'string',
  footerHtml: 'string',
  headHtml: 'string',
  htmlTitle: 'string',
  id: 'string',
  includeDefaultCustomCss: 'boolean',
  language,
  layoutSections: { mapOf: shape('LayoutSection') },
  linkRelCanonicalUrl: 'string',
  mabExperimentId: 'string',
  metaDescription: 'string',
  name: 'string',
  pageExpiryDate: 'integer',
  pageExpiryEnabled: 'boolean',
  pageExpiryRedirectId: 'integer',
  pageExpiryRedirectUrl: 'string',
  password: 'string',
  publicAccessRules: { arrayOf: 'object' },
  publicAccessRulesEnabled: 'boolean',
  publishDate: 'date-time',
  publishImmediately: 'boolean',
  slug: 'string',
  state: 'string',
  themeSettingsValues: { mapOf: 'object' },
  translatedFromId: 'string',
  translations: { mapOf: shape('ContentLanguageVariation') },
  updated: 'date-time',
  updatedById: 'string',
  url: 'string',
  useFeaturedImage: 'boolean',
  widgetContainers: { mapOf: 'object' },
  widgets: { mapOf: 'object' },
};

/** Every object schema the list responses nest. */
export type ListShapeName =
  | 'Page' | 'BlogPost' | 'LayoutSection' | 'RowMetaData' | 'Styles' | 'RGBAColor' | 'Gradient' | 'Angle' | 'ColorStop'
  | 'SideOrCorner' | 'BackgroundImage' | 'ContentLanguageVariation' | 'BlogAuthor' | 'Tag' | 'HubDbTableV3' | 'Column'
  | 'Option' | 'SimpleUser' | 'HubDbTableRowV3' | 'UrlMapping'
  | 'ForwardPaging' | 'Paging' | 'BoundedPaging' | 'NextPage' | 'PreviousPage' | 'BoundedNextPage';

/** The write side's request and response schemas (schema-facts-writes.ts WRITE_SHAPES). */
export type WriteShapeName =
  | 'BatchInputString' | 'BatchInputJsonNode' | 'PageBatchInput' | 'BlogPostBatchInput' | 'BlogAuthorBatchInput' | 'TagBatchInput'
  | 'PageDraftInput' | 'BlogPostDraftInput' | 'ContentScheduleRequestVNext'
  | 'BatchInputHubDbTableRowV3BatchUpdateRequest' | 'HubDbTableRowV3BatchUpdateRequest'
  | 'BatchResponsePage' | 'BatchResponsePageWithErrors' | 'BatchResponseBlogPost' | 'BatchResponseBlogPostWithErrors'
  | 'BatchResponseBlogAuthor' | 'BatchResponseBlogAuthorWithErrors' | 'BatchResponseTag' | 'BatchResponseTagWithErrors'
  | 'BatchResponseHubDbTableRowV3' | 'BatchResponseHubDbTableRowV3WithErrors' | 'StandardError' | 'ErrorDetail' | 'Error'
  | 'CollectionResponseWithTotalPageVersion' | 'PageVersion' | 'CollectionResponseWithTotalBlogPostVersion' | 'VersionBlogPost'
  | 'VersionUser' | 'CollectionResponsePublicAuditLog' | 'PublicAuditLog';

export type ShapeName = ListShapeName | WriteShapeName;

export const SHAPES: Readonly<Record<ListShapeName, Shape>> = {
  // pages.json: 57 required fields.
  Page: {
    required: {
      ...CONTENT_COMMON,
      archivedAt: 'date-time',
      pageRedirected: 'boolean',
      subcategory: 'string',
      templatePath: 'string',
    },
  },
  // posts.json: 62 required fields (archivedAt is epoch milliseconds here, unlike Page).
  BlogPost: {
    required: {
      ...CONTENT_COMMON,
      archivedAt: 'integer',
      blogAuthorId: 'string',
      enableGoogleAmpOutputOverride: 'boolean',
      postBody: 'string',
      postSummary: 'string',
      publishedAt: 'date-time',
      rssBody: 'string',
      rssSummary: 'string',
      tagIds: { arrayOf: 'integer' },
    },
  },
  LayoutSection: {
    required: {
      cells: { arrayOf: shape('LayoutSection') },
      cssClass: 'string',
      cssId: 'string',
      cssStyle: 'string',
      label: 'string',
      name: 'string',
      params: { mapOf: 'object' },
      rowMetaData: { arrayOf: shape('RowMetaData') },
      rows: { arrayOf: { mapOf: shape('LayoutSection') } },
      styles: shape('Styles'),
      type: 'string',
      w: 'integer',
      x: 'integer',
    },
  },
  RowMetaData: { required: { cssClass: 'string', styles: shape('Styles') } },
  Styles: {
    required: {
      backgroundColor: shape('RGBAColor'),
      backgroundGradient: shape('Gradient'),
      backgroundImage: shape('BackgroundImage'),
      flexboxPositioning: {
        enum: ['BOTTOM_CENTER', 'BOTTOM_LEFT', 'BOTTOM_RIGHT', 'MIDDLE_CENTER', 'MIDDLE_LEFT', 'MIDDLE_RIGHT', 'TOP_CENTER', 'TOP_LEFT', 'TOP_RIGHT'],
      },
      forceFullWidthSection: 'boolean',
      maxWidthSectionCentering: 'integer',
      verticalAlignment: VERTICAL,
    },
  },
  RGBAColor: { required: { a: 'number', b: 'integer', g: 'integer', r: 'integer' } },
  Gradient: { required: { angle: shape('Angle'), colors: { arrayOf: shape('ColorStop') }, sideOrCorner: shape('SideOrCorner') } },
  Angle: { required: { units: { enum: ['DEGREES', 'GRADIANS', 'RADIANS', 'TURNS'] }, value: 'number' } },
  ColorStop: { required: { color: shape('RGBAColor') } },
  SideOrCorner: { required: { horizontalSide: { enum: ['CENTER', 'LEFT', 'RIGHT'] }, verticalSide: VERTICAL } },
  BackgroundImage: { required: { backgroundPosition: 'string', backgroundSize: 'string', imageUrl: 'string' } },
  ContentLanguageVariation: {
    required: {
      archivedInDashboard: 'boolean',
      authorName: 'string',
      campaign: 'string',
      campaignName: 'string',
      created: 'date-time',
      id: 'integer',
      name: 'string',
      password: 'string',
      publicAccessRules: { arrayOf: 'object' },
      publicAccessRulesEnabled: 'boolean',
      publishDate: 'date-time',
      slug: 'string',
      state: 'string',
      updated: 'date-time',
    },
  },
  // authors.json: 17 required fields (translatedFromId is an int64 here, a string on pages/posts).
  BlogAuthor: {
    required: {
      avatar: 'string',
      bio: 'string',
      created: 'date-time',
      deletedAt: 'date-time',
      displayName: 'string',
      email: 'string',
      facebook: 'string',
      fullName: 'string',
      id: 'string',
      language,
      linkedin: 'string',
      name: 'string',
      slug: 'string',
      translatedFromId: 'integer',
      twitter: 'string',
      updated: 'date-time',
      website: 'string',
    },
  },
  // tags.json: 8 required fields.
  Tag: {
    required: {
      created: 'date-time',
      deletedAt: 'date-time',
      id: 'string',
      language,
      name: 'string',
      slug: 'string',
      translatedFromId: 'integer',
      updated: 'date-time',
    },
  },
  // hubdb.json (rollout 243927): 17 of 20 fields required.
  HubDbTableV3: {
    required: {
      allowChildTables: 'boolean',
      allowPublicApiAccess: 'boolean',
      columnCount: 'integer',
      columns: { arrayOf: shape('Column') },
      createdAt: 'date-time',
      deleted: 'boolean',
      deletedAt: 'date-time',
      dynamicMetaTags: { mapOf: 'integer' },
      enableChildTablePages: 'boolean',
      id: 'string',
      label: 'string',
      name: 'string',
      published: 'boolean',
      publishedAt: 'date-time',
      rowCount: 'integer',
      updatedAt: 'date-time',
      useForPages: 'boolean',
    },
    optional: { createdBy: shape('SimpleUser'), updatedBy: shape('SimpleUser'), isOrderedManually: 'boolean' },
  },
  // 6 of 20 column fields required.
  Column: {
    required: { deleted: 'boolean', description: 'string', id: 'string', label: 'string', name: 'string', type: HUBDB_COLUMN_TYPE },
    optional: { options: { arrayOf: shape('Option') }, width: 'integer', optionCount: 'integer' },
  },
  Option: {
    required: { createdAt: 'date-time', id: 'string', label: 'string', name: 'string', order: 'integer', type: 'string', updatedAt: 'date-time' },
  },
  SimpleUser: { required: { email: 'string', firstName: 'string', id: 'string', lastName: 'string' } },
  HubDbTableRowV3: {
    required: {
      childTableId: 'string',
      createdAt: 'date-time',
      id: 'string',
      name: 'string',
      path: 'string',
      publishedAt: 'date-time',
      updatedAt: 'date-time',
      values: 'object',
    },
  },
  // urlRedirects.json 2026-03: all 13 fields required (v3 left created and updated optional).
  UrlMapping: {
    required: {
      created: 'date-time',
      destination: 'string',
      id: 'string',
      isMatchFullUrl: 'boolean',
      isMatchQueryString: 'boolean',
      isOnlyAfterNotFound: 'boolean',
      isPattern: 'boolean',
      isProtocolAgnostic: 'boolean',
      isTrailingSlashOptional: 'boolean',
      precedence: 'integer',
      redirectStyle: 'integer',
      routePrefix: 'string',
      updated: 'date-time',
    },
  },
  // Paging objects of the list envelopes.
  ForwardPaging: { required: {}, optional: { next: shape('NextPage') } },
  Paging: { required: {}, optional: { next: shape('NextPage'), prev: shape('PreviousPage') } },
  BoundedPaging: { required: {}, optional: { next: shape('BoundedNextPage') } },
  NextPage: { required: { after: 'string' }, optional: { link: 'string' } },
  PreviousPage: { required: { before: 'string' }, optional: { link: 'string' } },
  BoundedNextPage: { required: { offset: 'integer' }, optional: { link: 'string' } },
};

/** A list envelope: `total` and `results` required, `paging` optional, plus `type` for HubDB rows. */
export interface Envelope {
  readonly item: ListShapeName;
  readonly paging: ListShapeName;
  readonly type?: 'STREAMING' | 'RANDOM_ACCESS';
}

export function envelopeShape(envelope: Envelope): Shape {
  return {
    required: {
      total: 'integer',
      results: { arrayOf: { shape: envelope.item } },
      ...(envelope.type ? { type: { enum: [envelope.type] } } : {}),
    },
    optional: { paging: { shape: envelope.paging } },
  };
}

/** The envelope of each list endpoint we call (HubDB rows: the default STREAMING answer). */
export const LIST_ENVELOPES: Readonly<Record<ContentType, Envelope>> = {
  site_pages: { item: 'Page', paging: 'ForwardPaging' },
  landing_pages: { item: 'Page', paging: 'ForwardPaging' },
  blog_posts: { item: 'BlogPost', paging: 'ForwardPaging' },
  blog_authors: { item: 'BlogAuthor', paging: 'ForwardPaging' },
  blog_tags: { item: 'Tag', paging: 'ForwardPaging' },
  hubdb_tables: { item: 'HubDbTableV3', paging: 'Paging' },
  hubdb_rows: { item: 'HubDbTableRowV3', paging: 'Paging', type: 'STREAMING' },
  url_redirects: { item: 'UrlMapping', paging: 'ForwardPaging' },
};

/** HubDB rows requested with `offset`. */
export const RANDOM_ACCESS_ROWS: Envelope = { item: 'HubDbTableRowV3', paging: 'BoundedPaging', type: 'RANDOM_ACCESS' };

/**
 * The query parameters each list endpoint's GET takes in the same spec files
 * (besides `after` and `limit`), as the simulator honours them:
 * - dateFilters: `createdAt`/`updatedAt` ("created/last updated at exactly the
 *   specified time"), `createdAfter`/`updatedAfter` ("after", strictly),
 *   `createdBefore`/`updatedBefore` ("before", strictly), each a date-time.
 *   HubDB rows have none.
 * - sortFields: the fields the spec's `sort` description names as valid; null
 *   where the spec takes `sort` without naming fields (the simulator then
 *   accepts the item's own `createdAt`/`updatedAt`/`name`). The spec says
 *   nothing of direction: a leading `-` sorts descending, as HubSpot's CMS
 *   APIs do.
 * - projection: `property` (pages, posts, authors, tags: "which properties ...
 *   to include in the response"; comma-separated names) or `properties` (HubDB
 *   rows: an exploded array of column names, limiting `values`); null: none.
 * - every endpoint takes `archived` ("Specifies whether to return deleted ...
 *   Defaults to `false`": only archived items when true); HubDB rows also take `offset`.
 * - `after`: "The paging cursor token of the last successfully read resource":
 *   the simulator's cursor names that resource (its sort value and id), so an
 *   item that changes while a listing is read is not skipped.
 */
export interface ListQueryFacts {
  readonly dateFilters: readonly DateFilter[];
  readonly sortFields: readonly string[] | null;
  readonly projection: 'property' | 'properties' | null;
  readonly offset: boolean;
  /** HubDB rows: `<column>__<op>` filters (the simulator honours them on ROW_TIME_COLUMNS). */
  readonly columnFilters?: boolean;
}

/**
 * HubDB rows' built-in time columns, as filters (`hs_updated_at__gt=<epoch ms>`)
 * and sort keys (`sort=hs_updated_at`, `-` descending). The spec's rows GET:
 * "Row results can be filtered and sorted ... `column1__gt=5&sort=-column1`";
 * the row's `updatedAt` is its `hs_updated_at` column, as `path` is `hs_path`
 * and `name` is `hs_name` in HubDbTableRowV3.
 */
export const ROW_TIME_COLUMNS = ['hs_created_at', 'hs_updated_at'] as const;

export type DateFilter = 'createdAt' | 'createdAfter' | 'createdBefore' | 'updatedAt' | 'updatedAfter' | 'updatedBefore';
export const DATE_FILTERS: readonly DateFilter[] = ['createdAt', 'createdAfter', 'createdBefore', 'updatedAt', 'updatedAfter', 'updatedBefore'];
const CMS_SORT = ['name', 'createdAt', 'updatedAt', 'createdBy', 'updatedBy'] as const;

export const LIST_QUERY: Readonly<Record<ContentType, ListQueryFacts>> = {
  site_pages: { dateFilters: DATE_FILTERS, sortFields: CMS_SORT, projection: 'property', offset: false },
  landing_pages: { dateFilters: DATE_FILTERS, sortFields: CMS_SORT, projection: 'property', offset: false },
  blog_posts: { dateFilters: DATE_FILTERS, sortFields: CMS_SORT, projection: 'property', offset: false },
  // authors.json names its sort fields without the `At`.
  blog_authors: { dateFilters: DATE_FILTERS, sortFields: ['name', 'created', 'updated', 'createdBy', 'updatedBy'], projection: 'property', offset: false },
  blog_tags: { dateFilters: DATE_FILTERS, sortFields: CMS_SORT, projection: 'property', offset: false },
  hubdb_tables: { dateFilters: DATE_FILTERS, sortFields: null, projection: null, offset: false },
  hubdb_rows: { dateFilters: [], sortFields: ['name', 'createdAt', 'updatedAt', ...ROW_TIME_COLUMNS], projection: 'properties', offset: true, columnFilters: true },
  url_redirects: { dateFilters: DATE_FILTERS, sortFields: null, projection: null, offset: false },
};
