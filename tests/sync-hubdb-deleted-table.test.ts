// A HubDB table deleted in HubSpot takes its rows with it in the cycle that
// tombstones the table (docs/sync.md, "HubDB rows"): scheduled incremental
// cycles at the default sweep cadence (60 minutes, so no sweep in between),
// the table archived or removed for good, with or without a rows job in the
// run; after the cycle that tombstones the table no live row of it is left
// and the change feed lists each as deleted. Real Postgres, the worker, and
// the HubSpot simulator on loopback.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { parseFetchCheckpoint, storedRowsOfPass } from '../functions/worker/fetch-job.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { asUser, type Sql } from '../shared/db.ts';
import { completeFetchJob, saveFetchedPageRaw, storedHubdbRowIds } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import {
  connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, manualClient, runOf, waitUntil, type SimPortal,
} from './support/fetch-fixtures.ts';
import { orchestratorHarness } from './support/orchestrator-harness.ts';
import { useSimulators } from './support/simulators.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const newSim = useSimulators(db);
afterEach(async () => {
  await db.sql`delete from public.sync_schedules`;
});

const SIZES = { site_pages: 20, landing_pages: 10, blog_posts: 20, blog_authors: 4, blog_tags: 6, hubdb_tables: 3, hubdb_rows: 360, url_redirects: 10 };

/** A simulator portal fully synced by a user's full fetch, then on a one-minute schedule with the default sweep cadence. */
async function scheduledPortal(sql: Sql, sim: HubSpotSimulator, types: readonly ContentType[] = CONTENT_TYPES): Promise<SimPortal> {
  const p = await connectSimPortal(sql, sim, { sizes: SIZES, hubdbTables: SIZES.hubdb_tables });
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
  await invokeUntilFinished(await testWorkerRuntime(sql, sim.url), sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  // hubdb_sweep_every_minutes left to its default: the full fetch swept just now, the next sweep is an hour away.
  await sql`insert into public.sync_schedules (portal_id, content_types, incremental_every_minutes)
            values (${p.portalId}, ${types as unknown as string[]}, 1)`;
  const [s] = await sql`select hubdb_sweep_every_minutes from public.sync_schedules where portal_id = ${p.portalId}`;
  expect(s!.hubdb_sweep_every_minutes).toBe(60);
  return p;
}

/**
 * One scheduled incremental cycle: the schedule made due, worker invocations as cron would start
 * them (a lane probes the schedule; a change makes a run, which the lanes work) until none is left.
 * Returns the cycle's run (null: a quiet cycle, no run).
 */
async function scheduledCycle(sql: Sql, sim: HubSpotSimulator, p: SimPortal): Promise<string | null> {
  await sql`update public.sync_schedules set next_incremental_at = now() - interval '1 second', next_full_at = now() + interval '1 day'
             where portal_id = ${p.portalId}`;
  const before = (await sql`select id from public.runs where portal_id = ${p.portalId}`).map((r) => r.id as string);
  const rt = await testWorkerRuntime(sql, sim.url, { lanes: 2 });
  for (let i = 0; i < 10; i++) {
    await runWorkerInvocation(rt, `cycle-${randomUUID().slice(0, 6)}`);
    const [left] = await sql`select count(*)::int as n from public.runs where portal_id = ${p.portalId} and finished_at is null`;
    const [due] = await sql`select next_incremental_at <= now() as due from public.sync_schedules where portal_id = ${p.portalId}`;
    if (left!.n === 0 && !due!.due) {
      const runs = await sql`select id, status from public.runs where portal_id = ${p.portalId} and id <> all (${before}::uuid[])`;
      expect(runs.length).toBeLessThanOrEqual(1);
      if (runs[0]) expect(runs[0].status).toBe('completed');
      return (runs[0]?.id as string | undefined) ?? null;
    }
  }
  throw new Error('the scheduled cycle did not end');
}

/** The feed's end for HubDB rows and tables (the greatest change_seq stored for the portal). */
async function feedEnd(sql: Sql, p: SimPortal): Promise<string> {
  const [row] = await sql`select coalesce(max(change_seq), 0)::text as seq from public.hubspot_content where portal_id = ${p.portalId}`;
  return row!.seq as string;
}

/** The change feed of one type after `cursor`, as the owner reads it under RLS (docs/sync.md): id → label. */
async function feed(sql: Sql, p: SimPortal, type: ContentType, cursor: string): Promise<Map<string, string>> {
  const claims = { sub: p.userId, role: 'authenticated', aud: 'authenticated' };
  const rows = await asUser(sql, claims, (tx) => tx`
    select hubspot_id, case when deleted_at is not null then 'deleted' when inserted_seq > ${cursor}::bigint then 'inserted' else 'updated' end as change
      from public.hubspot_content where portal_id = ${p.portalId} and content_type = ${type} and change_seq > ${cursor}::bigint
     order by change_seq`);
  return new Map(rows.map((r) => [r.hubspot_id as string, r.change as string]));
}

async function liveRowsOf(sql: Sql, p: SimPortal, tableId: string): Promise<string[]> {
  const rows = await sql`select hubspot_id from public.hubspot_content
    where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and deleted_at is null and split_part(hubspot_id, ':', 1) = ${tableId}`;
  return rows.map((r) => r.hubspot_id as string);
}

async function tableIsTombstone(sql: Sql, p: SimPortal, tableId: string): Promise<boolean> {
  const [row] = await sql`select deleted_at is not null as dead from public.hubspot_content
    where portal_id = ${p.portalId} and content_type = 'hubdb_tables' and hubspot_id = ${tableId}`;
  return row!.dead as boolean;
}

/**
 * Runs scheduled cycles until the table is a tombstone (at most three), checking after each that the
 * table and its rows went together; then that the feed after `cursor` lists each of the rows deleted.
 */
async function expectRowsGoWithTheTable(sql: Sql, sim: HubSpotSimulator, p: SimPortal, tableId: string, rows: string[], cursor: string) {
  let runId: string | null = null;
  for (let cycle = 1; ; cycle++) {
    runId = await scheduledCycle(sql, sim, p);
    const dead = await tableIsTombstone(sql, p, tableId);
    const live = await liveRowsOf(sql, p, tableId);
    if (dead) {
      expect(live, `cycle ${cycle} tombstoned the table: its rows too`).toEqual([]);
      break;
    }
    expect(live.length, `cycle ${cycle}: the table is live, its rows too`).toBe(rows.length);
    expect(cycle, 'the table is tombstoned within three cycles').toBeLessThan(3);
  }
  const changes = await feed(sql, p, 'hubdb_rows', cursor);
  const deleted = [...changes].filter(([, change]) => change === 'deleted').map(([id]) => id).sort();
  expect(deleted).toEqual([...rows].sort());
  expect((await feed(sql, p, 'hubdb_tables', cursor)).get(tableId)).toBe('deleted');
  await expectSameAsSim(sql, sim, p, 'hubdb_tables');
  await expectSameAsSim(sql, sim, p, 'hubdb_rows');
  return runId!;
}

describe('a HubDB table deleted in HubSpot', () => {
  it.each(['archived', 'removed for good'] as const)(
    'scheduled cycles at the default sweep cadence: the table %s, its rows are tombstones in the cycle that tombstones it, the feed lists each deleted',
    async (how) => {
      const sim = await newSim();
      const p = await scheduledPortal(db.sql, sim);
      expect(await scheduledCycle(db.sql, sim, p), 'a quiet cycle first: no run').toBeNull();
      const tableId = sim.items(p.hubspotPortalId, 'hubdb_tables')[1]!.key;
      const rows = await liveRowsOf(db.sql, p, tableId);
      expect(rows.length).toBeGreaterThan(100);
      const cursor = await feedEnd(db.sql, p);
      if (how === 'archived') sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [tableId]);
      else sim.purgeItems(p.hubspotPortalId, 'hubdb_tables', [tableId]);

      const run = await expectRowsGoWithTheTable(db.sql, sim, p, tableId, rows, cursor);
      // Nothing else changed for the rows: no rows job in the cycle, and no HubSpot request for them.
      const jobs = await jobsOf(db.sql, run);
      expect(jobs.map((j) => j.content_type).filter((t) => t !== null)).toEqual(['hubdb_tables']);
      const tablesJob = jobs.find((j) => j.content_type === 'hubdb_tables')!;
      expect(tablesJob.result).toMatchObject({ deleted: 1, hubdbRowsDeleted: rows.length });
      // The next cycle is quiet again.
      expect(await scheduledCycle(db.sql, sim, p)).toBeNull();
    },
    120_000,
  );

  it('a cycle whose run has a rows job too (a row of another table changed, both jobs on two lanes): the rows of the gone table go, the changed row is stored', async () => {
    const sim = await newSim();
    const p = await scheduledPortal(db.sql, sim);
    const [first, gone] = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key);
    const rows = await liveRowsOf(db.sql, p, gone!);
    const cursor = await feedEnd(db.sql, p);
    const touched = sim.touchItems(p.hubspotPortalId, 'hubdb_rows', sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === first).slice(0, 2).map((r) => r.key));
    sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [gone!]);

    const run = await expectRowsGoWithTheTable(db.sql, sim, p, gone!, rows, cursor);
    const jobs = await jobsOf(db.sql, run);
    expect(jobs.map((j) => j.content_type).filter((t) => t !== null).sort()).toEqual(['hubdb_rows', 'hubdb_tables']);
    const rowsJob = jobs.find((j) => j.content_type === 'hubdb_rows')!;
    expect(rowsJob.checkpoint, 'no sweep in between: the default cadence').toMatchObject({ hubdbSweep: false });
    const changes = await feed(db.sql, p, 'hubdb_rows', cursor);
    for (const key of touched) expect(changes.get(key)).toBe('updated');
  }, 120_000);

  it('a user\'s fetch of HubDB tables alone (no rows job at all) takes the gone table\'s rows too; a table gone with no rows stored deletes none', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 200 }, hubdbTables: 2 });
    const full = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables', 'hubdb_rows'] });
    await invokeUntilFinished(await testWorkerRuntime(db.sql, sim.url), db.sql, full.runId!, { maxInvocations: 10 });
    const [gone, kept] = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key);
    const rows = await liveRowsOf(db.sql, p, gone!);
    const keptRows = await liveRowsOf(db.sql, p, kept!);
    const cursor = await feedEnd(db.sql, p);
    sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [gone!]);
    const [empty] = sim.addItems(p.hubspotPortalId, 'hubdb_tables', 1);

    const fetchTables = async () => {
      const r = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables'], fetchMode: 'incremental' });
      await invokeUntilFinished(await testWorkerRuntime(db.sql, sim.url), db.sql, r.runId!, { maxInvocations: 10 });
      expect((await runOf(db.sql, r.runId!)).status).toBe('completed');
      return (await jobsOf(db.sql, r.runId!))[0]!;
    };
    expect((await fetchTables()).result).toMatchObject({ mode: 'full', added: 1, deleted: 1, hubdbRowsDeleted: rows.length });
    // The sync's summary counts them too.
    const api = await orchestratorHarness(db.sql, sim.url);
    const status = await api.handler(api.request('GET', { token: await api.keys.signUserToken(p.userId), query: `/sync?portalId=${p.portalId}` }));
    expect(status.status).toBe(200);
    const { lastSync } = (await status.json()) as { lastSync: { changes: Record<string, number>; changesByType: Record<string, Record<string, number>> } };
    expect(lastSync.changes).toEqual({ added: 1, updated: 0, deleted: 1 + rows.length });
    expect(lastSync.changesByType).toEqual({ hubdb_tables: { added: 1, updated: 0, deleted: 1 }, hubdb_rows: { added: 0, updated: 0, deleted: rows.length } });
    expect(await liveRowsOf(db.sql, p, gone!)).toEqual([]);
    expect((await liveRowsOf(db.sql, p, kept!)).sort()).toEqual(keptRows.sort());
    const deleted = [...(await feed(db.sql, p, 'hubdb_rows', cursor))].filter(([, c]) => c === 'deleted').map(([id]) => id).sort();
    expect(deleted).toEqual([...rows].sort());

    // The new table, never read for rows, goes with none stored; a table job that deletes no table says nothing of rows.
    sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [empty!]);
    expect((await fetchTables()).result).toMatchObject({ deleted: 1, hubdbRowsDeleted: 0 });
    sim.renameTable(p.hubspotPortalId, kept!, 'renamed');
    const quiet = (await fetchTables()).result as Record<string, unknown>;
    expect(quiet).toMatchObject({ updated: 1, deleted: 0 });
    expect(quiet).not.toHaveProperty('hubdbRowsDeleted');
  }, 120_000);

  it('a page of the rows job being saved when the tables job completes: the rows\' tombstones wait for it and are numbered after its writes', async () => {
    const { sim, p, gone, rows, touched, tablesJob, rowsJob } = await pairWithGoneTable();
    const rowsPage = await rowsPageOf(sim, p, rowsJob);
    const { waited, completed } = await completeWhileRowsJobHeld(tablesJob,
      async (tx) => { expect(await saveFetchedPageRaw(tx, rowsJob, rowsPage.body, rowsPage.context)).toMatchObject({ updated: 1 }); },
      async () => {});
    expect(waited, 'the completion waits while a page of the rows job is being saved').toBe(true);
    expect(completed).toBe(true);
    const [order] = await db.sql`select
        (select change_seq from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and hubspot_id = ${touched}) as page_seq,
        (select min(change_seq) from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'hubdb_rows'
          and split_part(hubspot_id, ':', 1) = ${gone} and deleted_at is not null) as first_tombstone_seq`;
    expect(BigInt(order!.first_tombstone_seq as string)).toBeGreaterThan(BigInt(order!.page_seq as string));
    expect(await liveRowsOf(db.sql, p, gone)).toEqual([]);
    expect(rows.length).toBeGreaterThan(0);
  }, 120_000);

  it('the rows job sweeping the gone table while the tables job completes (two updates of the rows job, the second checking its run): no deadlock, the sweep takes the rows first', async () => {
    const { sim, p, gone, rows, tablesJob, rowsJob } = await pairWithGoneTable();
    // The changed pass (one page), then the sweep: the gone table is swept as no longer live.
    const changed = await rowsPageOf(sim, p, rowsJob);
    expect(parseFetchCheckpoint((await saveFetchedPageRaw(db.sql, rowsJob, changed.body, changed.context))!.checkpoint).sync?.phase).toBe('sweep');
    const sweep = await rowsPageOf(sim, p, rowsJob);
    expect(sweep.context).toMatchObject({ tableId: gone });
    // The holder has locked its job (a save's first step) when the completion comes; then it saves the sweep's
    // page: advance_fetch_job and save_swept_table each update the job, and the second checks the run's key.
    const { waited, completed } = await completeWhileRowsJobHeld(tablesJob,
      async (tx) => { await tx`select 1 from public.jobs where id = ${rowsJob.id} for update`; },
      async (tx) => { expect(await saveFetchedPageRaw(tx, rowsJob, sweep.body, sweep.context)).toMatchObject({ deleted: rows.length }); });
    expect(waited).toBe(true);
    expect(completed).toBe(true);
    const [tablesResult] = await db.sql`select result from public.jobs where id = ${tablesJob.id}`;
    expect(tablesResult!.result).toMatchObject({ deleted: 1, hubdbRowsDeleted: 0 });
    expect(await liveRowsOf(db.sql, p, gone)).toEqual([]);
  }, 120_000);
});

/**
 * A portal with two HubDB tables synced in full; then in HubSpot a row of the first changed and the
 * second table deleted; an incremental run of both HubDB types with both jobs claimed, the tables
 * job's one page saved (what is left of it: its completion).
 */
async function pairWithGoneTable() {
  const sim = await newSim();
  const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 200 }, hubdbTables: 2 });
  const full = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables', 'hubdb_rows'] });
  await invokeUntilFinished(await testWorkerRuntime(db.sql, sim.url), db.sql, full.runId!, { maxInvocations: 10 });
  const [kept, gone] = sim.items(p.hubspotPortalId, 'hubdb_tables').map((t) => t.key) as [string, string];
  const rows = await liveRowsOf(db.sql, p, gone);
  const [touched] = sim.touchItems(p.hubspotPortalId, 'hubdb_rows', sim.items(p.hubspotPortalId, 'hubdb_rows').filter((r) => r.tableId === kept).slice(0, 1).map((r) => r.key)) as [string];
  sim.deleteItems(p.hubspotPortalId, 'hubdb_tables', [gone]);
  await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['hubdb_tables', 'hubdb_rows'], fetchMode: 'incremental' });
  const held = [(await claimNextJob(db.sql, 'lane-a', ['fetch']))!, (await claimNextJob(db.sql, 'lane-b', ['fetch']))!];
  const tablesJob = held.find((j) => j.contentType === 'hubdb_tables')!;
  const rowsJob = held.find((j) => j.contentType === 'hubdb_rows')!;
  const tablesPage = await manualClient(sim, p).fetchRawPage('hubdb_tables', null);
  expect(parseFetchCheckpoint((await saveFetchedPageRaw(db.sql, tablesJob, tablesPage.body, tablesPage.context))!.checkpoint).finished).toBe(true);
  return { sim, p, gone, rows, touched, tablesJob, rowsJob };
}

/**
 * Completes the tables job on a connection of its own while another holds the rows job in an open
 * transaction (`hold`: what that holder did first); once the completion waits for it (or has ended),
 * runs `then` in that transaction and commits. Whether the completion waited, and its answer.
 */
async function completeWhileRowsJobHeld(tablesJob: ClaimedJob, hold: (tx: Sql) => Promise<void>, then: (tx: Sql) => Promise<void>) {
  const holderConn = db.connect(1);
  const completeConn = db.connect(1);
  try {
    const [{ pid }] = (await completeConn`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    let go!: () => void;
    const resume = new Promise<void>((resolve) => { go = resolve; });
    let heldNow!: () => void;
    const holding = new Promise<void>((resolve) => { heldNow = resolve; });
    const holder = holderConn.begin(async (tx) => {
      await hold(tx as unknown as Sql);
      heldNow();
      await resume;
      await then(tx as unknown as Sql);
    });
    let completion: Promise<boolean> | null = null;
    try {
      await Promise.race([holding, holder]);
      let ended = false;
      completion = completeFetchJob(completeConn, tablesJob).finally(() => { ended = true; });
      await waitUntil(async () => ended || (await db.sql`select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = ${pid}`)[0]!.waiting === true,
        10_000, 'the completion to wait for the rows job');
      const waited = !ended;
      go();
      await holder;
      return { waited, completed: await completion };
    } finally {
      go();
      await Promise.all([holder.catch(() => null), completion?.catch(() => null)]);
    }
  } finally {
    await db.sql`select public.stop_run(r.id) from public.runs r where r.finished_at is null`;
    await Promise.all([holderConn.end({ timeout: 5 }), completeConn.end({ timeout: 5 })]);
  }
}

/** The held rows job's next page from its stored checkpoint, as fetch-job.ts asks for it. */
async function rowsPageOf(sim: HubSpotSimulator, p: SimPortal, job: ClaimedJob) {
  const [row] = await db.sql`select checkpoint from public.jobs where id = ${job.id}`;
  const cp = parseFetchCheckpoint(row!.checkpoint);
  const sync = cp.sync ? {
    ...cp.sync,
    storedRows: (await storedRowsOfPass(db.sql, job.portalId, cp.sync)) ?? undefined,
    storedRowIds: (tableId: string) => storedHubdbRowIds(db.sql, job.portalId, tableId),
  } : null;
  return manualClient(sim, p).fetchRawPage('hubdb_rows', cp.after, undefined, sync);
}
