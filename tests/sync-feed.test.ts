// What an app reads around an incremental sync: the change feed's labels
// depend only on the cursor the read began from (any page size, either cursor
// form), `cursor=now` starts at the feed's end, bad cursors are refused, and
// HubDB rows carry nothing of their table that a rename could leave stale.
// Real Postgres, the simulator on loopback, the real worker, the handler.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, invokeUntilFinished, runOf, stopAllRuns, type SimPortal } from './support/fetch-fixtures.ts';
import { orchestratorHarness, type OrchestratorHarness } from './support/orchestrator-harness.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let api: OrchestratorHarness;

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  api = await orchestratorHarness(db.sql, sim.url);
});
afterAll(async () => {
  await stopAllRuns(db.sql);
  await sim.close();
});

async function sync(p: SimPortal, mode: 'full' | 'incremental', types: readonly ContentType[] = CONTENT_TYPES): Promise<string> {
  const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: mode });
  expect(r.duplicateTypes).toEqual([]);
  await invokeUntilFinished(await testWorkerRuntime(db.sql, sim.url), db.sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
  return r.runId!;
}

interface Change {
  contentType: string;
  hubspotId: string;
  change: string;
  data: Record<string, unknown>;
}

async function changesPage(token: string, portalId: string, params: Record<string, string>) {
  const query = new URLSearchParams({ portalId, ...params });
  const res = await api.handler(api.request('GET', { token, query: `/changes?${query}` }));
  return { status: res.status, body: (await res.json()) as { changes: Change[]; nextCursor: string; more: boolean; code?: string } };
}

/** Reads the feed from `cursor` to its end in pages of `limit`; the labels by `<type>/<id>`, and the cursor at the end. */
async function readAll(token: string, portalId: string, cursor: string | undefined, limit: number, contentType?: ContentType) {
  const labels = new Map<string, string>();
  for (let i = 0; i < 10_000; i++) {
    const { status, body } = await changesPage(token, portalId, {
      limit: String(limit), ...(cursor === undefined ? {} : { cursor }), ...(contentType ? { contentType } : {}),
    });
    expect(status).toBe(200);
    for (const c of body.changes) {
      const key = `${c.contentType}/${c.hubspotId}`;
      expect(labels.has(key), `${key} read twice in one read`).toBe(false);
      labels.set(key, c.change);
    }
    cursor = body.nextCursor;
    if (!body.more) return { labels, cursor };
  }
  throw new Error('the feed did not end');
}

describe('change feed labels', () => {
  it('an item is inserted when created after the cursor the read began from, at every page size and in both cursor forms', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { site_pages: 40, blog_posts: 30, blog_tags: 12, hubdb_tables: 2, hubdb_rows: 40 } });
    const types: ContentType[] = ['site_pages', 'blog_posts', 'blog_tags', 'hubdb_rows'];
    await sync(p, 'full', types);
    const token = await api.keys.signUserToken(p.userId);
    const origin = (await readAll(token, p.portalId, undefined, 500)).cursor;

    // Before the next sync: items created (the first of them edited again before the sync after),
    // others edited, others deleted; so each page holds inserts from one sync behind changes of another.
    const created: string[] = [];
    const edited: string[] = [];
    const deleted: string[] = [];
    for (const type of types) {
      const added = sim.addItems(p.hubspotPortalId, type, 6).map((k) => `${type}/${k}`);
      created.push(...added);
      edited.push(...sim.touchItems(p.hubspotPortalId, type, 3).filter((k) => !added.includes(`${type}/${k}`)).map((k) => `${type}/${k}`));
    }
    await sync(p, 'incremental', types);
    for (const type of types) {
      const mine = created.filter((k) => k.startsWith(`${type}/`)).map((k) => k.slice(type.length + 1));
      sim.touchItems(p.hubspotPortalId, type, mine.slice(0, 3)); // the lowest numbers of their insert
      if (type !== 'hubdb_rows') {
        const stored = sim.items(p.hubspotPortalId, type).map((i) => i.key).filter((k) => !mine.includes(k) && !edited.includes(`${type}/${k}`));
        deleted.push(...sim.deleteItems(p.hubspotPortalId, type, stored.slice(0, 2)).map((k) => `${type}/${k}`));
      }
    }
    await sync(p, 'incremental', types);

    const expected = new Map<string, string>([
      ...created.map((k) => [k, 'inserted'] as const),
      ...edited.map((k) => [k, 'updated'] as const),
      ...deleted.map((k) => [k, 'deleted'] as const),
    ]);
    const reads: Record<string, Map<string, string>> = {};
    for (const limit of [1, 7, 50, 500]) {
      reads[`all types, pages of ${limit}`] = (await readAll(token, p.portalId, origin, limit)).labels;
      const perType = new Map<string, string>();
      for (const type of types) for (const [k, v] of (await readAll(token, p.portalId, origin, limit, type)).labels) perType.set(k, v);
      reads[`per type, pages of ${limit}`] = perType;
    }
    for (const [how, labels] of Object.entries(reads)) {
      // Edits of an item in one sync may show it twice in HubSpot's listing, never in the feed.
      expect(Object.fromEntries([...labels].filter(([k]) => expected.has(k))), how).toEqual(Object.fromEntries(expected));
      expect(labels.size, how).toBe(expected.size);
    }
  }, 120_000);

  it('cursor=now starts at the end of the feed; a read to its end starts the next read there', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 20 } });
    await sync(p, 'full', ['blog_tags']);
    const token = await api.keys.signUserToken(p.userId);
    const now = await changesPage(token, p.portalId, { cursor: 'now' });
    expect(now.body).toMatchObject({ changes: [], more: false });
    const full = await readAll(token, p.portalId, undefined, 7);
    expect([...full.labels.values()].every((c) => c === 'inserted')).toBe(true);
    expect(full.labels.size).toBe(20);
    expect((await changesPage(token, p.portalId, { cursor: now.body.nextCursor })).body.changes).toEqual([]);

    const [touched] = sim.touchItems(p.hubspotPortalId, 'blog_tags', 1);
    const [added] = sim.addItems(p.hubspotPortalId, 'blog_tags', 1);
    await sync(p, 'incremental', ['blog_tags']);
    for (const cursor of [now.body.nextCursor, full.cursor]) {
      const next = await readAll(token, p.portalId, cursor, 1);
      expect(Object.fromEntries(next.labels)).toEqual({ [`blog_tags/${touched}`]: 'updated', [`blog_tags/${added}`]: 'inserted' });
    }
  }, 60_000);

  it('refuses a cursor it did not give out with 400 INVALID_CURSOR, positions past the bigint range included', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 3 } });
    const token = await api.keys.signUserToken(p.userId);
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const cursor of [
      'bad', b64({ site_pages: '9223372036854775808' }), b64({ after: { site_pages: '1' }, origin: { site_pages: '99999999999999999999' } }),
      b64({ nope: '1' }), b64({ after: { site_pages: '1' } }), b64([1]),
    ]) {
      const res = await changesPage(token, p.portalId, { cursor });
      expect(res.status, cursor).toBe(400);
      expect(res.body.code, cursor).toBe('INVALID_CURSOR');
    }
    expect((await changesPage(token, p.portalId, { cursor: b64({ site_pages: '9223372036854775807' }) })).status).toBe(200);
  });
});

describe('HubDB rows follow their table', () => {
  it('a renamed table leaves no stale name on its rows, and a full reconcile of the unchanged portal reports no change', async () => {
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_tables: 3, hubdb_rows: 90 } });
    const types: ContentType[] = ['hubdb_tables', 'hubdb_rows'];
    await sync(p, 'full', types);
    const [first] = sim.items(p.hubspotPortalId, 'hubdb_tables');
    const token = await api.keys.signUserToken(p.userId);
    const before = (await readAll(token, p.portalId, undefined, 500)).cursor;

    const tableId = sim.renameTable(p.hubspotPortalId, first!.id, 'price_list_2027');
    await sync(p, 'incremental', types);
    const [table] = await db.sql`select data from public.hubspot_content
      where portal_id = ${p.portalId} and content_type = 'hubdb_tables' and hubspot_id = ${tableId}`;
    expect(table!.data).toMatchObject({ name: 'price_list_2027' });
    const rows = await db.sql`select data from public.hubspot_content
      where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and split_part(hubspot_id, ':', 1) = ${tableId}`;
    expect(rows.length).toBe(30);
    for (const r of rows) {
      expect(r.data).toMatchObject({ tableId });
      expect(JSON.stringify(r.data)).not.toContain(`table_${tableId}`);
    }
    // The feed: the table changed, none of its rows.
    expect(Object.fromEntries((await readAll(token, p.portalId, before, 50)).labels)).toEqual({ [`hubdb_tables/${tableId}`]: 'updated' });

    const reconcile = await sync(p, 'full', types);
    const status = await api.handler(api.request('GET', { token, query: `/sync?portalId=${p.portalId}` }));
    const body = (await status.json()) as { lastSync: { runId: string; mode: string; changes: Record<string, number> } };
    expect(body.lastSync).toMatchObject({ runId: reconcile, mode: 'full', changes: { added: 0, updated: 0, deleted: 0 } });
  }, 60_000);
});
