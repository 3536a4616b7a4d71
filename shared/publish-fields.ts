// What a publish may write, TypeScript side: the fields of HubSpot's published
// update request schemas an edit's patch may set, per content type, with their
// JSON type. The SQL side is private.editable_fields, which the database
// enforces on every edit (the content_edits trigger); tests/publish-sql.test.ts
// keeps the two equal. Everything else in an export is read-only, and a type
// without fields here (HubDB tables) is not editable. docs/publish.md.
import type { ContentType } from './content-types.ts';

/** An editable field's JSON type (`string` fields take null too; `object`: a HubDB row's values, sparse by column key). */
export type EditableJsonType = 'string' | 'integer' | 'number' | 'boolean' | 'array_of_integers' | 'object';

const PAGE_FIELDS = { name: 'string', slug: 'string', htmlTitle: 'string', metaDescription: 'string', authorName: 'string' } as const;

/** The editable fields of each editable content type, with their JSON types (a type absent here is read-only). */
export const EDITABLE_FIELDS = {
  site_pages: PAGE_FIELDS,
  landing_pages: PAGE_FIELDS,
  blog_posts: {
    name: 'string', slug: 'string', htmlTitle: 'string', metaDescription: 'string', postSummary: 'string',
    blogAuthorId: 'string', tagIds: 'array_of_integers',
  },
  blog_authors: { fullName: 'string', displayName: 'string', email: 'string', bio: 'string', website: 'string' },
  blog_tags: { name: 'string' },
  hubdb_rows: { path: 'string', name: 'string', values: 'object' },
  url_redirects: {
    routePrefix: 'string', destination: 'string', redirectStyle: 'integer', precedence: 'integer',
    isMatchFullUrl: 'boolean', isMatchQueryString: 'boolean', isPattern: 'boolean',
  },
} as const satisfies Readonly<Partial<Record<ContentType, Readonly<Record<string, EditableJsonType>>>>>;

/** The content types an edit may change. */
export const EDITABLE_CONTENT_TYPES = Object.keys(EDITABLE_FIELDS) as (keyof typeof EDITABLE_FIELDS)[];

/** The editable fields of a type (none for a read-only type). */
export function editableFields(type: ContentType): Readonly<Record<string, EditableJsonType>> {
  return (EDITABLE_FIELDS as Partial<Record<ContentType, Readonly<Record<string, EditableJsonType>>>>)[type] ?? {};
}

/** Whether `field` is an editable field of `type`. */
export function isEditableField(type: ContentType, field: string): boolean {
  return Object.hasOwn(editableFields(type), field);
}
