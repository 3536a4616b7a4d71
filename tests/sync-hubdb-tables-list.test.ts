// The HubDB tables list, read once per fetch run (docs/sync.md, decision 0045):
// how many requests a quiet incremental cycle costs, that the hubdb_tables and
// hubdb_rows jobs of one run share one read whichever comes first (racing on
// their own connections included), and that a list read for an earlier run is
// never used. Real Postgres and the HubSpot simulator on loopback.
import { describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { HubDbRowsPager } from '../shared/hubspot/hubdb-rows.ts';
import { fixedAccessToken, Transport, type HttpResponse } from '../shared/hubspot/transport.ts';
import { storeHubdbTablesList, takeHubdbTablesList } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import {
  connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, listRequests, runOf, type SimPortal,
} from './support/fetch-fixtures.ts';
import { expireLease, pgError } from './support/queue-fixtures.ts';
import { useSimulators } from './support/simulators.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const db = useTestDatabase();
const newSim = useSimulators(db);

const SIZES = { site_pages: 40, landing_pages: 20, blog_posts: 60, blog_authors: 5, blog_tags: 8, hubdb_tables: 4, hubdb_rows: 400, url_redirects: 30 };
const TABLES_LIST = LIST_PATHS.hubdb_tables;

/** Runs a fetch of the types to its end through worker invocations; returns the run id. */
async function sync(sql: Sql, sim: HubSpotSimulator, p: SimPortal, mode: 'full' | 'incremental', types: readonly ContentType[] = CONTENT_TYPES, lanes = 2): Promise<string> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: mode });
  expect(r.duplicateTypes).toEqual([]);
  const rt = await testWorkerRuntime(sql, sim.url, { lanes });
  await invokeUntilFinished(rt, sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  return r.runId!;
}

/** The portal's CMS requests since the last reset: the tables list's and all of them. */
function requests(sim: HubSpotSimulator, p: SimPortal): { tablesList: number; total: number } {
  return { tablesList: listRequests(sim, p, TABLES_LIST).length, total: sim.requestLog().filter((e) => e.endpoint.includes('/cms/')).length };
}

/** Live and deleted hubspot ids of a type. */
async function ids(p: { portalId: string }, type: ContentType): Promise<{ live: string[]; deleted: string[] }> {
  const rows = await db.sql`select hubspot_id, deleted_at from public.hubspot_content where portal_id = ${p.portalId} and content_type = ${type} order by hubspot_id`;
  return { live: rows.filter((r) => r.deleted_at === null).map((r) => r.hubspot_id as string), deleted: rows.filter((r) => r.deleted_at !== null).map((r) => r.hubspot_id as string) };
}

/** A run of HubDB tables and rows for a portal with no HubSpot behind it, both jobs claimed (the list protocol alone). */
async function claimedPair(sql: Sql, p: { portalId: string; userId: string }): Promise<{ runId: string; jobs: ClaimedJob[] }> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables', 'hubdb_rows'], fetchMode: 'incremental' });
  const a = (await claimNextJob(sql, 'lane-a', ['fetch']))!;
  const b = (await claimNextJob(sql, 'lane-b', ['fetch']))!;
  expect([a.contentType, b.contentType].sort()).toEqual(['hubdb_rows', 'hubdb_tables']);
  return { runId: r.runId!, jobs: [a, b] };
}

describe('the HubDB tables list of a fetch run', () => {
  it('a quiet incremental cycle reads the tables list once: two listings per other type and one request for both HubDB jobs', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: SIZES, hubdbTables: SIZES.hubdb_tables });
    sim.resetStats();
    await sync(db.sql, sim, p, 'full');
    expect(requests(sim, p).tablesList, 'a full sync reads it once too').toBe(1);
    sim.resetStats();
    const run = await sync(db.sql, sim, p, 'incremental', CONTENT_TYPES, 4);
    // Measured before this design: 3 tables-list requests (the tables job's changed and archived
    // listings, the rows job's list) and 16 in all; now 1 and 14.
    const rowsRequests = sim.requestLog().filter((e) => e.endpoint.endsWith('/rows')).length;
    expect(rowsRequests, 'the tables inside the overlap: their changed rows').toBeLessThanOrEqual(1);
    expect(requests(sim, p), JSON.stringify(sim.stats().byEndpoint)).toEqual({ tablesList: 1, total: 6 * 2 + 1 + rowsRequests });
    const jobs = await jobsOf(db.sql, run);
    // HubDB tables are read in full (their whole list: one request), every other type incrementally.
    for (const j of jobs) expect((j.result as Record<string, unknown>).mode, String(j.content_type)).toBe(j.content_type === 'hubdb_tables' ? 'full' : 'incremental');
    expect(jobs.every((j) => Number((j.result as Record<string, unknown>).added) + Number((j.result as Record<string, unknown>).updated) + Number((j.result as Record<string, unknown>).deleted) === 0)).toBe(true);
    for (const type of CONTENT_TYPES) await expectSameAsSim(db.sql, sim, p, type);
  }, 90_000);

  it('a table created, renamed, changed, archived or removed for good between cycles is seen by the next incremental', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 600 }, hubdbTables: 5 });
    await sync(db.sql, sim, p, 'full', ['hubdb_tables', 'hubdb_rows']);
    const tables = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key);
    const renamed = sim.renameTable(p.hubspotPortalId, tables[0]!, 'renamed_table');
    const rowOfSecond = sim.items(p.hubspotPortalId, 'hubdb_rows').find((r) => r.tableId === tables[1])!.key;
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', [rowOfSecond]);
    const archived = sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [tables[2]!]);
    // Removed for good: no listing shows it, archived or not (the changed and archived listings never did).
    const purged = sim.purgeItems(p.hubspotPortalId, 'hubdb_tables', [tables[3]!]);
    const [created] = sim.addItems(p.hubspotPortalId, 'hubdb_tables', 1);
    const newRows = sim.addItems(p.hubspotPortalId, 'hubdb_rows', 8);

    sim.resetStats();
    await sync(db.sql, sim, p, 'incremental', ['hubdb_tables', 'hubdb_rows']);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_tables');
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    const t = await ids(p, 'hubdb_tables');
    expect(t.deleted).toEqual([...archived, ...purged].sort());
    expect(t.live).toContain(created);
    const [name] = await db.sql`select data ->> 'name' as name from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'hubdb_tables' and hubspot_id = ${renamed}`;
    expect(name!.name).toBe('renamed_table');
    const rows = await ids(p, 'hubdb_rows');
    for (const key of newRows) expect(rows.live).toContain(key);
    expect(rows.deleted.length, 'the rows of both gone tables are tombstones').toBeGreaterThan(0);
    expect(rows.deleted.every((k) => k.startsWith(`${tables[2]}:`) || k.startsWith(`${tables[3]}:`))).toBe(true);
    expect(requests(sim, p).tablesList).toBe(1);
  }, 90_000);

  it('both jobs racing on two lanes of their own (connections, invocations) make one request for the list', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 900 }, hubdbTables: 3 });
    await sync(db.sql, sim, p, 'full', ['hubdb_tables', 'hubdb_rows']);
    sim.addItems(p.hubspotPortalId, 'hubdb_tables', 1);
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', 5);
    for (let round = 0; round < 3; round++) {
      sim.resetStats();
      // Slow answers: whichever job asks first is still reading when the other asks.
      sim.setLatency(150);
      const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables', 'hubdb_rows'], fetchMode: 'incremental' });
      const conns = [db.connect(2), db.connect(2)];
      const runtimes = await Promise.all(conns.map((sql) => testWorkerRuntime(sql, sim.url, { lanes: 1 })));
      const summaries = await Promise.all(runtimes.map((rt, i) => runWorkerInvocation(rt, `lane-${round}-${i}`)));
      sim.setLatency(0);
      expect(summaries.map((s) => s.claimed), 'each job ran on a lane of its own').toEqual([1, 1]);
      expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
      expect(requests(sim, p).tablesList, `round ${round}`).toBe(1);
      await expectSameAsSim(db.sql, sim, p, 'hubdb_tables');
      await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
      await Promise.all(conns.map((sql) => sql.end({ timeout: 5 })));
    }
  }, 120_000);

  it('exactly one job of a run reads the list, however they race on their own connections; the other uses what it stored', async () => {
    const p = await createUserWithPortal(db.sql);
    const conns = [db.connect(1), db.connect(1)];
    for (let round = 0; round < 20; round++) {
      const { runId, jobs } = await claimedPair(db.sql, p);
      const taken = await Promise.all(jobs.map((job, i) => takeHubdbTablesList(conns[i]!, job, 20)));
      const reader = taken.findIndex((t) => t?.decision === 'read');
      expect(reader, `round ${round}: ${JSON.stringify(taken)}`).toBeGreaterThanOrEqual(0);
      const other = 1 - reader;
      expect(taken[other]).toMatchObject({ decision: 'wait' });
      expect((taken[other] as { waitMs: number }).waitMs).toBeGreaterThan(0);
      expect(await takeHubdbTablesList(conns[other]!, jobs[other]!, 20)).toMatchObject({ decision: 'wait' });
      const pages = [`{"total":1,"results":[{"id":"${round}"}]}`];
      expect(await storeHubdbTablesList(conns[reader]!, jobs[reader]!, pages)).toBeNull();
      const used = await takeHubdbTablesList(conns[other]!, jobs[other]!, 20);
      expect(used).toMatchObject({ decision: 'use', pages });
      // The reader asking again (a later page, a new claim of it) gets the same list.
      expect(await takeHubdbTablesList(conns[reader]!, jobs[reader]!, 20)).toMatchObject({ decision: 'use', pages });
      await db.sql`select public.stop_run(${runId})`;
    }
    await Promise.all(conns.map((sql) => sql.end({ timeout: 5 })));
  }, 60_000);

  it('two reads that both ran (a read lease that ran out) store one list: the second to store uses the first one\'s', async () => {
    const p = await createUserWithPortal(db.sql);
    const conns = [db.connect(1), db.connect(1)];
    const { runId, jobs } = await claimedPair(db.sql, p);
    expect(await takeHubdbTablesList(conns[0]!, jobs[0]!, 20)).toEqual({ decision: 'read' });
    await db.sql`update private.hubdb_tables_lists set read_lease_expires_at = now() - interval '1 second' where portal_id = ${p.portalId}`;
    expect(await takeHubdbTablesList(conns[1]!, jobs[1]!, 20), 'the read lease ran out: the other reads').toEqual({ decision: 'read' });
    const stored = await Promise.all(jobs.map((job, i) => storeHubdbTablesList(conns[i]!, job, [`{"results":[],"by":${i}}`])));
    const first = stored.findIndex((s) => s === null);
    expect(stored[1 - first]).toEqual([`{"results":[],"by":${first}}`]);
    for (const [i, job] of jobs.entries()) expect(await takeHubdbTablesList(conns[i]!, job, 20)).toMatchObject({ decision: 'use', pages: [`{"results":[],"by":${first}}`] });
    await db.sql`select public.stop_run(${runId})`;
    await Promise.all(conns.map((sql) => sql.end({ timeout: 5 })));
  });

  it('a reader that gives up (its read failed) lets the other job read; a fenced-off job gets nothing and stores nothing', async () => {
    const p = await createUserWithPortal(db.sql);
    const { runId, jobs } = await claimedPair(db.sql, p);
    const [a, b] = jobs as [ClaimedJob, ClaimedJob];
    expect(await takeHubdbTablesList(db.sql, a, 20)).toEqual({ decision: 'read' });
    expect(await takeHubdbTablesList(db.sql, b, 20)).toMatchObject({ decision: 'wait' });
    expect(await storeHubdbTablesList(db.sql, a, null)).toBeNull();
    expect(await takeHubdbTablesList(db.sql, b, 20)).toEqual({ decision: 'read' });
    await expireLease(db.sql, a.id);
    expect(await takeHubdbTablesList(db.sql, a, 20)).toBeNull();
    expect(await storeHubdbTablesList(db.sql, a, ['{"results":[]}'])).toBeNull();
    const [row] = await db.sql`select reader_job_id::text, pages from private.hubdb_tables_lists where portal_id = ${p.portalId}`;
    expect(row).toEqual({ reader_job_id: b.id, pages: null });
    expect((await pgError(() => storeHubdbTablesList(db.sql, b, []))).code).toBe('22023');
    expect((await pgError(() => takeHubdbTablesList(db.sql, b, 0))).code).toBe('22023');
    await db.sql`select public.stop_run(${runId})`;
  });

  it('a list stored for an earlier run is never used: the next cycle reads its own and sees what changed', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 600 }, hubdbTables: 3 });
    const first = await sync(db.sql, sim, p, 'full', ['hubdb_tables', 'hubdb_rows']);
    const [stored] = await db.sql`select run_id, pages from private.hubdb_tables_lists where portal_id = ${p.portalId}`;
    expect(stored!.run_id).toBe(first);
    const tables = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key);
    sim.renameTable(p.hubspotPortalId, tables[1]!, 'renamed_later');
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === tables[2]).slice(0, 2).map((r) => r.key));

    // A run of the rows alone (a user's): the earlier run's list is there, and not used.
    sim.resetStats();
    await sync(db.sql, sim, p, 'incremental', ['hubdb_rows']);
    expect(requests(sim, p).tablesList).toBe(1);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
    sim.resetStats();
    const second = await sync(db.sql, sim, p, 'incremental', ['hubdb_tables']);
    expect(requests(sim, p).tablesList).toBe(1);
    await expectSameAsSim(db.sql, sim, p, 'hubdb_tables');
    const [after] = await db.sql`select run_id, pages from private.hubdb_tables_lists where portal_id = ${p.portalId}`;
    expect(after!.run_id).toBe(second);
    expect(after!.pages).not.toEqual(stored!.pages);

    // At the protocol: a job of a new run finding another run's stored list is told to read.
    const { jobs } = await claimedPair(db.sql, p);
    expect(await takeHubdbTablesList(db.sql, jobs[0]!, 20)).toEqual({ decision: 'read' });
  }, 90_000);

  it('a tables list of many pages: a full fetch of tables saves the pages the rows job read, cursor by cursor', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 50 }, hubdbTables: 5 });
    const send = (path: string, qs: Record<string, string> | undefined, token: string) =>
      fetch(`${sim.url}${path}?${new URLSearchParams(qs)}`, { headers: { Authorization: `Bearer ${token}` } }) as Promise<HttpResponse>;
    const transport = new Transport({ tokens: fixedAccessToken(p.token), sleep: async () => {} }, send);
    const stored: string[][] = [];
    const source = async (read: () => Promise<string[]>) => {
      const pages = stored[0] ?? (await read());
      stored[0] = pages;
      return pages;
    };
    sim.resetStats();
    const rowsPager = new HubDbRowsPager(transport, 2, 1000);
    const live = await rowsPager.tables(false, undefined, source);
    expect(live.map((t) => t.id)).toEqual(sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key));
    expect(stored[0]).toHaveLength(3);
    // The tables job's pager (another claim, another isolate): the stored pages, in order, by their cursors.
    const tablesPager = new HubDbRowsPager(transport, 2, 1000);
    const bodies: string[] = [];
    let cursor: string | null = null;
    do {
      const body = await tablesPager.tablesPage(cursor, undefined, source);
      bodies.push(body);
      cursor = (JSON.parse(body) as { paging?: { next?: { after?: string } } }).paging?.next?.after ?? null;
    } while (cursor);
    expect(bodies).toEqual(stored[0]);
    expect(listRequests(sim, p, TABLES_LIST)).toHaveLength(3);
  });
});
