// The publish worker end to end: real Postgres, the HubSpot simulator on
// loopback, real worker invocations running the plan, publish and restore
// jobs (functions/worker/plan-job.ts, publish-job.ts, restore-job.ts). HubSpot's
// state is read back over HTTP; the simulator's own write counters and request
// log say how often each item was written and what each batch cost.
import { afterAll, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import type { ContentType } from '../shared/content-types.ts';
import { AUDIT_LOGS_PATH, batchReadPath, batchUpdatePath } from '../shared/hubspot/write-endpoints.ts';
import { approvePublishPlan, createPublishPlan, rollbackPublishRun } from '../shared/sql/publish.ts';
import { expectSameAsSim, jobOfType, runOf } from './support/fetch-fixtures.ts';
import {
  EDITABLE, editFirst, fieldsOf, hubspotNow, logMark, planItems, requestsByEndpoint, runToEnd, seedPortal, type Json,
} from './support/publish-worker-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { useWorkerSuite } from './support/worker-suite.ts';

const suite = useWorkerSuite();
const SIZES = { site_pages: 12, landing_pages: 12, blog_posts: 12, blog_authors: 12, blog_tags: 12, hubdb_rows: 12, url_redirects: 12 };

/** The simulator's write count per edited item of a type (HubDB rows: their draft update), by our ids. */
function writesOf(counts: Record<string, number>, ids: Iterable<string>): Record<string, number> {
  return Object.fromEntries([...ids].map((id) => [id, counts[id] ?? 0]));
}

describe('plan → approve → publish → rollback over every editable type', () => {
  it("HubSpot ends with the targets, each item written once; the rollback writes the pre-images back; the copy follows HubSpot", async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: SIZES, hubdbTables: 2 }, [...EDITABLE, 'hubdb_tables']);
    const targets = new Map<ContentType, Map<string, Json>>();
    const before = new Map<ContentType, Map<string, Json>>();
    for (const type of EDITABLE) {
      targets.set(type, await editFirst(db.sql, p, type, 10));
      before.set(type, await hubspotNow(sim, p, type, [...targets.get(type)!.keys()]));
    }

    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    expect(plan.items).toBe(70);
    expect((await runToEnd(rt, db.sql, plan.runId)).status).toBe('completed');
    const planned = await planItems(db.sql, plan.planId);
    expect([...planned.values()].map((i) => i.plan_status)).toEqual(Array(70).fill('ready'));
    for (const [key, item] of planned) {
      const [type, id] = key.split('/') as [ContentType, string];
      expect(item.before, key).toEqual(fieldsOf(before.get(type)!.get(id)!, item.after as Json));
    }
    // The plan read HubSpot and wrote nothing.
    expect(EDITABLE.flatMap((t) => Object.keys(sim.writeCounts(p.hubspotPortalId, t)))).toEqual([]);

    const publishRun = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, publishRun)).status).toBe('completed');
    const applied = await planItems(db.sql, plan.planId);
    for (const [key, item] of applied) expect([key, item.outcome, item.writes], key).toEqual([key, 'applied', 1]);
    for (const type of EDITABLE) {
      const wanted = targets.get(type)!;
      const now = await hubspotNow(sim, p, type, [...wanted.keys()]);
      for (const [id, patch] of wanted) expect(fieldsOf(now.get(id)!, patch), `${type} ${id}`).toEqual(patch);
      // Other fields as they were (a sparse update).
      for (const [id, item] of now) {
        const old = before.get(type)!.get(id)!;
        for (const field of ['name', 'slug', 'fullName', 'routePrefix', 'path']) {
          if (!(field in wanted.get(id)!)) expect(item[field], `${type} ${id} ${field}`).toEqual(old[field]);
        }
      }
      const counts = sim.writeCounts(p.hubspotPortalId, type);
      expect(writesOf(counts, wanted.keys()), type).toEqual(Object.fromEntries([...wanted.keys()].map((id) => [id, 1])));
      expect(Object.keys(counts).length, `${type}: nothing else written`).toBe(wanted.size);
      // The copy holds HubSpot's answers: the change feed lists them as updates.
      await expectSameAsSim(db.sql, sim, p, type);
    }
    // HubDB: one draft update and one publish per table.
    expect(Object.values(sim.writeCounts(p.hubspotPortalId, 'hubdb_tables'))).toEqual([1, 1]);
    const run = await runOf(db.sql, publishRun);
    expect(run).toMatchObject({ status: 'completed', jobs_total: 7, jobs_completed: 7 });

    const restoreRun = await rollbackPublishRun(db.sql, publishRun, p.userId);
    expect((await runToEnd(rt, db.sql, restoreRun)).status).toBe('completed');
    for (const [key, item] of await planItems(db.sql, plan.planId)) {
      expect([key, item.restore_outcome, item.restore_writes], key).toEqual([key, 'restored', 1]);
    }
    for (const type of EDITABLE) {
      const wanted = targets.get(type)!;
      const now = await hubspotNow(sim, p, type, [...wanted.keys()]);
      for (const [id, patch] of wanted) {
        expect(fieldsOf(now.get(id)!, patch), `${type} ${id}`).toEqual(fieldsOf(before.get(type)!.get(id)!, patch));
      }
      const counts = sim.writeCounts(p.hubspotPortalId, type);
      expect(writesOf(counts, wanted.keys()), type).toEqual(Object.fromEntries([...wanted.keys()].map((id) => [id, 2])));
      await expectSameAsSim(db.sql, sim, p, type);
    }
  }, 60_000);
});

describe('requests per batch', () => {
  it('150 page edits: two batch reads to plan, two re-reads, two batch updates and the audit log read once, paged', async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 160 } }, ['site_pages']);
    await editFirst(db.sql, p, 'site_pages', 150);
    const mark = logMark(sim);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    // Our own 150 events are in the window: HubSpot's audit log cannot leave them out (100 a page).
    expect(requestsByEndpoint(sim, p, mark)).toEqual({
      [`POST ${batchReadPath('site_pages')}`]: 4,
      [`POST ${batchUpdatePath('site_pages')}`]: 2,
      [`GET ${AUDIT_LOGS_PATH}`]: 2,
    });
  }, 60_000);
});

describe("HubSpot's daily limit", () => {
  const sims: HubSpotSimulator[] = [];
  afterAll(async () => {
    await Promise.all(sims.map((s) => s.close()));
  });

  it('parks a publish job between batches, no attempt used, nothing counted for the batch it could not read; it resumes after the reset', async () => {
    const { db } = suite;
    // 3 list pages to fetch the copy, 3 batch reads to plan, then 2 batches (re-read, write) before the day's quota is spent.
    const sim = await startHubSpotSimulator({ rateLimit: { daily: 10 } });
    sims.push(sim);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 250 } }, ['site_pages']);
    const targets = await editFirst(db.sql, p, 'site_pages', 250);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    for (let i = 0; i < 2; i++) expect(await runWorkerInvocation(rt, `daily-${i}`)).toMatchObject({ claimed: i === 0 ? 1 : 0, failed: 0, retried: 0, lost: 0 });
    const parked = await jobOfType(db.sql, run, 'site_pages');
    expect(parked).toMatchObject({ status: 'pending', attempts: 0, progress_done: 200 });
    expect(parked.waiting_reason).toMatch(/^waiting for HubSpot's daily limit until /);
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.filter((i) => i.outcome === 'applied')).toHaveLength(200);
    expect(items.filter((i) => i.outcome === null && i.writes === 0)).toHaveLength(50);

    sim.resetDailyLimits();
    await db.sql`update private.hubspot_request_budgets set daily_seen_at = daily_seen_at - interval '1 day' where hubspot_portal_id = ${p.hubspotPortalId}`;
    await db.sql`update public.jobs set run_after = now() where id = ${parked.id as string}`;
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    expect(await jobOfType(db.sql, run, 'site_pages')).toMatchObject({ status: 'completed', attempts: 1 });
    expect(Object.values(sim.writeCounts(p.hubspotPortalId, 'site_pages'))).toEqual(Array(250).fill(1));
    const now = await hubspotNow(sim, p, 'site_pages', [...targets.keys()]);
    for (const [id, patch] of targets) expect(fieldsOf(now.get(id)!, patch)).toEqual(patch);
  }, 60_000);
});
