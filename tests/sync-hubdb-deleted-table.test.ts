// A HubDB table deleted in HubSpot takes its rows with it in the cycle that
// tombstones the table (docs/sync.md, "HubDB rows"): scheduled incremental
// cycles at the default sweep cadence (60 minutes, so no sweep in between),
// the table archived or removed for good, with or without a rows job in the
// run; after the cycle that tombstones the table no live row of it is left
// and the change feed lists each as deleted. Real Postgres, the worker, and
// the HubSpot simulator on loopback.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { asUser, type Sql } from '../shared/db.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../scripts/hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, runOf, type SimPortal } from './support/fetch-fixtures.ts';
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
});
