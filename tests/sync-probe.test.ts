// A scheduled cycle probes first (docs/decisions/0046): one probe job asks
// HubSpot whether each type changed since its marks and adds fetch jobs only
// for those that did. A quiet cycle is one job; what changed (edits, archives,
// HubDB rows and tables, rows lost without a stamp on a sweep cycle) still
// ends up stored exactly; CMS types near a change are probed by their overlap
// window (late writes caught), HubDB rows near one by each recent table's
// window and HubDB tables by the whole list (decision 0055); a probe
// in flight makes a second one a duplicate; a fenced-off or malformed report
// changes nothing. Real Postgres and the HubSpot simulator on loopback.
import { describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import type { Sql } from '../shared/db.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';
import { completeProbeJob, storedHubdbRows } from '../shared/sql/fetch.ts';
import { claimNextJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, invokeUntilFinished, jobsOf, runOf, type SimPortal } from './support/fetch-fixtures.ts';
import { pgError } from './support/queue-fixtures.ts';
import { useSimulators } from './support/simulators.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const newSim = useSimulators(db);

const SIZES = { site_pages: 40, landing_pages: 20, blog_posts: 60, blog_authors: 5, blog_tags: 8, hubdb_tables: 3, hubdb_rows: 150, url_redirects: 30 };
const CMS_TYPES = CONTENT_TYPES.filter((t) => t !== 'hubdb_tables' && t !== 'hubdb_rows');

/** Creates a run and works it to its end through worker invocations; returns the run id. */
async function cycle(sql: Sql, sim: HubSpotSimulator, p: SimPortal, mode: 'full' | 'incremental', trigger: 'user' | 'schedule'): Promise<string> {
  const r = await createRun(sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES, fetchMode: mode, trigger });
  expect(r.duplicateTypes).toEqual([]);
  const rt = await testWorkerRuntime(sql, sim.url, { lanes: 2 });
  await invokeUntilFinished(rt, sql, r.runId!, { maxInvocations: 10 });
  expect((await runOf(sql, r.runId!)).status).toBe('completed');
  return r.runId!;
}

/** A portal fully synced (its marks are HubSpot's seed times: long settled). */
async function syncedPortal(sql: Sql, sim: HubSpotSimulator, hubdbSweepEveryMinutes = 60): Promise<SimPortal> {
  const p = await connectSimPortal(sql, sim, { sizes: SIZES, hubdbTables: SIZES.hubdb_tables });
  await sql`insert into public.sync_schedules (portal_id, content_types, incremental_every_minutes, hubdb_sweep_every_minutes)
            values (${p.portalId}, ${CONTENT_TYPES as unknown as string[]}, 15, ${hubdbSweepEveryMinutes})`;
  await cycle(sql, sim, p, 'full', 'user');
  return p;
}

/** The simulator's name of the HubDB tables list. */
const TABLES_LIST = `GET ${LIST_PATHS.hubdb_tables}`;
const cmsRequests = (sim: HubSpotSimulator) => sim.requestLog().filter((e) => e.endpoint.includes('/cms/'));

async function expectAllSameAsSim(sim: HubSpotSimulator, p: SimPortal): Promise<void> {
  for (const type of CONTENT_TYPES) await expectSameAsSim(db.sql, sim, p, type);
}

/** A synced portal whose type changed 10 s ago, and its scheduled cycle's probe, claimed: asked for the type's window. */
async function probeNearChange(type: 'site_pages' | 'hubdb_rows') {
  const sim = await newSim();
  const p = await syncedPortal(db.sql, sim);
  await db.sql`update public.sync_marks set high_water = now() - interval '10 seconds' where portal_id = ${p.portalId} and content_type = ${type}`;
  const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: [type], fetchMode: 'incremental', trigger: 'schedule' });
  const probe = (await claimNextJob(db.sql, 'probe-lane', ['probe']))!;
  expect((probe.checkpoint as { types: Record<string, { windowAfter?: string }> }).types[type]!.windowAfter).toBeDefined();
  return { sim, p, run, probe };
}

describe('a scheduled cycle probes first', () => {
  it('a quiet cycle is one probe job: 2 one-item listings per CMS type, the tables list once, nothing stored, marks stamped', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    const before = await db.sql`select content_type, high_water, archived_high_water, last_incremental_at from public.sync_marks where portal_id = ${p.portalId} order by 1`;
    expect(before.every((m) => m.archived_high_water !== null)).toBe(true);
    sim.resetStats();
    const run = await cycle(db.sql, sim, p, 'incremental', 'schedule');

    const jobs = await jobsOf(db.sql, run);
    expect(jobs.map((j) => [j.kind, j.content_type, j.status])).toEqual([['probe', null, 'completed']]);
    expect(jobs[0]!.result).toMatchObject({ mode: 'probe', probed: [...CONTENT_TYPES].sort(), changed: [] });
    const r = await runOf(db.sql, run);
    expect([r.jobs_total, r.jobs_completed, r.quiet]).toEqual([1, 1, true]);
    const requests = cmsRequests(sim);
    expect(requests.length).toBe(2 * CMS_TYPES.length + 1);
    expect(requests.filter((e) => e.endpoint === TABLES_LIST).length).toBe(1);
    expect(requests.filter((e) => !e.endpoint.includes('/hubdb/')).every((e) => e.limit === '1')).toBe(true);

    const after = await db.sql`select content_type, high_water, archived_high_water, last_incremental_at from public.sync_marks where portal_id = ${p.portalId} order by 1`;
    for (const [i, m] of after.entries()) {
      expect([m.high_water, m.archived_high_water], `${m.content_type}: a probe moves no mark`).toEqual([before[i]!.high_water, before[i]!.archived_high_water]);
      expect(m.last_incremental_at, `${m.content_type}: synced now`).not.toBeNull();
    }
    await expectAllSameAsSim(sim, p);
  });

  it('changes of every kind get fetch jobs in the same run, only for their types, and are stored exactly; the tables list is read once', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    sim.touchItems(p.hubspotPortalId, 'site_pages', 2);
    sim.deleteItems(p.hubspotPortalId, 'blog_posts', 1);
    const table = sim.items(p.hubspotPortalId, 'hubdb_tables')[0]!;
    const row = sim.items(p.hubspotPortalId, 'hubdb_rows').find((r) => r.tableId === table.id)!;
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', [row.key]);
    sim.resetStats();
    const run = await cycle(db.sql, sim, p, 'incremental', 'schedule');

    const jobs = await jobsOf(db.sql, run);
    const probe = jobs.find((j) => j.kind === 'probe')!;
    expect(probe.result).toMatchObject({ changed: ['blog_posts', 'hubdb_rows', 'hubdb_tables', 'site_pages'] });
    expect(jobs.filter((j) => j.kind === 'fetch').map((j) => j.content_type).sort()).toEqual(['blog_posts', 'hubdb_rows', 'hubdb_tables', 'site_pages']);
    const r = await runOf(db.sql, run);
    expect([r.jobs_total, r.jobs_completed, r.status, r.quiet]).toEqual([5, 5, 'completed', false]);
    expect(cmsRequests(sim).filter((e) => e.endpoint === TABLES_LIST).length, 'the probe\'s list serves the jobs it added').toBe(1);
    await expectAllSameAsSim(sim, p);
  });

  it('on a sweep cycle a table holding fewer rows than are stored live is a change (no stamp needed); between sweeps it is not', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim, 60);
    // A stored live row HubSpot no longer holds, with no table stamp to tell (what only a sweep finds).
    const [stored] = await db.sql`select * from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and deleted_at is null limit 1`;
    const ghost = `${String(stored!.hubspot_id).split(':')[0]}:999999999`;
    await db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
                 values (${p.portalId}, ${stored!.owner_id}, 'hubdb_rows', ${ghost}, ${stored!.data}, ${stored!.hubspot_updated_at})`;
    const counts = await storedHubdbRows(db.sql, p.portalId);

    // The full sync just swept: not a sweep cycle, the probe finds nothing.
    const between = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    expect((await jobsOf(db.sql, between)).map((j) => j.kind)).toEqual(['probe']);

    // The sweep's time has come.
    await db.sql`update public.sync_marks set last_sweep_at = now() - interval '2 hours' where portal_id = ${p.portalId} and content_type = 'hubdb_rows'`;
    const sweep = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    const jobs = await jobsOf(db.sql, sweep);
    expect(jobs.find((j) => j.kind === 'probe')!.result).toMatchObject({ changed: ['hubdb_rows'] });
    // The rows job starts with the probe's counts of stored rows: counted once for both.
    expect(jobs.find((j) => j.content_type === 'hubdb_rows')!.checkpoint).toMatchObject({ hubdbSweep: true, storedRows: counts });
    const [gone] = await db.sql`select deleted_at from public.hubspot_content where portal_id = ${p.portalId} and hubspot_id = ${ghost}`;
    expect(gone!.deleted_at).not.toBeNull();
    await expectSameAsSim(db.sql, sim, p, 'hubdb_rows');
  });

  it('a CMS type changed within twice the overlap is probed by its overlap window: quiet, a late-committing write and a new edit; a user\'s incremental is never probed', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    sim.touchItems(p.hubspotPortalId, 'landing_pages', 1); // now: the mark moves next to the present
    await cycle(db.sql, sim, p, 'incremental', 'schedule');
    const [mark] = await db.sql`select high_water, high_water > now() - interval '240 seconds' as recent
                                  from public.sync_marks where portal_id = ${p.portalId} and content_type = 'landing_pages'`;
    expect(mark!.recent).toBe(true);

    // Quiet: the window's page holds just what is stored, so the cycle is one probe job.
    sim.resetStats();
    const quiet = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    const quietJobs = await jobsOf(db.sql, quiet);
    expect(quietJobs.map((j) => j.kind)).toEqual(['probe']);
    expect((quietJobs[0]!.checkpoint as { types: Record<string, { windowAfter?: string }> }).types.landing_pages!.windowAfter).toBeDefined();
    expect(quietJobs[0]!.result).toMatchObject({ probed: [...CONTENT_TYPES].sort(), changed: [] });
    const landing = cmsRequests(sim).filter((e) => e.endpoint.includes('landing-pages'));
    expect(landing.map((e) => e.limit).sort(), 'the window\'s page and the archived total').toEqual(['1', '100']);
    expect(cmsRequests(sim).length, 'no more requests than a quiet cycle of settled marks').toBe(2 * CMS_TYPES.length + 1);
    expect((await runOf(db.sql, quiet)).quiet).toBe(true);

    // A late-committing write: stamped inside the window, before the mark, visible only now. Asking
    // "anything after the mark?" would miss it; the window's page has an item the store lacks.
    const [late] = sim.touchItems(p.hubspotPortalId, 'landing_pages', 1, (mark!.high_water as Date).getTime() - 30_000);
    const caught = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    expect((await jobsOf(db.sql, caught)).filter((j) => j.kind === 'fetch').map((j) => j.content_type)).toEqual(['landing_pages']);
    const [stored] = await db.sql`select hubspot_updated_at from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'landing_pages' and hubspot_id = ${late!}`;
    expect((stored!.hubspot_updated_at as Date).getTime()).toBe((mark!.high_water as Date).getTime() - 30_000);

    // A new edit of another recent type's item, and a quiet cycle again after both were stored.
    sim.touchItems(p.hubspotPortalId, 'landing_pages', 1);
    const edited = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    expect((await jobsOf(db.sql, edited)).filter((j) => j.kind === 'fetch').map((j) => j.content_type)).toEqual(['landing_pages']);
    expect((await jobsOf(db.sql, await cycle(db.sql, sim, p, 'incremental', 'schedule'))).map((j) => j.kind)).toEqual(['probe']);
    await expectAllSameAsSim(sim, p);

    const user = await cycle(db.sql, sim, p, 'incremental', 'user');
    expect((await jobsOf(db.sql, user)).map((j) => j.kind)).toEqual(CONTENT_TYPES.map(() => 'fetch'));
  });

  it('HubDB near its last change is probed too: rows by the window of each table updated since (quiet, a late-committing row, a new edit), tables by the whole list (a rename)', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', 1); // now: the rows' mark moves next to the present
    await cycle(db.sql, sim, p, 'incremental', 'schedule');
    const [mark] = await db.sql`select high_water, high_water > now() - interval '240 seconds' as recent
                                  from public.sync_marks where portal_id = ${p.portalId} and content_type = 'hubdb_rows'`;
    expect(mark!.recent).toBe(true);
    const fetched = async (runId: string) => (await jobsOf(db.sql, runId)).filter((j) => j.kind === 'fetch').map((j) => j.content_type).sort();

    // Quiet: one probe job, which read the window of the one table updated since.
    sim.resetStats();
    const quiet = await cycle(db.sql, sim, p, 'incremental', 'schedule');
    const quietJobs = await jobsOf(db.sql, quiet);
    expect(quietJobs.map((j) => j.kind)).toEqual(['probe']);
    expect((quietJobs[0]!.checkpoint as { types: Record<string, { windowAfter?: string }> }).types.hubdb_rows!.windowAfter).toBeDefined();
    expect(quietJobs[0]!.result).toMatchObject({ probed: [...CONTENT_TYPES].sort(), changed: [] });
    expect(sim.requestLog().filter((e) => e.endpoint.endsWith('/rows')).length, 'one window: the touched table').toBe(1);
    expect((await runOf(db.sql, quiet)).quiet).toBe(true);

    // A late-committing row: stamped inside the window, before the mark, visible only now.
    const [late] = sim.touchItems(p.hubspotPortalId, 'hubdb_rows', 1, (mark!.high_water as Date).getTime() - 30_000);
    expect(await fetched(await cycle(db.sql, sim, p, 'incremental', 'schedule'))).toContain('hubdb_rows');
    const [stored] = await db.sql`select hubspot_updated_at from public.hubspot_content
                                   where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and hubspot_id = ${late!}`;
    expect((stored!.hubspot_updated_at as Date).getTime()).toBe((mark!.high_water as Date).getTime() - 30_000);

    // A new edit is caught; then quiet again.
    sim.touchItems(p.hubspotPortalId, 'hubdb_rows', 1);
    expect(await fetched(await cycle(db.sql, sim, p, 'incremental', 'schedule'))).toEqual(['hubdb_rows', 'hubdb_tables']);
    expect((await jobsOf(db.sql, await cycle(db.sql, sim, p, 'incremental', 'schedule'))).map((j) => j.kind)).toEqual(['probe']);

    // A table renamed near the change: the list differs from the store, so the tables are fetched; no row is.
    const [table] = await db.sql`select hubspot_id from public.hubspot_content
                                  where portal_id = ${p.portalId} and content_type = 'hubdb_tables' and deleted_at is null limit 1`;
    sim.renameTable(p.hubspotPortalId, String(table!.hubspot_id), 'renamed_near_a_change');
    expect(await fetched(await cycle(db.sql, sim, p, 'incremental', 'schedule'))).toEqual(['hubdb_tables']);
    expect((await jobsOf(db.sql, await cycle(db.sql, sim, p, 'incremental', 'schedule'))).map((j) => j.kind)).toEqual(['probe']);
    await expectAllSameAsSim(sim, p);
  });

  it('a probe in flight makes the next scheduled cycle a duplicate; a user\'s fetch of a probed type runs beside it and the probe adds no second job', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    const first = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES, fetchMode: 'incremental', trigger: 'schedule' });
    expect(first.runId).not.toBeNull();
    const second = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: CONTENT_TYPES, fetchMode: 'incremental', trigger: 'schedule' });
    expect([second.runId, [...second.duplicateTypes].sort()]).toEqual([null, [...CONTENT_TYPES].sort()]);

    const user = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['site_pages'], fetchMode: 'full' });
    expect(user.createdTypes).toEqual(['site_pages']);
    sim.touchItems(p.hubspotPortalId, 'site_pages', 1);
    const probe = (await claimNextJob(db.sql, 'probe-lane', ['probe']))!;
    expect([probe.kind, probe.contentType]).toEqual(['probe', null]);
    const answers = Object.fromEntries(CMS_TYPES.map((t) => [t, { changed: t === 'site_pages' ? 1 : 0, archived: 0 }]));
    const noList = await pgError(() => completeProbeJob(db.sql, probe, answers));
    expect([noList.code, noList.message]).toEqual(['22023', 'complete_probe_job: a probe of HubDB needs every page of the tables list']);
    // The pages without their summary (which completeProbeJob adds): the decision never parses the pages (decision 0062).
    const noSummary = await pgError(() => db.sql`select public.complete_probe_job(${probe.id}, ${probe.fencingToken}, ${db.sql.json(answers as never)}, ${['{"results":[]}']}::text[])`);
    expect([noSummary.code, noSummary.message]).toEqual(['22023', 'complete_probe_job: a probe of HubDB needs the tables list\'s summary: {hubdb_tables: {tables: [{id, updatedAt, rowCount}]}}']);
    // An empty tables list where 3 tables are stored: HubDB tables changed (their rows: not a sweep cycle, no table updated).
    expect(await completeProbeJob(db.sql, probe, answers, ['{"results":[]}'])).toBe(true);
    const jobs = await jobsOf(db.sql, first.runId!);
    expect(jobs.filter((j) => j.kind === 'fetch').map((j) => j.content_type), 'site_pages has the user\'s job').toEqual(['hubdb_tables']);
    expect((await runOf(db.sql, first.runId!)).jobs_total).toBe(2);
    const [list] = await db.sql`select run_id, pages from private.hubdb_tables_lists where portal_id = ${p.portalId}`;
    expect([list!.run_id, list!.pages], 'the list the probe read is the run\'s').toEqual([first.runId, ['{"results":[]}']]);
  });

  it('a fenced-off report and one missing a type\'s answers change nothing', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['site_pages', 'blog_posts'], fetchMode: 'incremental', trigger: 'schedule' });
    const probe = (await claimNextJob(db.sql, 'probe-lane', ['probe']))!;
    const changed = { site_pages: { changed: 3, archived: 0 }, blog_posts: { changed: 0, archived: 1 } };
    expect(await completeProbeJob(db.sql, { ...probe, fencingToken: String(BigInt(probe.fencingToken) + 1000n) }, changed)).toBe(false);
    const err = await pgError(() => completeProbeJob(db.sql, probe, { site_pages: { changed: 3, archived: 0 } }));
    expect([err.code, err.message]).toEqual(['22023', 'complete_probe_job: every CMS type probed needs its {changed, archived} totals ({window, archived} near its last change)']);
    const jobs = await jobsOf(db.sql, run.runId!);
    expect(jobs.map((j) => [j.kind, j.status])).toEqual([['probe', 'running']]);
    expect(await completeProbeJob(db.sql, probe, changed)).toBe(true);
    expect((await jobsOf(db.sql, run.runId!)).filter((j) => j.kind === 'fetch').map((j) => j.content_type).sort()).toEqual(['blog_posts', 'site_pages']);
  });

  it('a window answer is held to a listing page: malformed ones are refused and change nothing; a whole page of stored items is quiet', async () => {
    const { p, run, probe } = await probeNearChange('site_pages');
    for (const answer of [{ window: '[]', archived: 0 }, { window: '{"total":1}', archived: 0 }, { window: '{"total":1,"results":[{"name":"no id"}]}', archived: 0 },
      { changed: 0, archived: 0 }]) {
      const err = await pgError(() => completeProbeJob(db.sql, probe, { site_pages: answer }));
      expect(err.code, JSON.stringify(answer)).toBe('22023');
    }
    expect((await pgError(() => completeProbeJob(db.sql, probe, { site_pages: { window: '{not json', archived: 0 } }))).code).toBe('22P02');
    expect((await jobsOf(db.sql, run.runId!)).map((j) => [j.kind, j.status])).toEqual([['probe', 'running']]);

    const stored = await db.sql`select data from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'site_pages' and deleted_at is null
                                  order by hubspot_updated_at desc limit 2`;
    const page = JSON.stringify({ total: 2, results: stored.map((r) => r.data) });
    expect(await completeProbeJob(db.sql, probe, { site_pages: { window: page, archived: 0 } })).toBe(true);
    const jobs = await jobsOf(db.sql, run.runId!);
    expect(jobs.map((j) => [j.kind, j.status])).toEqual([['probe', 'completed']]);
    expect(jobs[0]!.result).toMatchObject({ changed: [] });
  });

  it('HubDB rows\' windows are held to listing pages, one per recent table: malformed or missing ones are refused and change nothing; a table\'s stored rows as listed are quiet', async () => {
    const { p, run, probe } = await probeNearChange('hubdb_rows');
    // The tables list as stored, one table updated just now: its window is needed.
    const tables = (await db.sql`select data from public.hubspot_content where portal_id = ${p.portalId} and content_type = 'hubdb_tables'
                                   and deleted_at is null order by hubspot_id`).map((r) => r.data as Record<string, unknown>);
    const recent = String(tables[0]!.id);
    tables[0] = { ...tables[0], updatedAt: new Date().toISOString() };
    const list = [JSON.stringify({ total: tables.length, results: tables })];
    for (const answer of [{}, { windows: 'no' }, { windows: { [recent]: 1 } }, { windows: { [recent]: '{"total":1}' } },
      { windows: { [recent]: '{"total":1,"results":[{"name":"no id"}]}' } }]) {
      const err = await pgError(() => completeProbeJob(db.sql, probe, { hubdb_rows: answer as never }, list));
      expect(err.code, JSON.stringify(answer)).toBe('22023');
    }
    expect((await pgError(() => completeProbeJob(db.sql, probe, { hubdb_rows: { windows: { [recent]: '{not json' } } }, list))).code).toBe('22P02');
    expect((await jobsOf(db.sql, run.runId!)).map((j) => [j.kind, j.status])).toEqual([['probe', 'running']]);

    // The table's two newest rows as HubSpot lists them (without the table id the store merges in).
    const rows = await db.sql`select data - 'tableId' as data from public.hubspot_content
                               where portal_id = ${p.portalId} and content_type = 'hubdb_rows' and deleted_at is null and hubspot_id like ${recent + ':%'}
                               order by hubspot_updated_at desc limit 2`;
    const page = JSON.stringify({ total: 2, results: rows.map((r) => r.data) });
    expect(await completeProbeJob(db.sql, probe, { hubdb_rows: { windows: { [recent]: page } } }, list)).toBe(true);
    const jobs = await jobsOf(db.sql, run.runId!);
    expect(jobs.map((j) => [j.kind, j.status])).toEqual([['probe', 'completed']]);
    expect(jobs[0]!.result).toMatchObject({ changed: [] });
  });

  it('the database holds a probe to its shape: no content type, one active per portal', async () => {
    const sim = await newSim();
    const p = await syncedPortal(db.sql, sim);
    const run = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'fetch', contentTypes: ['site_pages'], fetchMode: 'incremental', trigger: 'schedule' });
    const [owner] = await db.sql`select owner_id from public.portals where id = ${p.portalId}`;
    const insert = (kind: string, type: ContentType | null) =>
      db.sql`insert into public.jobs (run_id, portal_id, owner_id, kind, content_type) values (${run.runId!}, ${p.portalId}, ${owner!.owner_id}, ${kind}, ${type})`;
    expect((await pgError(() => insert('probe', 'site_pages'))).message).toMatch(/jobs_type_unless_probe/);
    expect((await pgError(() => insert('fetch', null))).message).toMatch(/jobs_type_unless_probe/);
    expect((await pgError(() => insert('probe', null))).message).toMatch(/jobs_one_active_probe_per_portal/);
  });
});
