// The simulator's list responses against the fields HubSpot's published schemas mark required
// (scripts/hubspot-sim/schema-facts.ts): every item of every list endpoint, over HTTP.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/hubspot/content-types.ts';
import { LIST_PATHS, rowsPath } from '../shared/hubspot/endpoints.ts';
import {
  DATE_FILTERS, envelopeShape, LIST_ENVELOPES, LIST_QUERY, RANDOM_ACCESS_ROWS, SHAPES, type Envelope, type FieldType, type Shape, type ShapeName,
} from '../scripts/hubspot-sim/schema-facts.ts';
import { ALL_SHAPES } from '../scripts/hubspot-sim/schema-facts-writes.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../scripts/hubspot-sim/server.ts';

const TOKEN = 'schema-test-token';
const PORTAL = 777;
let sim: HubSpotSimulator;

/** What a check found: problems (path: what is wrong) and how many objects of each shape it walked. */
interface Report {
  problems: string[];
  visited: Partial<Record<ShapeName, number>>;
}

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// Checks one value against a published type, recording problems under `path`.
function checkValue(value: unknown, type: FieldType, path: string, report: Report): void {
  const fail = (what: string): void => {
    report.problems.push(`${path}: ${what} (got ${JSON.stringify(value)?.slice(0, 60)})`);
  };
  if (typeof type === 'string') {
    switch (type) {
      case 'string': if (typeof value !== 'string') fail('not a string'); return;
      case 'date-time': if (typeof value !== 'string' || !DATE_TIME.test(value) || Number.isNaN(Date.parse(value))) fail('not a date-time string'); return;
      case 'integer': if (!Number.isInteger(value)) fail('not an integer'); return;
      case 'number': if (typeof value !== 'number' || !Number.isFinite(value)) fail('not a number'); return;
      case 'boolean': if (typeof value !== 'boolean') fail('not a boolean'); return;
      case 'object': if (!isObject(value)) fail('not an object'); return;
    }
  }
  if ('enum' in type) {
    if (typeof value !== 'string' || !type.enum.includes(value)) fail(`not one of ${type.enum.slice(0, 5).join(', ')}…`);
  } else if ('arrayOf' in type) {
    if (!Array.isArray(value)) return fail('not an array');
    value.forEach((v, i) => checkValue(v, type.arrayOf, `${path}[${i}]`, report));
  } else if ('mapOf' in type) {
    if (!isObject(value)) return fail('not an object');
    for (const [k, v] of Object.entries(value)) checkValue(v, type.mapOf, `${path}.${k}`, report);
  } else {
    checkShape(value, type.shape, path, report);
  }
}

// Checks an object against a shape: every required field present with its type; optional fields typed when present.
function checkShape(value: unknown, name: ShapeName, path: string, report: Report): void {
  if (!isObject(value)) {
    report.problems.push(`${path}: not an object (expected ${name})`);
    return;
  }
  report.visited[name] = (report.visited[name] ?? 0) + 1;
  const shape: Shape = ALL_SHAPES[name];
  for (const [field, type] of Object.entries(shape.required)) {
    if (!(field in value)) report.problems.push(`${path}.${field}: missing (required by ${name})`);
    else checkValue(value[field], type, `${path}.${field}`, report);
  }
  for (const [field, type] of Object.entries(shape.optional ?? {})) {
    if (field in value) checkValue(value[field], type, `${path}.${field}`, report);
  }
}

function checkEnvelope(body: unknown, envelope: Envelope): Report {
  const report: Report = { problems: [], visited: {} };
  const shape = envelopeShape(envelope);
  if (!isObject(body)) return { problems: ['body: not an object'], visited: {} };
  for (const [field, type] of Object.entries(shape.required)) {
    if (!(field in body)) report.problems.push(`${field}: missing (required by the list envelope)`);
    else checkValue(body[field], type, field, report);
  }
  for (const [field, type] of Object.entries(shape.optional ?? {})) {
    if (field in body) checkValue(body[field], type, field, report);
  }
  return report;
}

function itemReport(item: unknown, name: ShapeName): Report {
  const report: Report = { problems: [], visited: {} };
  checkShape(item, name, 'item', report);
  return report;
}

async function get(pathAndQuery: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${sim.url}${pathAndQuery}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

function merge(into: Report, from: Report): void {
  into.problems.push(...from.problems);
  for (const [k, n] of Object.entries(from.visited) as [ShapeName, number][]) into.visited[k] = (into.visited[k] ?? 0) + n;
}

// Every page of a list endpoint (cursor paging), each checked; returns the merged report and item count.
async function walk(path: string, envelope: Envelope, archived: boolean): Promise<{ report: Report; items: number; total: number; pages: number }> {
  const report: Report = { problems: [], visited: {} };
  let after: string | null = null;
  let items = 0;
  let total = -1;
  let pages = 0;
  do {
    const qs = new URLSearchParams({ limit: '100', archived: String(archived) });
    if (after) qs.set('after', after);
    const body = await get(`${path}?${qs.toString()}`);
    merge(report, checkEnvelope(body, envelope));
    const results = body['results'] as unknown[];
    items += results.length;
    total = body['total'] as number;
    pages++;
    const next = (body['paging'] as { next?: { after?: string } } | undefined)?.next?.after;
    after = typeof next === 'string' && next !== '' ? next : null;
  } while (after);
  return { report, items, total, pages };
}

function listPath(type: Exclude<ContentType, 'hubdb_rows'>): string {
  return LIST_PATHS[type];
}

function tableIds(): string[] {
  return sim.items(PORTAL, 'hubdb_tables').map((t) => t.id);
}

beforeAll(async () => {
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000, daily: 1_000_000_000 } });
  // Default (small) portal sizes: 300 site pages, 1200 posts, 450 HubDB rows over 3 tables, ...
  sim.addPortal({ portalId: PORTAL, token: TOKEN, seed: 31 });
  // Items created and deleted after seeding go through the mutation paths (new items, archive markers).
  for (const type of CONTENT_TYPES) {
    sim.addItems(PORTAL, type, 3);
    if (type !== 'hubdb_tables') sim.deleteItems(PORTAL, type, 2);
    sim.touchItems(PORTAL, type, 2);
  }
});
afterAll(() => sim.close());

describe('list responses carry every field the published schema marks required', () => {
  it.each(CONTENT_TYPES.filter((t): t is Exclude<ContentType, 'hubdb_rows'> => t !== 'hubdb_rows'))(
    '%s: every item and envelope, live and archived',
    async (type) => {
      const envelope = LIST_ENVELOPES[type];
      for (const archived of [false, true]) {
        const { report, items, total, pages } = await walk(listPath(type), envelope, archived);
        expect(report.problems.slice(0, 20)).toEqual([]);
        expect(items).toBe(total);
        expect(report.visited[envelope.item] ?? 0).toBe(items);
        if (!archived) {
          expect(items).toBe(sim.items(PORTAL, type).length);
          expect(items).toBeGreaterThan(0);
          if (items > 100) expect(pages).toBeGreaterThan(1); // the paging object was checked too
        }
      }
    },
  );

  it('hubdb_rows: every row of every table (STREAMING), and a RANDOM_ACCESS page', async () => {
    let rows = 0;
    for (const tableId of tableIds()) {
      const { report, items, total } = await walk(rowsPath(tableId), LIST_ENVELOPES.hubdb_rows, false);
      expect(report.problems.slice(0, 20)).toEqual([]);
      expect(items).toBe(total);
      expect(report.visited.HubDbTableRowV3 ?? 0).toBe(items);
      rows += items;
    }
    expect(rows).toBe(sim.items(PORTAL, 'hubdb_rows').length);
    const body = await get(`${rowsPath(tableIds()[0]!)}?offset=10&limit=25`);
    const report = checkEnvelope(body, RANDOM_ACCESS_ROWS);
    expect(report.problems).toEqual([]);
    expect(report.visited.BoundedNextPage).toBe(1);
    expect(report.visited.HubDbTableRowV3).toBe(25);
  });

  it('walks the nested schemas: layout sections, styles, HubDB columns and options', async () => {
    const pages = await walk(listPath('site_pages'), LIST_ENVELOPES.site_pages, false);
    for (const nested of ['LayoutSection', 'RowMetaData', 'Styles', 'RGBAColor', 'Gradient', 'Angle', 'SideOrCorner', 'BackgroundImage'] as const) {
      expect(pages.report.visited[nested], nested).toBeGreaterThan(0);
    }
    const tables = await walk(listPath('hubdb_tables'), LIST_ENVELOPES.hubdb_tables, false);
    expect(tables.report.visited.Column).toBeGreaterThan(tables.items);
    expect(tables.report.visited.Option).toBeGreaterThan(0);
    expect(tables.report.visited.SimpleUser).toBe(2 * tables.items);
  });
});

describe('the checker fails when the simulator drifts from the facts', () => {
  // First item of each endpoint, as the simulator sends it.
  async function firstItem(type: ContentType): Promise<Record<string, unknown>> {
    const path = type === 'hubdb_rows' ? rowsPath(tableIds()[0]!) : listPath(type);
    const body = await get(`${path}?limit=1`);
    return (body['results'] as Record<string, unknown>[])[0]!;
  }

  it.each(CONTENT_TYPES)('%s: dropping any one required field fails the check', async (type) => {
    const item = await firstItem(type);
    const name = LIST_ENVELOPES[type].item;
    expect(itemReport(item, name).problems).toEqual([]);
    for (const field of Object.keys(SHAPES[name].required)) {
      const { [field]: _dropped, ...rest } = item;
      expect(itemReport(rest, name).problems, field).toEqual([`item.${field}: missing (required by ${name})`]);
    }
  });

  it('a wrong type, a value outside an enum, or a bad nested object fails the check', async () => {
    const tag = await firstItem('blog_tags');
    expect(itemReport({ ...tag, translatedFromId: null }, 'Tag').problems).toEqual(['item.translatedFromId: not an integer (got null)']);
    expect(itemReport({ ...tag, created: 'yesterday' }, 'Tag').problems).toHaveLength(1);
    const page = await firstItem('site_pages');
    expect(itemReport({ ...page, currentState: 'LIVE' }, 'Page').problems).toHaveLength(1);
    expect(itemReport({ ...page, archivedAt: 0 }, 'Page').problems).toHaveLength(1);
    const post = await firstItem('blog_posts');
    expect(itemReport({ ...post, tagIds: ['1'] }, 'BlogPost').problems).toEqual(['item.tagIds[0]: not an integer (got "1")']);
    expect(itemReport({ ...post, layoutSections: { main: { name: 'main' } } }, 'BlogPost').problems.length).toBeGreaterThan(5);
    const table = await firstItem('hubdb_tables');
    const columns = (table['columns'] as Record<string, unknown>[]).map(({ description: _d, ...c }) => c);
    expect(itemReport({ ...table, columns }, 'HubDbTableV3').problems).toHaveLength(columns.length);
    const envelope = checkEnvelope({ total: 1, results: [], paging: { next: { link: 'x' } } }, LIST_ENVELOPES.blog_tags);
    expect(envelope.problems).toEqual(['paging.next.after: missing (required by NextPage)']);
    expect(checkEnvelope({ results: [] }, LIST_ENVELOPES.blog_tags).problems).toEqual(['total: missing (required by the list envelope)']);
  });
});

// The query parameters of each list endpoint (schema-facts.ts LIST_QUERY), as the simulator honours them.
describe('list queries: the filters, sort, archive and projection each endpoint publishes', () => {
  const status = async (pathAndQuery: string) =>
    (await fetch(`${sim.url}${pathAndQuery}`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status;
  const updatedOf = (type: ContentType, item: Record<string, unknown>) =>
    Date.parse(String(item[type === 'hubdb_tables' || type === 'hubdb_rows' ? 'updatedAt' : 'updated']));
  /** Every page of a queried listing (the cursor names the last item read). */
  const all = async (path: string, query: Record<string, string>) => {
    const items: Record<string, unknown>[] = [];
    let after: string | null = null;
    do {
      const qs = new URLSearchParams({ limit: '7', ...query });
      if (after) qs.set('after', after);
      const body = await get(`${path}?${qs.toString()}`);
      items.push(...(body['results'] as Record<string, unknown>[]));
      after = (body['paging'] as { next?: { after?: string } } | undefined)?.next?.after ?? null;
    } while (after);
    return items;
  };

  it.each(CONTENT_TYPES.filter((t): t is Exclude<ContentType, 'hubdb_rows'> => t !== 'hubdb_rows'))(
    '%s: updatedAfter / updatedBefore / updatedAt, sort ascending and descending, archived',
    async (type) => {
      const facts = LIST_QUERY[type];
      expect(facts.dateFilters).toEqual(DATE_FILTERS);
      const live = sim.items(PORTAL, type);
      const times = live.map((i) => Date.parse(i.updatedAt)).sort((a, b) => a - b);
      const cut = times[Math.floor(times.length / 2)]!;
      const sortKey = facts.sortFields?.includes('updatedAt') === false ? 'updated' : 'updatedAt';
      const after = await all(listPath(type), { updatedAfter: new Date(cut).toISOString(), sort: sortKey });
      expect(after.map((i) => updatedOf(type, i))).toEqual(times.filter((t) => t > cut)); // strictly after, oldest first
      const before = await all(listPath(type), { updatedBefore: new Date(cut).toISOString(), sort: `-${sortKey}` });
      expect(before.map((i) => updatedOf(type, i))).toEqual(times.filter((t) => t < cut).reverse());
      const at = await all(listPath(type), { updatedAt: new Date(cut).toISOString() });
      expect(at.length).toBe(times.filter((t) => t === cut).length);
      if (type !== 'hubdb_tables') {
        const archived = await all(listPath(type), { archived: 'true', updatedAfter: new Date(0).toISOString(), sort: sortKey });
        expect(archived.length).toBe(2);
      }
      // A sort field the spec does not name, and a malformed date, are refused.
      expect(await status(`${listPath(type)}?sort=color`)).toBe(400);
      expect(await status(`${listPath(type)}?updatedAfter=yesterday`)).toBe(400);
    },
  );

  it('property (CMS types) keeps only the named fields; properties (HubDB rows) only the named columns; neither elsewhere', async () => {
    const [post] = (await get(`${LIST_PATHS.blog_posts}?limit=1&property=name,updated`))['results'] as Record<string, unknown>[];
    expect(Object.keys(post!).sort()).toEqual(['id', 'name', 'updated']);
    const table = tableIds()[0]!;
    const [row] = (await get(`${rowsPath(table)}?limit=1&properties=name&properties=price`))['results'] as Record<string, unknown>[];
    expect(Object.keys(row!['values'] as object).sort()).toEqual(['name', 'price']);
    expect(LIST_QUERY.hubdb_rows.dateFilters).toEqual([]);
    expect(await status(`${rowsPath(table)}?updatedAfter=2020-01-01T00:00:00Z`)).toBe(400);
    expect(await status(`${LIST_PATHS.url_redirects}?property=routePrefix`)).toBe(400);
    expect(await status(`${rowsPath(table)}?property=name`)).toBe(400);
    // Rows sort by their update time too (the spec takes `sort` without naming fields).
    const rows = await all(rowsPath(table), { sort: '-updatedAt' });
    const times = rows.map((r) => Date.parse(String(r['updatedAt'])));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it('HubDB rows: hs_updated_at__gt (epoch ms) with sort=hs_updated_at lists the rows changed after, oldest first', async () => {
    const table = tableIds()[0]!;
    const rows = await all(rowsPath(table), {});
    const times = rows.map((r) => Date.parse(String(r['updatedAt']))).sort((a, b) => a - b);
    const cut = times[Math.floor(times.length / 2)]!;
    const changed = await all(rowsPath(table), { hs_updated_at__gt: String(cut), sort: 'hs_updated_at' });
    expect(changed.map((r) => Date.parse(String(r['updatedAt'])))).toEqual(times.filter((t) => t > cut));
    const upTo = await all(rowsPath(table), { hs_updated_at__lte: String(cut), sort: '-hs_updated_at' });
    expect(upTo.map((r) => Date.parse(String(r['updatedAt'])))).toEqual(times.filter((t) => t <= cut).reverse());
    expect(LIST_QUERY.hubdb_rows.columnFilters).toBe(true);
    expect(await status(`${rowsPath(table)}?hs_updated_at__gt=soon`)).toBe(400);
    expect(await status(`${LIST_PATHS.blog_posts}?hs_updated_at__gt=0`)).toBe(400);
  });

  it('the cursor names the last item read: an item updated behind it moves to the end and is still listed once', async () => {
    const path = LIST_PATHS.blog_tags;
    const first = (await get(`${path}?limit=5&sort=updatedAt&updatedAfter=1970-01-01T00:00:00Z`)) as { results: { id: string }[]; paging: { next: { after: string } } };
    const [moved] = sim.touchItems(PORTAL, 'blog_tags', [first.results[0]!.id]);
    const seen = [...first.results.map((r) => r.id)];
    let after: string | null = first.paging.next.after;
    while (after) {
      const body = await get(`${path}?limit=5&sort=updatedAt&updatedAfter=1970-01-01T00:00:00Z&after=${after}`);
      seen.push(...(body['results'] as { id: string }[]).map((r) => r.id));
      after = (body['paging'] as { next?: { after?: string } } | undefined)?.next?.after ?? null;
    }
    expect(seen.at(-1)).toBe(moved);
    expect(new Set(seen).size).toBe(sim.items(PORTAL, 'blog_tags').length);
  });
});
