// The simulator's write side over loopback HTTP: batch read and update (200 and
// 207), sparse updates and HubSpot's clock, validation errors, revisions and
// restore, drafts, push-live and scheduled publishing, HubDB draft rows and
// publish, a redirect's PATCH, the audit log, the test hooks (edits in HubSpot,
// an edit landing between a read and the next write, write counts), scopes and
// 429s. Paths from the shared table (shared/hubspot/write-endpoints.ts).

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AUDIT_LOGS_PATH, BATCH_CONTENT_TYPES, BATCH_LIMIT, batchReadBody, batchReadPath, batchUpdatePath, draftPath, hubdbDraftRowsReadPath,
  hubdbDraftRowsUpdatePath, hubdbPublishPath, hubdbRowsReadPath, pushLivePath, redirectPath, restorePath, revisionsPath, schedulePath,
  type BatchContentType,
} from '../shared/hubspot/write-endpoints.ts';
import type { ContentType } from '../shared/hubspot/content-types.ts';
import { integrationUser, personUser, startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const TOKEN = 'writes-test-token';
const CONTENT_ONLY = 'writes-content-only';
const PORTAL = 515;
let sim: HubSpotSimulator;

type Json = Record<string, any>;

beforeAll(async () => {
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000 } });
  sim.addPortal({
    portalId: PORTAL, token: TOKEN, seed: 3, hubdbTables: 2,
    sizes: { site_pages: 40, landing_pages: 20, blog_posts: 40, blog_authors: 20, blog_tags: 20, hubdb_rows: 40, url_redirects: 20 },
  });
  sim.addPortal({ portalId: 516, token: CONTENT_ONLY, scopes: ['content'], sizes: { blog_posts: 3, hubdb_rows: 3 } });
});
afterAll(() => sim.close());
afterEach(() => sim.clearFaults());

async function call(method: string, path: string, body?: unknown, token = TOKEN, simulator = sim): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${simulator.url}${path}`, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

// Fresh items per test: each call hands out ids no other test has used.
const used = new Map<ContentType, number>();
function fresh(type: ContentType, n = 1): string[] {
  const start = used.get(type) ?? 0;
  used.set(type, start + n);
  const ids = sim.items(PORTAL, type).slice(start, start + n).map((i) => i.id);
  expect(ids).toHaveLength(n);
  return ids;
}
const updatedKey = (type: ContentType) => (type === 'hubdb_rows' || type === 'hubdb_tables' ? 'updatedAt' : 'updated');
const textField = (type: BatchContentType) => (type === 'blog_authors' ? 'bio' : type === 'blog_tags' ? 'name' : 'htmlTitle');
const readOne = async (type: BatchContentType, id: string): Promise<Json> =>
  (await call('POST', batchReadPath(type), batchReadBody([id]))).body['results'][0];

describe('batch read', () => {
  it.each(BATCH_CONTENT_TYPES)('%s: 200 with every item; 207 with an OBJECT_NOT_FOUND error per unknown id', async (type) => {
    const ids = fresh(type, 3);
    const ok = await call('POST', batchReadPath(type), batchReadBody(ids));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: 'COMPLETE', startedAt: expect.any(String), completedAt: expect.any(String) });
    expect(ok.body['results'].map((r: Json) => r['id'])).toEqual(ids);
    expect(ok.body['errors']).toBeUndefined();
    const partial = await call('POST', batchReadPath(type), batchReadBody([ids[0]!, '123', 'nope']));
    expect(partial.status).toBe(207);
    expect(partial.body['results'].map((r: Json) => r['id'])).toEqual([ids[0]]);
    expect(partial.body['numErrors']).toBe(2);
    expect(partial.body['errors']).toEqual(['123', 'nope'].map((id) => ({
      status: 'error', category: 'OBJECT_NOT_FOUND', message: `Object not found: ${id}`, context: { ids: [id] }, errors: [], links: {},
    })));
  });

  it('reads the archive with archived=true; refuses {id} objects, a missing inputs and more than 100 inputs', async () => {
    const [gone] = sim.deleteItems(PORTAL, 'blog_tags', fresh('blog_tags'));
    expect((await call('POST', batchReadPath('blog_tags'), batchReadBody([gone!]))).status).toBe(207);
    const archived = await call('POST', `${batchReadPath('blog_tags')}?archived=true`, batchReadBody([gone!]));
    expect([archived.status, archived.body['results'][0]['id']]).toEqual([200, gone]);
    const objects = await call('POST', batchReadPath('blog_tags'), { inputs: [{ id: gone }] });
    expect(objects.status).toBe(400);
    expect(objects.body).toMatchObject({ category: 'VALIDATION_ERROR', message: expect.stringContaining('java.lang.String') });
    expect((await call('POST', batchReadPath('blog_tags'), {})).status).toBe(400);
    const malformed = await fetch(`${sim.url}${batchReadPath('blog_tags')}`, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` }, body: '{"inputs": [' });
    expect([malformed.status, (await malformed.json())['message']]).toEqual([400, expect.stringMatching(/^Invalid input JSON: /)]);
    const tooMany = await call('POST', batchReadPath('blog_tags'), batchReadBody(Array.from({ length: BATCH_LIMIT + 1 }, (_, i) => String(i))));
    expect([tooMany.status, tooMany.body['message']]).toEqual([400, `Batch size of ${BATCH_LIMIT + 1} exceeds the limit of ${BATCH_LIMIT} inputs`]);
  });
});

describe('batch update', () => {
  it.each(BATCH_CONTENT_TYPES)('%s: a sparse update (other fields kept), each input its own strictly later update time', async (type) => {
    const ids = fresh(type, 3);
    const before = await Promise.all(ids.map((id) => readOne(type, id)));
    const field = textField(type);
    const answer = await call('POST', batchUpdatePath(type), { inputs: ids.map((id, i) => ({ id, [field]: `edited ${i}` })) });
    expect(answer.status).toBe(200);
    const times: number[] = [];
    for (const [i, result] of (answer.body['results'] as Json[]).entries()) {
      const { [field]: value, updated, updatedById: _by, ...rest } = result;
      const { [field]: _old, updated: oldUpdated, updatedById: _oldBy, ...oldRest } = before[i]!;
      expect(value).toBe(`edited ${i}`);
      expect(rest).toEqual(oldRest);
      expect(Date.parse(updated)).toBeGreaterThan(Date.parse(oldUpdated));
      times.push(Date.parse(updated));
      expect(await readOne(type, ids[i]!)).toEqual(result); // what the next read sees
    }
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(new Set(times).size).toBe(times.length);
    // A second write of the same item: later still.
    const again = await call('POST', batchUpdatePath(type), { inputs: [{ id: ids[0], [field]: 'again' }] });
    expect(Date.parse(again.body['results'][0]['updated'])).toBeGreaterThan(Math.max(...times));
  });

  it('207: an unknown id, an unknown field and a wrong type fail their input alone, with messages naming the field', async () => {
    const [a, b, c] = fresh('site_pages', 3);
    const before = await readOne('site_pages', b!);
    const answer = await call('POST', batchUpdatePath('site_pages'), {
      inputs: [{ id: a, htmlTitle: 'ok' }, { id: b, useFeaturedImage: 'yes' }, { id: c, colour: 'red' }, { id: '77', name: 'x' }, { htmlTitle: 'no id' }],
    });
    expect(answer.status).toBe(207);
    expect(answer.body['results'].map((r: Json) => r['id'])).toEqual([a]);
    const errors = answer.body['errors'] as Json[];
    expect(errors.map((e) => [e['category'], e['context']])).toEqual([
      ['VALIDATION_ERROR', { ids: [b], properties: ['useFeaturedImage'] }],
      ['VALIDATION_ERROR', { ids: [c], properties: ['colour'] }],
      ['OBJECT_NOT_FOUND', { ids: ['77'] }],
      ['VALIDATION_ERROR', { ids: [''], properties: ['id'] }],
    ]);
    expect(errors[0]!['message']).toBe('Cannot deserialize value of type `java.lang.Boolean` from String "yes" (through reference chain: Page["useFeaturedImage"])');
    expect(errors[0]!['errors']).toEqual([{ message: errors[0]!['message'], in: 'useFeaturedImage', code: 'INVALID_TYPE' }]);
    expect(errors[1]!['message']).toBe('Unrecognized field "colour" (class Page), not marked as ignorable');
    expect(await readOne('site_pages', b!)).toEqual(before); // a refused input changes nothing
    // Types of the published schema: an int64 list, a date-time, an enum.
    const [post] = fresh('blog_posts');
    const typed = await call('POST', batchUpdatePath('blog_posts'), { inputs: [
      { id: post, tagIds: ['1'] }, { id: post + '0', publishDate: 'tomorrow' },
    ] });
    expect(typed.body['errors'].map((e: Json) => e['context']['properties'] ?? e['context'])).toEqual([['tagIds'], { ids: [post + '0'] }]);
    const enumBad = await call('POST', batchUpdatePath('blog_posts'), { inputs: [{ id: post, abStatus: 'winner' }, { id: fresh('blog_posts')[0], publishDate: 'tomorrow' }] });
    expect(enumBad.body['errors'].map((e: Json) => e['context']['properties'])).toEqual([['abStatus'], ['publishDate']]);
  });

  it('ignores the fields HubSpot sets (id, created, updated, url…); a new slug moves the url; refuses an id twice', async () => {
    const [id] = fresh('landing_pages');
    const before = await readOne('landing_pages', id!);
    const answer = await call('POST', batchUpdatePath('landing_pages'), { inputs: [{
      id, created: '2001-01-01T00:00:00Z', updated: '2001-01-01T00:00:00Z', url: 'https://elsewhere.example.com/x', currentState: 'DRAFT', slug: 'new-slug',
    }] });
    expect(answer.status).toBe(200);
    const after = answer.body['results'][0];
    expect([after['id'], after['created'], after['currentState']]).toEqual([before['id'], before['created'], before['currentState']]);
    expect(Date.parse(after['updated'])).toBeGreaterThan(Date.parse(before['updated']));
    expect(after['url']).toBe(String(before['url']).replace(String(before['slug']), 'new-slug'));
    const twice = await call('POST', batchUpdatePath('landing_pages'), { inputs: [{ id, name: 'a' }, { id, name: 'b' }] });
    expect([twice.status, twice.body['message']]).toEqual([400, `Duplicate IDs found in batch input: [${id}]. IDs must be unique`]);
  });
});

describe('revisions, drafts and scheduled publishing', () => {
  it('every write keeps a revision (newest first, paged); restore brings one back as a new write', async () => {
    const [id] = fresh('blog_posts');
    const original = await readOne('blog_posts', id!);
    await call('POST', batchUpdatePath('blog_posts'), { inputs: [{ id, htmlTitle: 'first' }] });
    const afterPerson = sim.editInHubSpot(PORTAL, 'blog_posts', id!, { htmlTitle: 'person' });
    const list = await call('GET', revisionsPath('blog_posts', id!));
    expect(list.status).toBe(200);
    expect(list.body['total']).toBe(3);
    const revisions = list.body['results'] as Json[];
    expect(revisions.map((r) => r['object']['htmlTitle'])).toEqual(['person', 'first', original['htmlTitle']]);
    expect(revisions.map((r) => r['user']['id'])).toEqual([personUser(PORTAL).id, integrationUser(PORTAL).id, personUser(PORTAL).id]);
    expect(revisions[0]!['updatedAt']).toBe(afterPerson);
    expect(revisions[2]!['updatedAt']).toBe(original['updated']);
    // Paged: one at a time, forward and back.
    const first = await call('GET', `${revisionsPath('blog_posts', id!)}?limit=1`);
    const second = await call('GET', `${revisionsPath('blog_posts', id!)}?limit=1&after=${first.body['paging']['next']['after']}`);
    expect(second.body['results'][0]['id']).toBe(revisions[1]!['id']);
    const back = await call('GET', `${revisionsPath('blog_posts', id!)}?limit=1&before=${second.body['paging']['prev']['before']}`);
    expect(back.body['results'][0]['id']).toBe(revisions[0]!['id']);
    // Restore the original.
    const restored = await call('POST', restorePath('blog_posts', id!, revisions[2]!['id']));
    expect(restored.status).toBe(200);
    expect(restored.body['htmlTitle']).toBe(original['htmlTitle']);
    expect(Date.parse(restored.body['updated'])).toBeGreaterThan(Date.parse(afterPerson));
    expect(await readOne('blog_posts', id!)).toEqual(restored.body);
    expect((await call('GET', revisionsPath('blog_posts', id!))).body['total']).toBe(4);
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id).map((e) => e.event)).toEqual(['UPDATED', 'UPDATED', 'RESTORE']);
    expect((await call('POST', restorePath('blog_posts', id!, '42'))).status).toBe(404);
  });

  it('a draft edit leaves the live item alone until push-live publishes it', async () => {
    const [id] = fresh('site_pages');
    const live = await readOne('site_pages', id!);
    expect((await call('GET', draftPath('site_pages', id!))).body).toEqual(live);
    const draft = await call('PATCH', draftPath('site_pages', id!), { metaDescription: 'draft only' });
    expect(draft.status).toBe(200);
    expect(draft.body['metaDescription']).toBe('draft only');
    expect(Date.parse(draft.body['updated'])).toBeGreaterThan(Date.parse(live['updated']));
    expect(await readOne('site_pages', id!)).toEqual(live);
    expect((await call('PATCH', draftPath('site_pages', id!), { metaDescription: 5 })).body).toMatchObject({ category: 'VALIDATION_ERROR', errors: [{ in: 'metaDescription' }] });
    const pushed = await call('POST', pushLivePath('site_pages', id!));
    expect(pushed.status).toBe(204);
    const now = await readOne('site_pages', id!);
    expect(now['metaDescription']).toBe('draft only');
    expect(now['state']).toBe('PUBLISHED');
    expect(Date.parse(now['updated'])).toBeGreaterThan(Date.parse(draft.body['updated']));
    expect(sim.revisions(PORTAL, 'site_pages', id!).at(-1)!.updatedAt).toBe(now['updated']);
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id).map((e) => [e.event, e.timestamp])).toEqual([
      ['UPDATED', draft.body['updated']], ['PUBLISHED', now['updated']],
    ]);
    expect((await call('GET', draftPath('site_pages', id!))).body).toEqual(now);
  });

  it('schedule: the draft goes live at publishDate by HubSpot\'s clock, stamped then (no timer: at the next request after it)', async () => {
    const [id] = fresh('blog_posts');
    const live = await readOne('blog_posts', id!);
    await call('PATCH', draftPath('blog_posts', id!), { postSummary: 'scheduled' });
    const at = new Date(Date.now() + 3_600_000).toISOString();
    expect((await call('POST', schedulePath('blog_posts'), { id, publishDate: at })).status).toBe(204);
    expect((await call('GET', draftPath('blog_posts', id!))).body).toMatchObject({ state: 'SCHEDULED', publishDate: at, postSummary: 'scheduled' });
    expect(await readOne('blog_posts', id!)).toEqual(live);
    sim.advanceContentClock(3_601);
    const published = await readOne('blog_posts', id!);
    expect(published).toMatchObject({ postSummary: 'scheduled', state: 'PUBLISHED', publishDate: at, updated: at, publishedAt: at });
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id).map((e) => e.event)).toEqual(['UPDATED', 'UPDATED', 'PUBLISHED']);
    const refused = await call('POST', schedulePath('blog_posts'), { id, publishDate: 'soon' });
    expect(refused.body).toMatchObject({ category: 'VALIDATION_ERROR', context: { properties: ['publishDate'] } });
    expect((await call('POST', schedulePath('blog_posts'), { id: '1', publishDate: at })).status).toBe(404);
  });
});

describe('HubDB draft rows and publish', () => {
  it('a draft row changes only in the draft; publish moves rows, their updatedAt and the table\'s together', async () => {
    const table = sim.items(PORTAL, 'hubdb_tables')[1]!;
    const rows = sim.items(PORTAL, 'hubdb_rows').filter((r) => r.tableId === table.id).slice(0, 3).map((r) => r.id);
    const published = await call('POST', hubdbRowsReadPath(table.id), batchReadBody(rows));
    expect(published.status).toBe(200);
    const update = await call('POST', hubdbDraftRowsUpdatePath(table.id), { inputs: [
      { id: rows[0], values: { price: 12.5 } },
      { id: rows[1], name: 'Renamed', values: { category: { name: 'Beta, "Gamma"' }, active: null } },
      { id: rows[2], values: { price: 'free' } },
    ] });
    expect(update.status).toBe(207);
    expect(update.body['errors'][0]).toMatchObject({ category: 'VALIDATION_ERROR', context: { ids: [rows[2]], properties: ['values.price'] } });
    const [draft0, draft1] = update.body['results'] as Json[];
    expect(draft0!['values']).toEqual({ ...published.body['results'][0]['values'], price: 12.5 });
    expect(draft1!['values']['category']).toMatchObject({ id: '2', name: 'Beta, "Gamma"', type: 'option' });
    expect(draft1!['values']).not.toHaveProperty('active');
    expect(draft1!['name']).toBe('Renamed');
    // Published rows and the table: unchanged until publish.
    expect((await call('POST', hubdbRowsReadPath(table.id), batchReadBody(rows))).body).toMatchObject({ results: published.body['results'] });
    // The table by its name.
    expect((await call('POST', hubdbDraftRowsReadPath(`table_${table.id}`), batchReadBody(rows.slice(0, 2)))).body['results']).toEqual([draft0, draft1]);
    expect(sim.items(PORTAL, 'hubdb_tables')[1]!.updatedAt).toBe(table.updatedAt);
    const answer = await call('POST', hubdbPublishPath(table.id));
    expect(answer.status).toBe(200);
    const stamp = answer.body['updatedAt'];
    expect(answer.body).toMatchObject({ id: table.id, publishedAt: stamp, rowCount: expect.any(Number) });
    expect(Date.parse(stamp)).toBeGreaterThan(Date.parse(draft1!['updatedAt']));
    const after = (await call('POST', hubdbRowsReadPath(table.id), batchReadBody(rows))).body['results'] as Json[];
    expect(after.map((r) => [r['updatedAt'], r['publishedAt']])).toEqual([[stamp, stamp], [stamp, stamp], [published.body['results'][2]['updatedAt'], published.body['results'][2]['publishedAt']]]);
    expect(after[0]!['values']['price']).toBe(12.5);
    expect(sim.items(PORTAL, 'hubdb_tables')[1]!.updatedAt).toBe(stamp);
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === table.id).map((e) => [e.event, e.objectType, e.meta])).toEqual([
      ['UPDATED', 'HUBDB_TABLE', { version: 'draft', rowId: rows[0] }], ['UPDATED', 'HUBDB_TABLE', { version: 'draft', rowId: rows[1] }],
      ['PUBLISHED', 'HUBDB_TABLE', { rowsUpdated: 2 }],
    ]);
    expect(sim.writeCounts(PORTAL, 'hubdb_rows')).toEqual({ [`${table.id}:${rows[0]}`]: 1, [`${table.id}:${rows[1]}`]: 1 });
    expect(sim.writeCounts(PORTAL, 'hubdb_tables')).toEqual({ [table.id]: 1 });
    const unknownColumn = await call('POST', hubdbDraftRowsUpdatePath(table.id), { inputs: [{ id: rows[2], values: { colour: 'red' } }] });
    expect(unknownColumn.body['errors'][0]['message']).toContain('Column colour does not exist');
    expect((await call('POST', hubdbPublishPath('no_such_table'))).status).toBe(404);
  });

  it('HubDB writes need the hubdb scope; page writes need content', async () => {
    const denied = await call('POST', hubdbPublishPath('1'), undefined, CONTENT_ONLY);
    expect(denied).toMatchObject({ status: 403, body: { category: 'MISSING_SCOPES', errors: [{ context: { requiredGranularScopes: ['hubdb'] } }] } });
    sim.removeScope(516, 'content');
    expect((await call('POST', batchUpdatePath('blog_posts'), { inputs: [] }, CONTENT_ONLY)).status).toBe(403);
  });
});

describe('URL redirects', () => {
  it('GET one, PATCH the fields given; redirectStyle 301, 302 or 305', async () => {
    const [id] = fresh('url_redirects');
    const before = await call('GET', redirectPath(id!));
    expect(before.status).toBe(200);
    const patched = await call('PATCH', redirectPath(id!), { destination: 'https://example.com/new', redirectStyle: 302 });
    expect(patched.status).toBe(200);
    const { destination, redirectStyle, updated, ...rest } = patched.body;
    const { destination: _d, redirectStyle: _r, updated: oldUpdated, ...oldRest } = before.body;
    expect([destination, redirectStyle, rest]).toEqual(['https://example.com/new', 302, oldRest]);
    expect(Date.parse(updated)).toBeGreaterThan(Date.parse(oldUpdated));
    expect((await call('GET', redirectPath(id!))).body).toEqual(patched.body);
    const bad = await call('PATCH', redirectPath(id!), { redirectStyle: 307 });
    expect(bad).toMatchObject({ status: 400, body: { category: 'VALIDATION_ERROR', errors: [{ in: 'redirectStyle' }] } });
    expect((await call('PATCH', redirectPath('999'), { destination: 'x' })).status).toBe(404);
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id)).toMatchObject([{ event: 'UPDATED', objectType: 'URL_MAPPING', timestamp: updated }]);
  });
});

describe('audit log', () => {
  it('an event per write, by the token\'s user or the person in HubSpot, stamped with the item\'s new update time; filtered and paged', async () => {
    const [page, other] = fresh('site_pages', 2);
    const [tag] = fresh('blog_tags');
    const ours = (await call('POST', batchUpdatePath('site_pages'), { inputs: [{ id: page, name: 'ours' }] })).body['results'][0];
    const theirs = sim.editInHubSpot(PORTAL, 'site_pages', other!, { name: 'theirs' });
    await call('POST', batchUpdatePath('blog_tags'), { inputs: [{ id: tag, name: 'tagged' }] });
    const list = await call('GET', `${AUDIT_LOGS_PATH}?objectType=WEBSITE_PAGE&objectId=${page}&objectId=${other}`);
    expect(list.status).toBe(200);
    expect(list.body['results']).toEqual([
      { event: 'UPDATED', objectType: 'WEBSITE_PAGE', objectId: page, objectName: 'ours', meta: {}, timestamp: ours['updated'], ...who(integrationUser(PORTAL)) },
      { event: 'UPDATED', objectType: 'WEBSITE_PAGE', objectId: other, objectName: 'theirs', meta: {}, timestamp: theirs, ...who(personUser(PORTAL)) },
    ]);
    // Blog tags have no audit objectType: no event.
    expect(sim.auditLog(PORTAL).some((e) => e.objectId === tag)).toBe(false);
    const byPerson = await call('GET', `${AUDIT_LOGS_PATH}?userId=${personUser(PORTAL).id}&after=${Date.parse(ours['updated'])}`);
    expect(byPerson.body['results'].map((e: Json) => e['objectId'])).toEqual([other]);
    const before = await call('GET', `${AUDIT_LOGS_PATH}?objectId=${page}&objectId=${other}&before=${encodeURIComponent(theirs)}`);
    expect(before.body['results'].map((e: Json) => e['objectId'])).toEqual([page]);
    const newest = await call('GET', `${AUDIT_LOGS_PATH}?objectId=${page}&objectId=${other}&sort=-timestamp&limit=1`);
    expect(newest.body['results'].map((e: Json) => e['objectId'])).toEqual([other]);
    const next = await call('GET', `${AUDIT_LOGS_PATH}?objectId=${page}&objectId=${other}&sort=-timestamp&limit=1&after=${newest.body['paging']['next']['after']}`);
    expect([next.body['results'].map((e: Json) => e['objectId']), next.body['paging']]).toEqual([[page], undefined]);
    expect((await call('GET', `${AUDIT_LOGS_PATH}?objectType=BLOG_TAG`)).status).toBe(400);
    expect((await call('GET', `${AUDIT_LOGS_PATH}?eventType=UPDATED&objectId=${page}`)).body['results']).toHaveLength(1);
  });

  it('an OAuth install writes as its user', async () => {
    sim.registerApp({ clientId: 'w-client', clientSecret: 'w-secret', redirectUris: ['http://127.0.0.1:9/cb'] });
    sim.queueInstall({ portalId: PORTAL, grant: 'approve', userId: 4321 });
    const location = await sim.authorize(`${sim.url}/oauth/authorize?client_id=w-client&redirect_uri=${encodeURIComponent('http://127.0.0.1:9/cb')}&scope=content`);
    const token = await fetch(`${sim.url}/oauth/v3/token`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', client_id: 'w-client', client_secret: 'w-secret', redirect_uri: 'http://127.0.0.1:9/cb', code: location.searchParams.get('code')! }),
    }).then((r) => r.json()) as Json;
    const [id] = fresh('site_pages');
    expect((await call('POST', batchUpdatePath('site_pages'), { inputs: [{ id, name: 'by oauth' }] }, token['access_token'])).status).toBe(200);
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id)).toMatchObject([{ userId: '4321' }]);
  });
});

function who(user: { id: string; fullName: string }) {
  return { userId: user.id, fullName: user.fullName };
}

describe('test hooks', () => {
  it('an edit queued behind a read lands between that read and the next write: the write wins, the edit\'s revision lies between', async () => {
    const [id, bystander] = fresh('landing_pages', 2);
    sim.editAfterNextRead(PORTAL, 'landing_pages', id!, { htmlTitle: 'theirs' });
    // A list read does not set it off; a batch read of another item neither.
    await call('GET', `${LIST_PATHS.landing_pages}?limit=100`);
    await readOne('landing_pages', bystander!);
    const reread = await readOne('landing_pages', id!);
    expect(reread['htmlTitle']).not.toBe('theirs'); // the read saw the item before the edit
    const written = (await call('POST', batchUpdatePath('landing_pages'), { inputs: [{ id, htmlTitle: 'ours' }] })).body['results'][0];
    expect(written['htmlTitle']).toBe('ours');
    // What a writer can detect: a revision between its re-read and its write, by someone else.
    const between = sim.revisions(PORTAL, 'landing_pages', id!).filter((r) =>
      Date.parse(r.updatedAt) > Date.parse(reread['updated']) && Date.parse(r.updatedAt) < Date.parse(written['updated']));
    expect(between.map((r) => [r.object['htmlTitle'], r.user.id])).toEqual([['theirs', personUser(PORTAL).id]]);
    // It lands once.
    await readOne('landing_pages', id!);
    expect((await readOne('landing_pages', id!))['htmlTitle']).toBe('ours');
  });

  it('an edit queued before a read lands right before it: that read already sees it (a change made before a re-read)', async () => {
    const [id] = fresh('blog_posts');
    const before = await readOne('blog_posts', id!);
    sim.editBeforeNextRead(PORTAL, 'blog_posts', id!, { postSummary: 'changed before the re-read' });
    expect((await call('GET', `${LIST_PATHS.blog_posts}?limit=100`)).status).toBe(200);
    const reread = (await call('POST', batchReadPath('blog_posts'), batchReadBody([id!]))).body['results'][0];
    expect(reread['postSummary']).toBe('changed before the re-read');
    expect(Date.parse(reread['updated'])).toBeGreaterThan(Date.parse(before['updated']));
    expect(sim.auditLog(PORTAL).filter((e) => e.objectId === id)).toMatchObject([{ userId: personUser(PORTAL).id, timestamp: reread['updated'] }]);
    expect(await readOne('blog_posts', id!)).toEqual(reread); // once
  });

  it('a HubDB row edited in HubSpot is published with its table; queued behind a rows read it lands before the next write', async () => {
    const row = sim.items(PORTAL, 'hubdb_rows').filter((r) => r.tableId === sim.items(PORTAL, 'hubdb_tables')[0]!.id)[5]!;
    const stamp = sim.editInHubSpot(PORTAL, 'hubdb_rows', row.key, { values: { price: 1 } });
    expect(sim.items(PORTAL, 'hubdb_rows').find((r) => r.key === row.key)!.updatedAt).toBe(stamp);
    expect(sim.items(PORTAL, 'hubdb_tables')[0]!.updatedAt).toBe(stamp);
    sim.editAfterNextRead(PORTAL, 'hubdb_rows', row.key, { values: { price: 2 } });
    const read = (await call('POST', hubdbDraftRowsReadPath(row.tableId!), batchReadBody([row.id]))).body['results'][0];
    expect(read['values']['price']).toBe(1);
    const published = (await call('POST', hubdbRowsReadPath(row.tableId!), batchReadBody([row.id]))).body['results'][0];
    expect(published['values']['price']).toBe(2);
    expect(() => sim.editInHubSpot(PORTAL, 'hubdb_rows', row.key, { values: { price: 'x' } })).toThrow(/price/);
  });

  it('counts each item\'s writes by the API (not edits in HubSpot, not refused inputs); the new endpoints in stats', async () => {
    const [a, b] = fresh('blog_authors', 2);
    sim.resetStats();
    await call('POST', batchUpdatePath('blog_authors'), { inputs: [{ id: a, bio: 'one' }, { id: b, bio: 7 }] });
    await call('POST', batchUpdatePath('blog_authors'), { inputs: [{ id: a, bio: 'two' }] });
    sim.editInHubSpot(PORTAL, 'blog_authors', b!, { bio: 'person' });
    const counts = sim.writeCounts(PORTAL, 'blog_authors');
    expect([counts[a!], counts[b!]]).toEqual([2, undefined]);
    const update = batchUpdatePath('blog_authors');
    expect(sim.writeCounts(PORTAL, 'blog_authors', `POST ${update}`)[a!]).toBe(2);
    expect(sim.stats().byEndpoint).toEqual({ [`POST ${update}`]: 2 });
    expect(sim.requestLog().map((e) => [e.method, e.path, e.status])).toEqual([['POST', update, 207], ['POST', update, 200]]);
  });

  it('a lost answer: the write is carried out, the socket drops before the answer', async () => {
    const [id] = fresh('blog_tags');
    sim.failNext(1, 'lost');
    await expect(call('POST', batchUpdatePath('blog_tags'), { inputs: [{ id, name: 'applied, answer lost' }] })).rejects.toThrow();
    expect((await readOne('blog_tags', id!))['name']).toBe('applied, answer lost');
    expect(sim.writeCounts(PORTAL, 'blog_tags')[id!]).toBe(1);
  });
});

describe('limits', () => {
  it('writes count against the portal\'s limit; a 429 writes nothing', async () => {
    const local = await startHubSpotSimulator({ rateLimit: { maxPer10s: 2, windowMs: 60_000 } });
    try {
      local.addPortal({ portalId: 1, token: 't', sizes: { blog_tags: 5 } });
      const [id] = local.items(1, 'blog_tags').map((i) => i.id);
      const write = (name: string) => call('POST', batchUpdatePath('blog_tags'), { inputs: [{ id, name }] }, 't', local);
      expect((await call('POST', batchReadPath('blog_tags'), batchReadBody([id!]), 't', local)).status).toBe(200);
      expect((await write('one')).status).toBe(200);
      const written = local.items(1, 'blog_tags')[0]!.updatedAt;
      const limited = await write('two');
      expect(limited).toMatchObject({ status: 429, body: { policyName: 'TEN_SECONDLY_ROLLING' } });
      expect(local.items(1, 'blog_tags')[0]!.updatedAt).toBe(written);
      expect(local.writeCounts(1, 'blog_tags')).toEqual({ [id!]: 1 });
      expect(local.stats()).toMatchObject({ requests: 3, rateLimited: 1 });
      local.setFaults({ forced429Rate: 1 });
      expect((await write('three')).status).toBe(429);
      expect(local.writeCounts(1, 'blog_tags')).toEqual({ [id!]: 1 });
    } finally {
      await local.close();
    }
  });
});
