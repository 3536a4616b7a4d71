// The simulator's list responses against the fields HubSpot's published schemas mark required
// (hubspot-sim/schema-facts.ts): every item of every list endpoint, over HTTP.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/hubspot/content-types.ts';
import { LIST_PATHS, rowsPath } from '../shared/hubspot/endpoints.ts';
import {
  DATE_FILTERS, envelopeShape, LIST_ENVELOPES, LIST_QUERY, RANDOM_ACCESS_ROWS, SHAPES, type Envelope, type FieldType, type Shape, type ShapeName,
} from '../hubspot-sim/schema-facts.ts';
import { ALL_SHAPES, BATCH_BODIES, ITEM_SHAPE, REVISIONS_BODY } from '../hubspot-sim/schema-facts-writes.ts';
import {
  AUDIT_LOGS_PATH, BATCH_CONTENT_TYPES, batchReadBody, batchReadPath, batchUpdatePath, draftPath, hubdbDraftRowsReadPath, hubdbDraftRowsUpdatePath,
  hubdbPublishPath, hubdbRowsReadPath, pushLivePath, redirectPath, restorePath, revisionsPath, schedulePath, VERSIONED_CONTENT_TYPES,
  type BatchContentType,
} from '../shared/hubspot/write-endpoints.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';

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

// The write side (hubspot-sim/schema-facts-writes.ts): the request bodies a client sends, checked
// against the published request schemas, and the simulator's answers against the response schemas.
describe('write requests and answers carry the published schemas', () => {
  async function send(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${sim.url}${path}`, {
      method, headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }
  /** Problems of a body against a schema, and the shapes walked. */
  function check(body: unknown, name: ShapeName): Report {
    const report: Report = { problems: [], visited: {} };
    checkShape(body, name, 'body', report);
    return report;
  }
  const expectValid = (body: unknown, name: ShapeName): Report => {
    const report = check(body, name);
    expect(report.problems.slice(0, 10), name).toEqual([]);
    return report;
  };
  const ids = (type: ContentType, from: number, n: number) => sim.items(PORTAL, type).slice(from, from + n).map((i) => i.id);
  const editOf = (type: BatchContentType, i: number): Record<string, unknown> =>
    type === 'blog_authors' ? { bio: `bio ${i}`, website: 'https://example.com' } : type === 'blog_tags' ? { name: `tag ${i}` }
      : { htmlTitle: `title ${i}`, metaDescription: 'checked', ...(type === 'blog_posts' ? { tagIds: [1, 2] } : { pageExpiryEnabled: false }) };

  it.each(BATCH_CONTENT_TYPES)('%s: batch read and update, 200 and 207', async (type) => {
    const bodies = BATCH_BODIES[type];
    const item = ITEM_SHAPE[type];
    const [a, b] = ids(type, 5, 2) as [string, string];
    const read = batchReadBody([a, b]);
    expectValid(read, 'BatchInputString');
    const ok = await send('POST', batchReadPath(type), read);
    expect(ok.status).toBe(200);
    expect(expectValid(ok.body, bodies.ok).visited[item]).toBe(2);
    const some = await send('POST', batchReadPath(type), batchReadBody([a, '404']));
    expect(some.status).toBe(207);
    expect(expectValid(some.body, bodies.multiStatus).visited.StandardError).toBe(1);
    const update = { inputs: [{ id: a, ...editOf(type, 1) }, { id: b, ...editOf(type, 2) }] };
    expectValid(update, 'BatchInputJsonNode');
    for (const input of update.inputs) expectValid(input, bodies.updateInput);
    const updated = await send('POST', batchUpdatePath(type), update);
    expect(updated.status).toBe(200);
    expect(expectValid(updated.body, bodies.ok).visited[item]).toBe(2);
    const refused = await send('POST', batchUpdatePath(type), { inputs: [{ id: a, ...editOf(type, 3) }, { id: b, slug: 7 }] });
    expect(refused.status).toBe(207);
    const report = expectValid(refused.body, bodies.multiStatus);
    expect([report.visited[item], report.visited.StandardError, report.visited.ErrorDetail]).toEqual([1, 1, 1]);
  });

  it.each(VERSIONED_CONTENT_TYPES)('%s: draft, schedule, revisions and restore', async (type) => {
    const item = ITEM_SHAPE[type];
    const [id] = ids(type, 9, 1) as [string];
    const draft = { metaDescription: 'draft', useFeaturedImage: true };
    expectValid(draft, BATCH_BODIES[type].draftInput!);
    const patched = await send('PATCH', draftPath(type, id), draft);
    expect(patched.status).toBe(200);
    expectValid(patched.body, item);
    expectValid((await send('GET', draftPath(type, id))).body, item);
    const scheduleBody = { id, publishDate: new Date(Date.now() - 1000).toISOString() };
    expectValid(scheduleBody, 'ContentScheduleRequestVNext');
    expect((await send('POST', schedulePath(type), scheduleBody)).status).toBe(204);
    expect((await send('POST', pushLivePath(type, id))).status).toBe(204);
    const revisions = await send('GET', `${revisionsPath(type, id)}?limit=1`);
    const report = expectValid(revisions.body, REVISIONS_BODY[type]);
    expect([report.visited[item], report.visited.VersionUser, report.visited.NextPage]).toEqual([1, 1, 1]);
    const all = await send('GET', revisionsPath(type, id));
    const first = (all.body['results'] as { id: string }[]).at(-1)!;
    const restored = await send('POST', restorePath(type, id, first.id));
    expect(restored.status).toBe(200);
    expectValid(restored.body, item);
  });

  it('HubDB: draft rows update (the spec\'s full body and a sparse one), reads and publish', async () => {
    const table = tableIds()[0]!;
    const rows = sim.items(PORTAL, 'hubdb_rows').filter((r) => r.tableId === table).slice(0, 2).map((r) => r.id);
    const update = { inputs: [
      { id: rows[0], childTableId: 0, displayIndex: 0, values: { price: 9.99, name: 'Checked' } },
      { id: rows[1], childTableId: 0, displayIndex: 1, path: 'checked-path', values: { active: true } },
    ] };
    const report = expectValid(update, 'BatchInputHubDbTableRowV3BatchUpdateRequest');
    expect(report.visited.HubDbTableRowV3BatchUpdateRequest).toBe(2);
    const answer = await send('POST', hubdbDraftRowsUpdatePath(table), update);
    expect(answer.status).toBe(200);
    expect(expectValid(answer.body, 'BatchResponseHubDbTableRowV3').visited.HubDbTableRowV3).toBe(2);
    // The simulator takes a sparse input as the single-row PATCH does; the published schema asks for more.
    const sparse = { inputs: [{ id: rows[0], values: { price: 1 } }, { id: rows[1], values: { price: 'x' } }] };
    expect(check(sparse, 'BatchInputHubDbTableRowV3BatchUpdateRequest').problems).toHaveLength(4);
    const partial = await send('POST', hubdbDraftRowsUpdatePath(table), sparse);
    expect(partial.status).toBe(207);
    expectValid(partial.body, 'BatchResponseHubDbTableRowV3WithErrors');
    for (const path of [hubdbDraftRowsReadPath(table), hubdbRowsReadPath(table)]) {
      expect(expectValid((await send('POST', path, batchReadBody([...rows, '1']))).body, 'BatchResponseHubDbTableRowV3WithErrors').visited.HubDbTableRowV3).toBe(2);
    }
    const published = await send('POST', hubdbPublishPath(table));
    expect(published.status).toBe(200);
    expectValid(published.body, 'HubDbTableV3');
  });

  it('URL redirect GET and PATCH (a full UrlMapping), the audit log, and the error answers', async () => {
    const [id] = ids('url_redirects', 3, 1) as [string];
    const current = await send('GET', redirectPath(id));
    expectValid(current.body, 'UrlMapping');
    const full = { ...current.body, destination: 'https://example.com/checked' };
    expectValid(full, 'UrlMapping');
    const patched = await send('PATCH', redirectPath(id), full);
    expect(patched.status).toBe(200);
    expectValid(patched.body, 'UrlMapping');
    const log = await send('GET', `${AUDIT_LOGS_PATH}?limit=2`);
    const report = expectValid(log.body, 'CollectionResponsePublicAuditLog');
    expect([report.visited.PublicAuditLog, report.visited.NextPage]).toEqual([2, 1]);
    const invalid = await send('PATCH', redirectPath(id), { redirectStyle: 'permanent' });
    expect(invalid.status).toBe(400);
    expect(expectValid(invalid.body, 'Error').visited.ErrorDetail).toBe(1);
    for (const bad of [await send('POST', batchReadPath('blog_tags'), { inputs: 'x' }), await send('GET', redirectPath('1'))]) {
      expect(bad.status).toBeGreaterThanOrEqual(400);
      expectValid(bad.body, 'Error');
    }
  });

  it('the checker fails on a drifted body: a missing inputs, an input without its id, an error without context', () => {
    expect(check({}, 'BatchInputString').problems).toEqual(['body.inputs: missing (required by BatchInputString)']);
    expect(check({ inputs: [{ id: 1 }] }, 'BatchInputString').problems).toEqual(['body.inputs[0]: not a string (got {"id":1})']);
    expect(check({ htmlTitle: 'x' }, 'PageBatchInput').problems).toEqual(['body.id: missing (required by PageBatchInput)']);
    expect(check({ id: '1', tagIds: ['1'] }, 'BlogPostBatchInput').problems).toEqual(['body.tagIds[0]: not an integer (got "1")']);
    const answer = { status: 'COMPLETE', results: [], startedAt: '2025-01-01T00:00:00Z', completedAt: '2025-01-01T00:00:00Z', errors: [{ status: 'error', category: 'X', message: 'm', errors: [], links: {} }] };
    expect(check(answer, 'BatchResponseTagWithErrors').problems).toEqual(['body.errors[0].context: missing (required by StandardError)']);
    expect(check({ id: '1', publishDate: 'soon' }, 'ContentScheduleRequestVNext').problems).toHaveLength(1);
  });
});
