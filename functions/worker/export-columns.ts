// The CSV header of an export: our two columns, then the type's fields from
// the content-type registry (shared/content-types.ts). An export pins its
// type's fields in the job's checkpoint when it begins, and Postgres
// (public.export_header/export_rows) reads them from there, so every
// invocation of a resumed export writes the same columns.
import { CONTENT_TYPE_REGISTRY, type ContentType } from '../../shared/content-types.ts';

/** The type's HubSpot fields, in CSV order. */
export function exportColumns(type: ContentType): readonly string[] {
  return CONTENT_TYPE_REGISTRY[type].exportColumns;
}

/** Header row: our two columns, then the type's fields. */
export function exportHeader(type: ContentType): string[] {
  return ['hubspot_id', 'hubspot_updated_at', ...exportColumns(type)];
}
