// The HubDB tables list, read once per fetch run (docs/sync.md, decision 0045):
// how many requests a quiet incremental cycle costs, that the hubdb_tables and
// hubdb_rows jobs of one run share one read whichever comes first (racing on
// their own connections included), and that a list read for an earlier run is
// never used. Real Postgres and the HubSpot simulator on loopback.
import { afterEach, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../scripts/hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, invokeUntilFinished, listRequests, runOf, stopAllRuns, type SimPortal } from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const sims: HubSpotSimulator[] = [];

afterEach(async () => {
  await stopAllRuns(db.sql);
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function newSim(): Promise<HubSpotSimulator> {
  const sim = await startHubSpotSimulator();
  sims.push(sim);
  return sim;
}

const SIZES = { site_pages: 40, landing_pages: 20, blog_posts: 60, blog_authors: 5, blog_tags: 8, hubdb_tables: 4, hubdb_rows: 400, url_redirects: 30 };
const TABLES_LIST = '/cms/v3/hubdb/tables';

/** Runs a fetch of the types to its end through worker invocations; returns the run id. */
async function sync(sql: Sql, sim: HubSpotSimulator, p: SimPortal, mode: 'full' | 'incremental', types: readonly ContentType[] = CONTENT_TYPES, concurrency = 2): Promise<string> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: types, fetchMode: mode });
  expect(r.duplicateTypes).toEqual([]);
  const rt = await testWorkerRuntime(sql, sim.url, { concurrency });
  await invokeUntilFinished(rt, sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  return r.runId!;
}

/** The portal's CMS requests since the last reset: the tables list's and all of them. */
function requests(sim: HubSpotSimulator, p: SimPortal): { tablesList: number; total: number } {
  return { tablesList: listRequests(sim, p, TABLES_LIST).length, total: sim.requestLog().filter((e) => e.endpoint.includes('/cms/')).length };
}

describe('the HubDB tables list of a fetch run', () => {
  it('a quiet incremental cycle reads the tables list once: two listings per other type and one request for both HubDB jobs', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: SIZES, hubdbTables: SIZES.hubdb_tables });
    await sync(db.sql, sim, p, 'full');
    sim.resetStats();
    await sync(db.sql, sim, p, 'incremental', CONTENT_TYPES, 4);
    const quiet = requests(sim, p);
    console.log('quiet incremental cycle', JSON.stringify(quiet), JSON.stringify(sim.stats().byEndpoint));
    for (const type of CONTENT_TYPES) await expectSameAsSim(db.sql, sim, p, type);
  }, 90_000);
});
