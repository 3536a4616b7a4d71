// Incremental sync end to end: real Postgres, the HubSpot simulator on
// loopback and the worker invocation (or a hand-played worker doing what
// functions/worker/fetch-job.ts does). After each sync the store must hold
// exactly the simulator's current state: every change, creation and deletion,
// including changes made while the sync reads, items sharing one updatedAt,
// and across crashes and releases mid-job. docs/sync.md.
import { describe, expect, it } from 'vitest';
import { parseFetchCheckpoint, storedRowsOfPass } from '../functions/worker/fetch-job.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { asUser, type Sql } from '../shared/db.ts';
import { createLogger, silentLogger } from '../shared/log.ts';
import { completeFetchJob, saveFetchedPageRaw, storedHubdbRowIds, storedHubdbRows } from '../shared/sql/fetch.ts';
import { claimNextJob, releaseJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { expireLease } from './support/queue-fixtures.ts';
import {
  connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, manualClient, runOf, type Row, type SimPortal,
} from './support/fetch-fixtures.ts';
import { useSimulators } from './support/simulators.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { rowsPath } from '../shared/hubspot/endpoints.ts';

const db = useTestDatabase();
const newSim = useSimulators(db);

const SIZES = {
  site_pages: 560, landing_pages: 320, blog_posts: 1_450, blog_authors: 30, blog_tags: 40, hubdb_tables: 3, hubdb_rows: 2_400, url_redirects: 330,
};

/** Runs a fetch of the types to its end through worker invocations; returns the run id. */
async function sync(sql: Sql, sim: HubSpotSimulator, p: SimPortal, mode: 'full' | 'incremental', types: readonly ContentType[] = CONTENT_TYPES): Promise<string> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: mode });
  expect(r.duplicateTypes).toEqual([]);
  const rt = await testWorkerRuntime(sql, sim.url, {}, process.env.SYNC_DEBUG ? createLogger() : silentLogger);
  try {
    await invokeUntilFinished(rt, sql, r.runId!, { maxInvocations: 10 });
  } catch (e) {
    console.log(await sql`select id, content_type, started_at, checkpoint, result, last_error from public.jobs where run_id = ${r.runId!}`);
    throw e;
  }
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  return r.runId!;
}

async function expectAllSameAsSim(sim: HubSpotSimulator, p: SimPortal, types: readonly ContentType[] = CONTENT_TYPES): Promise<void> {
  for (const type of types) await expectSameAsSim(db.sql, sim, p, type);
}

async function marks(p: SimPortal): Promise<Record<string, number>> {
  const rows = await db.sql`select content_type, high_water from public.sync_marks where portal_id = ${p.portalId}`;
  return Object.fromEntries(rows.map((r) => [r.content_type as string, (r.high_water as Date).getTime()]));
}

async function deletedKeys(p: SimPortal, type: ContentType): Promise<string[]> {
  const rows = await db.sql`select hubspot_id from public.hubspot_content
    where portal_id = ${p.portalId} and content_type = ${type} and deleted_at is not null order by hubspot_id`;
  return rows.map((r) => r.hubspot_id as string);
}

/** List requests the simulator answered for the portal since the last reset, by endpoint. */
function listRequests(sim: HubSpotSimulator): number {
  return sim.requestLog().filter((e) => e.endpoint.includes('/cms/')).length;
}

/** Keys of `count` live items of a type from the simulator, in its paging (id) order, starting at `from`. */
function keysOf(sim: HubSpotSimulator, p: SimPortal, type: ContentType, from: number, count: number): string[] {
  return sim.items(p.hubspotPortalId, type).slice(from, from + count).map((i) => i.key);
}

/** The held job's stored checkpoint, and its listing as fetch-job.ts asks for it. */
async function listingOf(job: ClaimedJob) {
  const [row] = await db.sql`select checkpoint from public.jobs where id = ${job.id}`;
  const cp = parseFetchCheckpoint(row!.checkpoint);
  const sync = cp.sync ? {
    ...cp.sync,
    storedRows: (await storedRowsOfPass(db.sql, job.portalId, cp.sync)) ?? undefined,
    storedRowIds: (tableId: string) => storedHubdbRowIds(db.sql, job.portalId, tableId),
  } : null;
  return { cp, sync };
}

/** Fetches and saves one page of the held job from its stored checkpoint, as fetch-job.ts does. */
async function handPage(p: SimPortal, sim: HubSpotSimulator, job: ClaimedJob): Promise<{ finished: boolean; phase: string | null }> {
  const { cp, sync } = await listingOf(job);
  const page = await manualClient(sim, p).fetchRawPage(job.contentType!, cp.after, undefined, sync);
  const saved = await saveFetchedPageRaw(db.sql, job, page.body, page.context);
  expect(saved).not.toBeNull();
  const next = parseFetchCheckpoint(saved!.checkpoint);
  return { finished: next.finished, phase: next.sync?.phase ?? null };
}

describe('incremental sync against the simulator', () => {
  it('stores every update, creation and archive of every type, at a small share of the full sync\'s requests', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: SIZES, hubdbTables: 3 });
    sim.resetStats();
    await sync(db.sql, sim, p, 'full');
    const fullRequests = listRequests(sim);
    await expectAllSameAsSim(sim, p);
    const marks1 = await marks(p);
    expect(Object.keys(marks1).sort()).toEqual([...CONTENT_TYPES].sort());

    // Churn on every type (rows of one HubDB table only).
    const tables = sim.items(p.hubspotPortalId, 'hubdb_tables');
    const rowsOfFirst = sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === tables[0]!.id).map((r) => r.key);
    const archived: Partial<Record<ContentType, string[]>> = {};
    for (const type of CONTENT_TYPES) {
      if (type === 'hubdb_tables') continue;
      if (type === 'hubdb_rows') {
        sim.touchItems(p.hubspotPortalId, type, rowsOfFirst.slice(0, 5));
        archived[type] = sim.deleteItems(p.hubspotPortalId, type, rowsOfFirst.slice(10, 12));
        continue;
      }
      // Archived first: an item created and archived between two syncs is never stored, so is no tombstone.
      archived[type] = sim.deleteItems(p.hubspotPortalId, type, 2);
      sim.touchItems(p.hubspotPortalId, type, 3);
      sim.addItems(p.hubspotPortalId, type, 2);
    }

    sim.resetStats();
    const run = await sync(db.sql, sim, p, 'incremental');
    const incrementalRequests = listRequests(sim);
    await expectAllSameAsSim(sim, p);
    for (const [type, keys] of Object.entries(archived) as [ContentType, string[]][]) {
      const dead = await deletedKeys(p, type);
      for (const key of keys) expect(dead, `${type} ${key} is a tombstone`).toContain(key);
    }
    // Two listings per type (changed, archived: each one page here) but HubDB tables, whose whole list
    // (one request, shared with the rows job) is read instead, and the rows of the tables updated after
    // the mark minus the overlap: the changed table, and any the overlap takes in again.
    const reread = tables.filter((t, i) => i === 0 || Date.parse(t.updatedAt) > marks1.hubdb_rows! - 120_000).map((t) => t.id);
    expect(reread.length).toBeLessThan(tables.length);
    const rowsRequests = sim.requestLog().filter((e) => e.endpoint.endsWith('/rows'));
    expect(new Set(rowsRequests.map((e) => e.path))).toEqual(new Set(reread.map((id) => rowsPath(id))));
    expect(incrementalRequests, JSON.stringify(sim.stats().byEndpoint)).toBe(6 * 2 + 1 + reread.length);
    expect(fullRequests).toBeGreaterThan(2 * incrementalRequests);

    const jobs = await jobsOf(db.sql, run);
    for (const j of jobs) expect((j.result as Row).mode, String(j.content_type)).toBe(j.content_type === 'hubdb_tables' ? 'full' : 'incremental');
    const posts = jobs.find((j) => j.content_type === 'blog_posts')!.result as Record<string, number>;
    expect(posts).toMatchObject({ added: 2, updated: 3, deleted: 2 });
    const marks2 = await marks(p);
    for (const type of CONTENT_TYPES) expect(marks2[type]!, type).toBeGreaterThanOrEqual(marks1[type]!);
    expect(marks2.blog_posts!).toBeGreaterThan(marks1.blog_posts!);

    // Nothing changed: another incremental sync changes nothing.
    const before = await db.sql`select count(*)::int as n, max(change_seq)::text as seq from public.hubspot_content where portal_id = ${p.portalId}`;
    await sync(db.sql, sim, p, 'incremental');
    const after = await db.sql`select count(*)::int as n, max(change_seq)::text as seq from public.hubspot_content where portal_id = ${p.portalId}`;
    expect(after).toEqual(before);
  }, 120_000);

  it('HubDB rows: changed rows of many tables cost a request per table; deleted rows are found by sweeping only the tables that lost rows', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 16_800 }, hubdbTables: 8 });
    await sync(db.sql, sim, p, 'full', ['hubdb_rows']);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    const tables = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.id);
    const rowsOf = (table: string) => sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === table).map((r) => r.key);
    const pagesPerTable = Math.ceil(rowsOf(tables[0]!).length / 1000);
    expect(pagesPerTable).toBe(3);

    // Every table changes a little and gains at most one row (new rows go round the tables, until
    // table 5 has one); table 1 loses two rows for good (rows deleted from a published table),
    // table 2 two (archived): fewer rows than stored; in table 5 the new row hides a lost one from its
    // rowCount until the new row is read.
    for (const t of tables) sim.touchItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(t).slice(0, 3));
    const added: string[] = [];
    while (!added.at(-1)?.startsWith(`${tables[5]}:`)) added.push(...sim.addItems(p.hubspotPortalId, 'hubdb_rows', 1));
    expect(added.length).toBeLessThanOrEqual(tables.length);
    const purged = sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[1]!).slice(10, 12));
    const archived = sim.deleteItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[2]!).slice(10, 12));
    const masked = sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[5]!).slice(20, 21));

    const counts = await storedHubdbRows(db.sql, p.portalId);
    const queries: URLSearchParams[] = [];
    sim.onList(({ portalId, type, query }) => { if (portalId === p.hubspotPortalId && type === 'hubdb_rows') queries.push(query); });
    const run = await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    // The stored rows were counted once, when the job was created; the tables its changed pass wrote to
    // (all but 1 and 2) were counted again for the sweep, which is how table 5's lost row shows.
    const [job] = await jobsOf(db.sql, run);
    expect(job!.checkpoint).toMatchObject({ storedRows: counts, recount: tables.filter((_, i) => i !== 1 && i !== 2) });
    const dead = await deletedKeys(p, 'hubdb_rows');
    for (const key of [...purged, ...archived, ...masked]) expect(dead).toContain(key);
    // One filtered request per table (its few changed rows) but tables 1 and 2, which hold fewer rows
    // than stored from the start; then tables 1, 2 and 5 (its new row read, it holds fewer) are swept whole.
    const filtered = queries.filter((q) => q.get('hs_updated_at__gt') !== null && q.get('sort') === 'hs_updated_at');
    expect(filtered.length).toBe(tables.length - 2);
    expect(queries.length).toBe(tables.length - 2 + 3 * pagesPerTable);
    expect(queries.length).toBeLessThan(tables.length * pagesPerTable);

    // Nothing changed since: one filtered request per table (all inside the overlap), no sweep, no change.
    queries.length = 0;
    const before = await db.sql`select max(change_seq)::text as seq from public.hubspot_content where portal_id = ${p.portalId}`;
    await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
    expect(await db.sql`select max(change_seq)::text as seq from public.hubspot_content where portal_id = ${p.portalId}`).toEqual(before);
    expect(queries.length).toBe(tables.length);
    expect(queries.every((q) => q.get('hs_updated_at__gt') !== null)).toBe(true);
    sim.onList(null);
  }, 180_000);

  it('a HubDB deletion-sweep cadence: cycles in between read changed rows only, a sweep cycle (its time come, or 0: every cycle) finds the deleted rows', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 3_000 }, hubdbTables: 3 });
    await db.sql`insert into public.sync_schedules (portal_id, content_types, incremental_every_minutes, hubdb_sweep_every_minutes)
      values (${p.portalId}, array['hubdb_rows'], 15, 60)`;
    try {
      await sync(db.sql, sim, p, 'full', ['hubdb_rows']);
      const tables = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.id);
      const rowsOf = (table: string) => sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === table).map((r) => r.key);
      // Table 0 has a changed row and loses two for good: fewer rows than stored.
      const [touched] = sim.touchItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[0]!).slice(0, 1));
      const purged = sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[0]!).slice(10, 12));
      const queries: URLSearchParams[] = [];
      sim.onList(({ portalId, type, query }) => { if (portalId === p.hubspotPortalId && type === 'hubdb_rows') queries.push(query); });
      const sweeps = () => queries.filter((q) => q.get('hs_updated_at__gt') === null).length;

      // Within the cadence: the changed row is stored (its table read filtered, though it lost rows), no table swept.
      const quiet = await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
      expect(sweeps()).toBe(0);
      expect(queries.length).toBeGreaterThan(0);
      const [row] = await db.sql`select hubspot_updated_at from public.hubspot_content where portal_id = ${p.portalId} and hubspot_id = ${touched!}`;
      const simRow = sim.items(p.hubspotPortalId, 'hubdb_rows').find((r) => r.key === touched)!;
      expect((row!.hubspot_updated_at as Date).getTime()).toBe(Date.parse(simRow.updatedAt));
      expect(await deletedKeys(p, 'hubdb_rows')).toEqual([]);
      const [job] = await jobsOf(db.sql, quiet);
      expect(job!.checkpoint).toMatchObject({ hubdbSweep: false, finished: true });

      // The cadence's hour has passed (back-dated): this cycle sweeps the table that lost rows.
      await db.sql`update public.sync_marks set last_sweep_at = last_sweep_at - interval '61 minutes'
        where portal_id = ${p.portalId} and content_type = 'hubdb_rows'`;
      queries.length = 0;
      await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
      expect(sweeps()).toBeGreaterThan(0);
      expect(await deletedKeys(p, 'hubdb_rows')).toEqual([...purged].sort());
      await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');

      // 0: every cycle sweeps, the next one at once.
      await db.sql`update public.sync_schedules set hubdb_sweep_every_minutes = 0 where portal_id = ${p.portalId}`;
      const more = sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rowsOf(tables[1]!).slice(5, 6));
      await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
      expect(await deletedKeys(p, 'hubdb_rows')).toEqual([...purged, ...more].sort());
      await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    } finally {
      sim.onList(null);
      await db.sql`delete from public.sync_schedules where portal_id = ${p.portalId}`;
    }
  }, 120_000);

  it('misses nothing changed while it reads: updates behind the cursor, creations, archives, a shared updatedAt across pages, a late write', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 900 } });
    await sync(db.sql, sim, p, 'full', ['blog_posts']);

    // 250 items share one updatedAt (a bulk edit): they span three pages of the listing.
    const shared = Date.now() - 1_000;
    const bulk = sim.touchItems(p.hubspotPortalId, 'blog_posts', keysOf(sim, p, 'blog_posts', 0, 250), shared);
    sim.touchItems(p.hubspotPortalId, 'blog_posts', keysOf(sim, p, 'blog_posts', 300, 60));

    let changedPages = 0;
    const during: string[] = [];
    let late: string[] = [];
    sim.onList(({ portalId, type, query }) => {
      if (portalId !== p.hubspotPortalId || type !== 'blog_posts' || query.get('archived') === 'true') return;
      changedPages++;
      if (changedPages === 2) {
        // Behind the cursor: items of the first page change again (they move to the listing's end).
        during.push(...sim.touchItems(p.hubspotPortalId, 'blog_posts', bulk.slice(0, 4)));
        during.push(...sim.addItems(p.hubspotPortalId, 'blog_posts', 3));
        during.push(...sim.deleteItems(p.hubspotPortalId, 'blog_posts', bulk.slice(120, 122)));
        // A write stamped before the bulk but visible only now (a late commit): behind the cursor.
        late = sim.touchItems(p.hubspotPortalId, 'blog_posts', keysOf(sim, p, 'blog_posts', 700, 1), shared - 5_000);
      }
    });
    await sync(db.sql, sim, p, 'incremental', ['blog_posts']);
    sim.onList(null);
    expect(changedPages).toBeGreaterThan(3);
    expect(late).toHaveLength(1);

    // Everything but the late write is stored by this sync.
    const rows = new Map((await db.sql`select hubspot_id, hubspot_updated_at, deleted_at from public.hubspot_content
      where portal_id = ${p.portalId} and content_type = 'blog_posts'`).map((r) => [r.hubspot_id as string, r]));
    const sim1 = new Map(sim.items(p.hubspotPortalId, 'blog_posts').map((i) => [i.key, Date.parse(i.updatedAt)]));
    const wrong = [...sim1].filter(([k, t]) => k !== late[0] && (rows.get(k)?.hubspot_updated_at as Date | undefined)?.getTime() !== t);
    expect(wrong).toEqual([]);
    expect(await deletedKeys(p, 'blog_posts')).toEqual(expect.arrayContaining(bulk.slice(120, 122)));

    // The overlap brings in the late write at the next sync: then the store is exactly the simulator.
    await sync(db.sql, sim, p, 'incremental', ['blog_posts']);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  }, 90_000);

  it('a full sync sets the mark no later than its start: an item changed behind its cursor is read by the next incremental', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { site_pages: 450 } });
    const ordered = sim.items(p.hubspotPortalId, 'site_pages').map((i) => i.key); // the full listing's (id) order
    let pages = 0;
    let behind: string[] = [];
    sim.onList(({ portalId, type }) => {
      if (portalId !== p.hubspotPortalId || type !== 'site_pages' || ++pages !== 3) return;
      behind = sim.touchItems(p.hubspotPortalId, 'site_pages', [ordered[5]!]); // on page 1, already read
      // An item not read yet, stamped ten minutes ahead (HubSpot's clock ahead of ours): the full sync stores it.
      sim.touchItems(p.hubspotPortalId, 'site_pages', [ordered[420]!], Date.now() + 600_000);
    });
    await sync(db.sql, sim, p, 'full', ['site_pages']);
    sim.onList(null);
    expect(behind).toHaveLength(1);
    const [job] = await db.sql`select started_at from public.jobs where content_type = 'site_pages' and portal_id = ${p.portalId} order by id desc limit 1`;
    expect((await marks(p)).site_pages).toBe((job!.started_at as Date).getTime());
    const [stale] = await db.sql`select hubspot_updated_at from public.hubspot_content where portal_id = ${p.portalId} and hubspot_id = ${behind[0]!}`;
    expect((stale!.hubspot_updated_at as Date).getTime()).toBeLessThan(Date.parse(sim.items(p.hubspotPortalId, 'site_pages').find((i) => i.key === behind[0])!.updatedAt));

    await sync(db.sql, sim, p, 'incremental', ['site_pages']);
    await expectSameAsSim(db.sql, sim, p, 'site_pages');
  }, 60_000);

  it('a crash and a release mid-job lose nothing, and the mark moves only when the job completes', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 700, hubdb_rows: 2_500 }, hubdbTables: 2 });
    await sync(db.sql, sim, p, 'full', ['blog_posts', 'hubdb_rows']);
    const marks1 = await marks(p);

    sim.touchItems(p.hubspotPortalId, 'blog_posts', 320);
    sim.addItems(p.hubspotPortalId, 'blog_posts', 5);
    sim.deleteItems(p.hubspotPortalId, 'blog_posts', 4);
    const rows = sim.items(p.hubspotPortalId, 'hubdb_rows');
    // The first table: two pages of changed rows; the second loses rows for good (it is swept).
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', rows.slice(0, 1_100).map((r) => r.key));
    sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rows.slice(1_300, 1_303).map((r) => r.key));

    const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['blog_posts', 'hubdb_rows'], fetchMode: 'incremental' });
    // The first job: a page or two, then its worker crashes (its lease expires below).
    const crashed = (await claimNextJob(db.sql, 'crashing', ['fetch']))!;
    const first = crashed.contentType;
    expect(await handPage(p, sim, crashed)).toMatchObject({ finished: false });
    if (first === 'blog_posts') expect(await handPage(p, sim, crashed)).toMatchObject({ finished: false });
    // The other job: one page, then released (budget spent).
    const released = (await claimNextJob(db.sql, 'releasing', ['fetch']))!;
    expect(released.contentType).not.toBe(first);
    expect(await handPage(p, sim, released)).toMatchObject({ finished: false });
    expect(await releaseJob(db.sql, released)).toBe('released');
    await expireLease(db.sql, crashed.id);
    // Meanwhile more changes, some behind the saved pages: posts move to the listing's end (this sync
    // sees them); the rows' table moves past the mark it will set (the next sync reads it again).
    sim.touchItems(p.hubspotPortalId, 'blog_posts', 2);
    const behind = sim.touchItems(p.hubspotPortalId, 'hubdb_rows', rows.slice(0, 2).map((x) => x.key));
    expect(await marks(p)).toEqual(marks1);

    // A worker resumes both from their checkpoints.
    const rt = await testWorkerRuntime(db.sql, sim.url);
    await invokeUntilFinished(rt, db.sql, r.runId!, { maxInvocations: 5 });
    expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
    expect(await deletedKeys(p, 'hubdb_rows')).toEqual(expect.arrayContaining(rows.slice(1_300, 1_303).map((x) => x.key)));
    const marks2 = await marks(p);
    expect(marks2.blog_posts!).toBeGreaterThan(marks1.blog_posts!);
    expect(marks2.hubdb_rows!).toBeGreaterThan(marks1.hubdb_rows!);
    const [table] = sim.items(p.hubspotPortalId, 'hubdb_tables').filter((t) => t.id === rows[0]!.tableId);
    expect(Date.parse(table!.updatedAt), 'the rows table changed behind the cursor is past the mark').toBeGreaterThan(marks2.hubdb_rows!);

    sim.resetStats();
    await sync(db.sql, sim, p, 'incremental', ['blog_posts', 'hubdb_rows']);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    expect(behind).toHaveLength(2);
  }, 90_000);

  it('what incremental sync cannot see (an item purged from the archive) the full reconcile finds; a type without a mark is fetched in full', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { site_pages: 150, hubdb_rows: 900 }, hubdbTables: 3 });
    // No mark yet: the incremental run's job is a full fetch (and sets the mark).
    const first = await sync(db.sql, sim, p, 'incremental', ['site_pages', 'hubdb_tables', 'hubdb_rows']);
    for (const j of await jobsOf(db.sql, first)) expect((j.result as Row).mode).toBe('full');
    await expectAllSameAsSim(sim, p, ['site_pages', 'hubdb_tables', 'hubdb_rows']);

    const purged = sim.purgeItems(p.hubspotPortalId, 'site_pages', 2);
    const tables = sim.items(p.hubspotPortalId, 'hubdb_tables');
    const goneTable = sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [tables[1]!.key]);
    await sync(db.sql, sim, p, 'incremental', ['site_pages', 'hubdb_tables', 'hubdb_rows']);
    // The archived table and its rows are gone; the purged pages are still live here.
    await expectSameAsSim(db.sql, sim, p, 'hubdb_tables');
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    expect(await deletedKeys(p, 'hubdb_tables')).toEqual(goneTable);
    const live = await db.sql`select count(*)::int as n from public.hubspot_content
      where portal_id = ${p.portalId} and content_type = 'site_pages' and deleted_at is null and hubspot_id = any(${purged})`;
    expect(live[0]!.n).toBe(2);

    await sync(db.sql, sim, p, 'full', ['site_pages']);
    await expectSameAsSim(db.sql, sim, p, 'site_pages');
    expect(await deletedKeys(p, 'site_pages')).toEqual([...purged].sort());
  }, 90_000);

  it('a worker that dies during a sweep has saved nothing of that table: the next claim reads it again whole', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 4_800 }, hubdbTables: 2 });
    await sync(db.sql, sim, p, 'full', ['hubdb_rows']);
    const [, second] = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.id);
    const rowsOfSecond = sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === second).map((r) => r.key);
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', rowsOfSecond.slice(100, 103));
    const purged = sim.purgeItems(p.hubspotPortalId, 'hubdb_rows', rowsOfSecond.slice(5, 8));
    const sweepReads: string[] = [];
    sim.onList(({ portalId, type, query }) => {
      if (portalId === p.hubspotPortalId && type === 'hubdb_rows' && query.get('hs_updated_at__gt') === null) sweepReads.push(query.get('after') ?? 'first');
    });

    const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_rows'], fetchMode: 'incremental' });
    const job = (await claimNextJob(db.sql, 'dies-mid-sweep', ['fetch']))!;
    while ((await handPage(p, sim, job)).phase !== 'sweep');
    // The sweep reads the second table's pages, then the worker dies before saving them.
    const listing = await listingOf(job);
    await manualClient(sim, p).fetchRawPage('hubdb_rows', listing.cp.after, undefined, listing.sync);
    const pages = sweepReads.length;
    expect(pages).toBe(Math.ceil((rowsOfSecond.length - purged.length) / 1000));
    expect(await deletedKeys(p, 'hubdb_rows')).toEqual([]);
    await expireLease(db.sql, job.id);

    const rt = await testWorkerRuntime(db.sql, sim.url);
    await invokeUntilFinished(rt, db.sql, r.runId!, { maxInvocations: 5 });
    sim.onList(null);
    expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
    expect(sweepReads.length, 'the table read again whole').toBe(2 * pages);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    expect(new Set(await deletedKeys(p, 'hubdb_rows'))).toEqual(new Set(purged));
  }, 90_000);

  it('stored_hubdb_rows counts the live rows of each table of one portal (or of the tables listed), stored_hubdb_row_ids lists one table\'s, nothing else', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    const put = (p: { portalId: string; userId: string }, type: string, ids: string[], deleted = false) => db.sql`
      insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, deleted_at)
      select ${p.portalId}, ${p.userId}, ${type}, id, '{}'::jsonb, case when ${deleted} then now() end from unnest(${ids}::text[]) id`;
    const range = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    await put(a, 'hubdb_rows', range('9:', 3));
    await put(a, 'hubdb_rows', range('10:', 5));
    await put(a, 'hubdb_rows', range('10:x', 4), true); // tombstones
    await put(a, 'hubdb_rows', range('11:', 2), true); // a table with none live
    await put(a, 'blog_posts', range('10:', 7)); // another type with ids that look alike
    await put(b, 'hubdb_rows', range('10:', 6)); // another portal
    expect(await storedHubdbRows(db.sql, a.portalId)).toEqual({ '9': 3, '10': 5 });
    expect(await storedHubdbRows(db.sql, b.portalId)).toEqual({ '10': 6 });
    // The tables listed only (a sweep's recount): a table with none live, or never stored, counts 0.
    expect(await storedHubdbRows(db.sql, a.portalId, ['10', '11', '12', '10'])).toEqual({ '10': 5, '11': 0, '12': 0 });
    // A sweep's comparison: the row ids of one table's live rows, without the table's prefix.
    expect((await storedHubdbRowIds(db.sql, a.portalId, '10')).sort()).toEqual(range('', 5));
    expect(await storedHubdbRowIds(db.sql, a.portalId, '11')).toEqual([]);
    expect(await storedHubdbRowIds(db.sql, a.portalId, '1')).toEqual([]);
    expect((await storedHubdbRowIds(db.sql, b.portalId, '10')).sort()).toEqual(range('', 6));
  });

  it('the change feed: the owner reads, under RLS, what was inserted, updated and deleted after a cursor', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 40 } });
    const other = await connectSimPortal(db.sql, sim, { sizes: { blog_tags: 10 } });
    await sync(db.sql, sim, p, 'full', ['blog_tags']);
    await sync(db.sql, sim, other, 'full', ['blog_tags']);
    const claims = { sub: p.userId, role: 'authenticated', aud: 'authenticated' };
    const feed = (after: string) => asUser(db.sql, claims, (tx) => tx`
      select hubspot_id, case when deleted_at is not null then 'deleted' when inserted_seq > ${after}::bigint then 'inserted' else 'updated' end as change,
             change_seq::text
        from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'blog_tags' and change_seq > ${after}::bigint
       order by change_seq`);
    const all = await feed('0');
    expect(all).toHaveLength(40);
    const cursor = all[all.length - 1]!.change_seq as string;

    const touched = sim.touchItems(p.hubspotPortalId, 'blog_tags', 3);
    const added = sim.addItems(p.hubspotPortalId, 'blog_tags', 2);
    const removed = sim.deleteItems(p.hubspotPortalId, 'blog_tags', sim.items(p.hubspotPortalId, 'blog_tags').filter((i) => !touched.includes(i.key) && !added.includes(i.key)).slice(0, 1).map((i) => i.key));
    await sync(db.sql, sim, p, 'incremental', ['blog_tags']);
    const changes = await feed(cursor);
    const by = (kind: string) => changes.filter((c) => c.change === kind).map((c) => c.hubspot_id).sort();
    expect(by('updated')).toEqual([...touched].sort());
    expect(by('inserted')).toEqual([...added].sort());
    expect(by('deleted')).toEqual([...removed].sort());
    // The other owner's portal is invisible.
    const foreign = await asUser(db.sql, claims, (tx) => tx`select count(*)::int as n from public.hubspot_content where portal_id = ${other.portalId}`);
    expect(foreign[0]!.n).toBe(0);
  }, 60_000);
});
