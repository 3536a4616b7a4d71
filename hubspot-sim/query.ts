// The list endpoints' filters, sort and projection (schema-facts.ts LIST_QUERY),
// and the cursor that names the last resource read under a sort.

import type { ContentType } from '../shared/hubspot/content-types.ts';
import type { SimItem } from './collection.ts';
import { DATE_FILTERS, LIST_QUERY, ROW_TIME_COLUMNS, type DateFilter } from './schema-facts.ts';

export interface ListQuery {
  filters: { field: 'created' | 'updated'; op: 'eq' | 'gt' | 'gte' | 'lt' | 'lte'; ms: number }[];
  sort: { key: string; desc: boolean } | null;
  /** Top-level fields to keep (`property`), or row columns (`properties`); null: everything. */
  projection: string[] | null;
}

/** True when the request asks for anything beyond plain paging (the fast id-ordered path answers the rest). */
export function isQueried(query: URLSearchParams): boolean {
  return DATE_FILTERS.some((f) => query.has(f)) || ROW_DATE_FILTERS.some((f) => query.has(f))
    || query.has('sort') || query.has('property') || query.has('properties');
}

/** Row column filters on the built-in time columns (`<column>__<op>`, HubDB rows only). */
const ROW_DATE_FILTERS = ROW_TIME_COLUMNS.flatMap((c) => (['eq', 'gt', 'gte', 'lt', 'lte'] as const).map((op) => `${c}__${op}`));

// A HubDB time filter's value: epoch milliseconds (HubDB's date-time values), or an ISO date-time.
function rowTimeMs(value: string): number {
  return /^\d+$/.test(value) ? Number(value) : Date.parse(value);
}

/** The request's filters, sort and projection, or a message for a 400. */
export function parseListQuery(type: ContentType, query: URLSearchParams): ListQuery | string {
  const facts = LIST_QUERY[type];
  const filters: ListQuery['filters'] = [];
  for (const name of DATE_FILTERS) {
    const value = query.get(name);
    if (value === null) continue;
    if (!facts.dateFilters.includes(name)) return `Unknown parameter: ${name}`;
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) return `Invalid date-time for ${name}: ${value}`;
    filters.push({ field: name.startsWith('created') ? 'created' : 'updated', op: opOf(name), ms });
  }
  for (const name of ROW_DATE_FILTERS) {
    const value = query.get(name);
    if (value === null) continue;
    if (!facts.columnFilters) return `Unknown parameter: ${name}`;
    const ms = rowTimeMs(value);
    if (Number.isNaN(ms)) return `Invalid value for ${name}: ${value}`;
    const [column, op] = name.split('__') as [string, 'eq' | 'gt' | 'gte' | 'lt' | 'lte'];
    filters.push({ field: column === 'hs_created_at' ? 'created' : 'updated', op, ms });
  }
  let sort: ListQuery['sort'] = null;
  const sorts = query.getAll('sort');
  if (sorts.length > 1) return 'Sort by one field at a time';
  if (sorts.length === 1) {
    const raw = sorts[0]!;
    const desc = raw.startsWith('-');
    const key = desc ? raw.slice(1) : raw;
    const valid = facts.sortFields ?? ['name', 'createdAt', 'updatedAt'];
    if (!valid.includes(key)) return `Invalid sort field: ${raw}`;
    sort = { key, desc };
  }
  let projection: string[] | null = null;
  if (query.has('property') || query.has('properties')) {
    const param = query.has('property') ? 'property' : 'properties';
    if (facts.projection !== param) return `Unknown parameter: ${param}`;
    projection = query.getAll(param).flatMap((v) => v.split(',')).map((s) => s.trim()).filter((s) => s !== '');
  }
  return { filters, sort, projection };
}

function opOf(name: DateFilter): 'eq' | 'gt' | 'lt' {
  return name.endsWith('After') ? 'gt' : name.endsWith('Before') ? 'lt' : 'eq';
}

// The body field behind a filter or sort key (CMS types say created/updated, HubDB createdAt/updatedAt).
function bodyField(type: ContentType, key: string): string {
  const hubdb = type === 'hubdb_tables' || type === 'hubdb_rows';
  if (key === 'created' || key === 'createdAt' || key === 'hs_created_at') return hubdb ? 'createdAt' : 'created';
  if (key === 'updated' || key === 'updatedAt' || key === 'hs_updated_at') return hubdb ? 'updatedAt' : 'updated';
  if (key === 'createdBy') return 'createdById';
  if (key === 'updatedBy') return 'updatedById';
  return key;
}

function dateOf(item: SimItem, type: ContentType, field: 'created' | 'updated'): number {
  const v = item.body[bodyField(type, field)];
  return typeof v === 'string' ? Date.parse(v) : Number.NaN;
}

type SortValue = number | string;

function sortValue(item: SimItem, type: ContentType, key: string): SortValue {
  const field = bodyField(type, key);
  const v = item.body[field];
  if (field === 'created' || field === 'updated' || field === 'createdAt' || field === 'updatedAt') {
    return typeof v === 'string' ? Date.parse(v) : 0;
  }
  return v === undefined || v === null ? '' : String(v);
}

function compare(a: SortValue, b: SortValue): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Cursor naming the last resource read: its sort value and id. */
export function encodeSortedCursor(value: SortValue, id: number): string {
  return Buffer.from(`simq:${JSON.stringify([value, id])}`).toString('base64url');
}

export function decodeSortedCursor(after: string): { value: SortValue; id: number } | null {
  const text = Buffer.from(after, 'base64url').toString('utf8');
  if (!text.startsWith('simq:')) return null;
  try {
    const [value, id] = JSON.parse(text.slice(5)) as [unknown, unknown];
    if ((typeof value === 'number' || typeof value === 'string') && typeof id === 'number') return { value, id };
  } catch {
    // fall through
  }
  return null;
}

/**
 * One page of `items` (already limited to the archived flag asked for) under
 * the query: filtered, sorted (by the key, then id, both in the sort's
 * direction; id order without a sort), and continued strictly after the
 * cursor's resource. `total` counts every match.
 */
export function queriedPage(
  items: readonly SimItem[], type: ContentType, q: ListQuery, after: { value: SortValue; id: number } | null, limit: number,
): { results: SimItem[]; total: number; next: string | null } {
  const matching = items.filter((item) => q.filters.every((f) => {
    const ms = dateOf(item, type, f.field);
    return f.op === 'eq' ? ms === f.ms : f.op === 'gt' ? ms > f.ms : f.op === 'gte' ? ms >= f.ms : f.op === 'lt' ? ms < f.ms : ms <= f.ms;
  }));
  const key = q.sort?.key ?? 'id';
  const dir = q.sort?.desc ? -1 : 1;
  const valueOf = (item: SimItem): SortValue => (key === 'id' ? item.id : sortValue(item, type, key));
  const keyed = matching.map((item) => ({ item, value: valueOf(item) }));
  keyed.sort((a, b) => dir * (compare(a.value, b.value) || a.item.id - b.item.id));
  let start = 0;
  if (after) {
    start = keyed.findIndex((k) => dir * (compare(k.value, after.value) || k.item.id - after.id) > 0);
    if (start < 0) start = keyed.length;
  }
  const slice = keyed.slice(start, start + limit);
  const last = slice[slice.length - 1];
  const more = start + slice.length < keyed.length;
  return { results: slice.map((k) => k.item), total: matching.length, next: more && last ? encodeSortedCursor(last.value, last.item.id) : null };
}

/** The item as the projection shows it: `property` keeps the named top-level fields (and id); `properties` the named row values. */
export function project(type: ContentType, body: Record<string, unknown>, projection: string[] | null): Record<string, unknown> {
  if (projection === null) return body;
  if (type === 'hubdb_rows') {
    const values = (body['values'] ?? {}) as Record<string, unknown>;
    return { ...body, values: Object.fromEntries(Object.entries(values).filter(([k]) => projection.includes(k))) };
  }
  return Object.fromEntries(Object.entries(body).filter(([k]) => k === 'id' || projection.includes(k)));
}
