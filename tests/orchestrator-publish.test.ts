// Publishing over HTTP (functions/orchestrator/publish-routes.ts), the handler
// called directly on a real database: an app's edits (written under RLS as
// supabase-js would) planned, read, approved, published and rolled back,
// with the plan, publish and restore jobs driven through their real holder
// calls against HubSpot-shaped answers (tests/support/publish-fixtures.ts);
// every answer checked against its documented schema; every refusal with
// its code and nothing changed: stale, twice, not ready, busy, another user's
// plan (404, never "not yours"), bad bodies and paths.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  itemPageResponse, planApprovedResponse, planCreatedResponse, planDetailResponse, planDiscardedResponse, planListResponse, runRolledBackResponse,
} from '../functions/orchestrator/publish-schemas.ts';
import { runDetailResponse, runListResponse } from '../functions/orchestrator/schemas.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { parseCsv } from '../shared/csv-parse.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';
import { orchestratorHarness, type OrchestratorHarness } from './support/orchestrator-harness.ts';
import { addEdit, cmsItem, HubSpotItems, runApply, runPlan, seedCopy } from './support/publish-fixtures.ts';
import { documented, expectRefused, publishClient } from './support/publish-http.ts';
import { drainQueue } from './support/queue-fixtures.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let h: OrchestratorHarness;
let api: ReturnType<typeof publishClient>;

const T0 = '2026-01-10T00:00:00.000Z';

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  h = await orchestratorHarness(db.sql, sim.url);
  api = publishClient(h);
  await db.sql`update private.write_limit_settings set max_writes = 100000`; // the limit itself: its own test below
});
afterAll(async () => {
  await sim?.close();
});
beforeEach(async () => {
  await drainQueue(db.sql);
});

/** A user with a portal whose copy (and HubSpot) holds site pages 1..n, and the user's token. */
async function owner(n = 3) {
  const portal = await createUserWithPortal(db.sql);
  const hs = new HubSpotItems('site_pages').put(...Array.from({ length: n }, (_, i) => cmsItem(String(i + 1), T0)));
  await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
  return { ...portal, hs, token: await h.keys.signUserToken(portal.userId) };
}

type Owner = Awaited<ReturnType<typeof owner>>;

/** A plan of the owner's pending edits, created over HTTP and read from HubSpot by its plan run: its ids. */
async function readyPlan(o: Owner, body: Record<string, unknown> = {}) {
  const created = await api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, ...body });
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  await runPlan(db.sql, created.body.runId, { site_pages: o.hs });
  return documented(planCreatedResponse, created.body);
}

describe('an app publishes its edits over HTTP', () => {
  it('plan (202, wakes the worker), read it, approve it once, publish, read the outcomes, roll back, read the audit CSV', async () => {
    const o = await owner();
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One, renamed', metaDescription: null });
    await addEdit(db.sql, o, 'site_pages', '2', T0, { name: 'Two, renamed' });
    o.hs.edit('2', { name: 'Changed in HubSpot' }); // a conflict: never written

    const wakes = h.wakes.count;
    const created = await api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, contentTypes: ['site_pages'] });
    expect(created.status).toBe(202);
    const { planId, runId, items } = documented(planCreatedResponse, created.body);
    expect(items).toBe(2);
    expect(h.wakes.count).toBe(wakes + 1);

    // Planning: readable, not approvable; the plan run shows in the run endpoints as kind plan.
    const planning = documented(planDetailResponse, (await api.get(o.token, `/publish/plans/${planId}`)).body).plan;
    expect(planning).toMatchObject({ id: planId, portalId: o.portalId, status: 'planning', approvable: false, planRunId: runId, createdBy: o.userId,
                                     mode: 'live', publishAt: null, freshUntil: null, counts: { total: 2, ready: 0 } });
    const planRun = documented(runDetailResponse, (await api.get(o.token, `?runId=${runId}`)).body);
    expect(planRun.run).toMatchObject({ kind: 'plan', status: 'pending', contentTypes: ['site_pages'], fetchMode: null, itemsTotal: 2 });
    expect(planRun.jobs.map((j) => [j.kind, j.contentType, j.total])).toEqual([['plan', 'site_pages', 2]]);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'approve_publish_plan', planId }), 409, 'PLAN_NOT_READY');

    await runPlan(db.sql, runId, { site_pages: o.hs });
    const ready = documented(planDetailResponse, (await api.get(o.token, `/publish/plans/${planId}`)).body).plan;
    expect(ready).toMatchObject({ status: 'ready', approvable: true, counts: { total: 2, ready: 1, conflict: 1, invalid: 0, unchanged: 0, missing: 0 } });
    expect(Date.parse(ready.freshUntil!) - Date.parse(ready.plannedAt!)).toBe(30 * 60_000);
    expect(documented(runDetailResponse, (await api.get(o.token, `?runId=${runId}`)).body).run).toMatchObject({ kind: 'plan', status: 'completed', itemsDone: 2 });

    // The items: fields before → after; HubSpot's values beside ours for the conflict.
    const all = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items`)).body);
    expect(all.nextCursor).toBeNull();
    expect(all.items.map((i) => [i.hubspotId, i.planStatus, i.before, i.after, i.current])).toEqual([
      ['1', 'ready', { name: 'Page 1', metaDescription: 'About 1' }, { name: 'One, renamed', metaDescription: null }, null],
      ['2', 'conflict', null, { name: 'Two, renamed' }, { name: 'Changed in HubSpot' }],
    ]);
    expect(all.items[1]!.planMessage).toMatch(/^changed in HubSpot since the edit's base/);
    const conflicts = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items?planStatus=conflict`)).body);
    expect(conflicts.items.map((i) => i.hubspotId)).toEqual(['2']);
    const first = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items?limit=1`)).body);
    expect(first.items.map((i) => i.hubspotId)).toEqual(['1']);
    const second = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items?limit=1&cursor=${first.nextCursor}`)).body);
    expect([second.items.map((i) => i.hubspotId), second.nextCursor]).toEqual([['2'], null]);

    // Approved once: a second approval is refused and makes no second run.
    const approved = await api.post(o.token, { action: 'approve_publish_plan', planId });
    expect(approved.status).toBe(202);
    const { publishRunId } = documented(planApprovedResponse, approved.body);
    expect(h.wakes.count).toBe(wakes + 2);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'approve_publish_plan', planId }), 409, 'PLAN_ALREADY_APPROVED');
    expect(await db.sql`select id from public.runs where portal_id = ${o.portalId} and kind = 'publish'`).toEqual([{ id: publishRunId }]);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'rollback_publish_run', runId: publishRunId }), 409, 'PUBLISH_RUN_NOT_FINISHED');

    await runApply(db.sql, 'publish', publishRunId, { site_pages: o.hs });
    expect(o.hs.get('1')).toMatchObject({ name: 'One, renamed', metaDescription: null });
    expect(o.hs.get('2').name).toBe('Changed in HubSpot');
    const published = documented(runDetailResponse, (await api.get(o.token, `?runId=${publishRunId}`)).body);
    expect(published.run).toMatchObject({ kind: 'publish', status: 'completed', itemsDone: 1, itemsTotal: 1 });
    const applied = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items?outcome=applied`)).body).items;
    expect(applied.map((i) => [i.hubspotId, i.outcome, i.writes])).toEqual([['1', 'applied', 1]]);
    expect(applied[0]!.appliedUpdatedAt).not.toBeNull();
    expect(applied[0]!.answer).toMatchObject({ id: '1', name: 'One, renamed' });
    const runs = documented(runListResponse, (await api.get(o.token, `/runs?portalId=${o.portalId}&kind=publish`)).body);
    expect(runs.runs.map((r) => r.id)).toEqual([publishRunId]);

    // Rolled back once.
    const rolled = await api.post(o.token, { action: 'rollback_publish_run', runId: publishRunId });
    expect(rolled.status).toBe(202);
    const { restoreRunId } = documented(runRolledBackResponse, rolled.body);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'rollback_publish_run', runId: publishRunId }), 409, 'ALREADY_ROLLED_BACK');
    await runApply(db.sql, 'restore', restoreRunId, { site_pages: o.hs });
    expect(o.hs.get('1')).toMatchObject({ name: 'Page 1', metaDescription: 'About 1' });
    expect(documented(runDetailResponse, (await api.get(o.token, `?runId=${restoreRunId}`)).body).run).toMatchObject({ kind: 'restore', status: 'completed' });
    const restored = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${planId}/items?restoreOutcome=restored`)).body).items;
    expect(restored.map((i) => i.hubspotId)).toEqual(['1']);
    const done = documented(planDetailResponse, (await api.get(o.token, `/publish/plans/${planId}`)).body).plan;
    expect(done).toMatchObject({ status: 'approved', approvable: false, approvedBy: o.userId, publishRunId, restoredBy: o.userId, restoreRunId });

    // The audit trail, streamed as CSV.
    const audit = await api.get(o.token, `/publish/plans/${planId}/audit.csv`);
    expect(audit.status).toBe(200);
    expect(audit.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(audit.headers.get('content-disposition')).toBe(`attachment; filename="publish-audit-${planId.slice(0, 8)}.csv"`);
    const csv = parseCsv(audit.body as string);
    if (!csv.ok) throw new Error(JSON.stringify(csv.errors));
    const col = (name: string) => csv.csv.header.indexOf(name);
    expect(csv.csv.rows.map((r) => [r[col('hubspot_id')], r[col('plan_status')], r[col('outcome')], r[col('restore_outcome')], r[col('approved_by')]])).toEqual([
      ['1', 'ready', 'applied', 'restored', o.userId],
      ['2', 'conflict', null, null, o.userId],
    ]);
    expect(JSON.parse(csv.csv.rows[0]![col('after')]!)).toEqual({ name: 'One, renamed', metaDescription: null });
  });

  it('lists a portal\'s plans newest first, in keyset pages; a new plan discards the unapproved one it replaces', async () => {
    const o = await owner();
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'A' });
    const a = await readyPlan(o);
    await addEdit(db.sql, o, 'site_pages', '2', T0, { name: 'B' });
    const b = await readyPlan(o);
    const page1 = documented(planListResponse, (await api.get(o.token, `/publish/plans?portalId=${o.portalId}&limit=1`)).body);
    expect(page1.plans.map((p) => [p.id, p.status])).toEqual([[b.planId, 'ready']]);
    const page2 = documented(planListResponse, (await api.get(o.token, `/publish/plans?portalId=${o.portalId}&limit=1&cursor=${page1.nextCursor}`)).body);
    expect([page2.plans.map((p) => [p.id, p.status]), page2.nextCursor]).toEqual([[[a.planId, 'discarded']], null]);
    // A portal without plans, and bad cursors and limits.
    const empty = await owner(1);
    expect((await api.get(empty.token, `/publish/plans?portalId=${empty.portalId}`)).body).toEqual({ plans: [], nextCursor: null });
    for (const q of ['cursor=bad', 'limit=0', 'limit=101', 'portalId=nope']) {
      const r = await api.get(o.token, `/publish/plans?${q.startsWith('portalId') ? q : `portalId=${o.portalId}&${q}`}`);
      expect([r.status, r.body.code], q).toEqual([400, 'INVALID_QUERY']);
    }
  });
});

describe('refusals change nothing', () => {
  it('a stale plan: 409 PLAN_STALE (plan again), and it reads not approvable', async () => {
    const o = await owner();
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One' });
    const { planId } = await readyPlan(o);
    await db.sql`update public.publish_plans set fresh_until = now() - interval '1 second' where id = ${planId}`;
    const stale = await expectRefused(db.sql, () => api.post(o.token, { action: 'approve_publish_plan', planId }), 409, 'PLAN_STALE');
    expect(stale.body.message).toMatch(/^The plan is stale \(approvable until .*\): plan again\.$/);
    expect(documented(planDetailResponse, (await api.get(o.token, `/publish/plans/${planId}`)).body).plan).toMatchObject({ status: 'ready', approvable: false });
    // Planned again, it is approvable.
    const again = await readyPlan(o);
    expect((await api.post(o.token, { action: 'approve_publish_plan', planId: again.planId })).status).toBe(202);
  });

  it("another user can neither read, approve, discard nor roll back someone else's plan: 404, as if there were none", async () => {
    const o = await owner();
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One' });
    await addEdit(db.sql, o, 'site_pages', '2', T0, { name: 'Two' });
    const { planId } = await readyPlan(o, { contentTypes: ['site_pages'] });
    const stranger = await createUser(db.sql);
    const s = await h.keys.signUserToken(stranger);
    const nobody = crypto.randomUUID();
    for (const path of [`/publish/plans/${planId}`, `/publish/plans/${planId}/items`, `/publish/plans/${planId}/audit.csv`]) {
      const theirs = await expectRefused(db.sql, () => api.get(s, path), 404, 'PLAN_NOT_FOUND');
      const none = await api.get(o.token, path.replace(planId, nobody));
      expect([none.status, none.body]).toEqual([404, theirs.body]); // the same answer as for no plan at all
    }
    await expectRefused(db.sql, () => api.get(s, `/publish/plans?portalId=${o.portalId}`), 404, 'PORTAL_NOT_FOUND');
    await expectRefused(db.sql, () => api.post(s, { action: 'approve_publish_plan', planId }), 404, 'PLAN_NOT_FOUND');
    await expectRefused(db.sql, () => api.post(s, { action: 'discard_publish_plan', planId }), 404, 'PLAN_NOT_FOUND');
    await expectRefused(db.sql, () => api.post(s, { action: 'create_publish_plan', portalId: o.portalId }), 404, 'PORTAL_NOT_FOUND');

    const { publishRunId } = (await api.post(o.token, { action: 'approve_publish_plan', planId })).body;
    await runApply(db.sql, 'publish', publishRunId, { site_pages: o.hs });
    await expectRefused(db.sql, () => api.post(s, { action: 'rollback_publish_run', runId: publishRunId }), 404, 'RUN_NOT_FOUND');
    // Nor is a run that is not a publish run rolled back (the owner's own plan run).
    const [planRun] = await db.sql`select plan_run_id from public.publish_plans where id = ${planId}`;
    await expectRefused(db.sql, () => api.post(o.token, { action: 'rollback_publish_run', runId: planRun!.plan_run_id }), 404, 'RUN_NOT_FOUND');
    // The owner still can.
    expect((await api.post(o.token, { action: 'rollback_publish_run', runId: publishRunId })).status).toBe(202);
  });

  it('create_publish_plan: no pending edits, bad bodies, a plan still being made, too many edits, a disconnected portal', async () => {
    const o = await owner();
    await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId }), 409, 'NO_PENDING_EDITS');
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One' });
    const future = new Date(Date.now() + 3_600_000).toISOString();
    for (const [body, path] of [
      [{ mode: 'schedule' }, 'publishAt'],
      [{ mode: 'live', publishAt: future }, 'publishAt'],
      [{ mode: 'schedule', publishAt: new Date(Date.now() - 60_000).toISOString() }, 'publishAt'],
      [{ mode: 'draft', contentTypes: ['site_pages', 'blog_tags'] }, 'mode'],
      [{ contentTypes: ['hubdb_tables'] }, 'contentTypes.0'],
      [{ contentTypes: ['site_pages', 'site_pages'] }, 'contentTypes'],
      [{ contentTypes: [] }, 'contentTypes'],
      [{ portalId: 'nope' }, 'portalId'],
      [{ ownerId: o.userId }, '(body)'],
    ] as const) {
      const r = await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, ...body }), 400, 'INVALID_BODY');
      expect(r.body.details.fieldErrors.map((f: { path: string }) => f.path), JSON.stringify(body)).toContain(path);
    }
    // A schedule for later is taken.
    const scheduled = await api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, mode: 'schedule', publishAt: future });
    expect(scheduled.status).toBe(202);
    // While it is being made, another plan of the type waits.
    await addEdit(db.sql, o, 'site_pages', '2', T0, { name: 'Two' });
    await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId }), 409, 'PLAN_IN_PROGRESS');
    await expectRefused(db.sql, () => api.post(o.token, { action: 'discard_publish_plan', planId: scheduled.body.planId }), 409, 'PLAN_STILL_PLANNING');
    await runPlan(db.sql, scheduled.body.runId, { site_pages: o.hs });
    expect(documented(planDetailResponse, (await api.get(o.token, `/publish/plans/${scheduled.body.planId}`)).body).plan)
      .toMatchObject({ mode: 'schedule', publishAt: future });
    // Draft mode of a type that is not a page or post, when the SQL finds it among the pending edits.
    const tags = new HubSpotItems('blog_tags').put({ id: 't1', name: 'News', slug: 'news', language: 'en', created: T0, updated: T0 });
    await seedCopy(db.sql, o, 'blog_tags', [...tags.items.values()]);
    await addEdit(db.sql, o, 'blog_tags', 't1', T0, { name: 'Updates' });
    const draft = await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, mode: 'draft' }), 400, 'INVALID_BODY');
    expect(draft.body.message).toBe('Draft mode writes pages and posts only: plan the other types (blog_tags) apart.');

    await db.sql`update private.publish_settings set max_edits_per_plan = 1`;
    try {
      await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId, contentTypes: ['site_pages'] }), 413, 'TOO_MANY_EDITS');
    } finally {
      await db.sql`update private.publish_settings set max_edits_per_plan = 50000`;
    }
    await db.sql`update public.portals set disconnected_at = now(), disconnected_reason = 'test' where id = ${o.portalId}`;
    await expectRefused(db.sql, () => api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId }), 424, 'HUBSPOT_DISCONNECTED');
  });

  it('discard: a ready plan is dropped, its edits pending again; twice says so; an approved one is refused', async () => {
    const o = await owner();
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One' });
    const { planId } = await readyPlan(o);
    const discarded = await api.post(o.token, { action: 'discard_publish_plan', planId });
    expect([discarded.status, documented(planDiscardedResponse, discarded.body)]).toEqual([200, { planId, discarded: true }]);
    expect((await api.post(o.token, { action: 'discard_publish_plan', planId })).body).toEqual({ planId, discarded: false });
    expect(await db.sql`select status from public.content_edits where portal_id = ${o.portalId}`).toEqual([{ status: 'pending' }]);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'approve_publish_plan', planId }), 409, 'PLAN_NOT_READY');
    const again = await readyPlan(o);
    expect((await api.post(o.token, { action: 'approve_publish_plan', planId: again.planId })).status).toBe(202);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'discard_publish_plan', planId: again.planId }), 409, 'PLAN_ALREADY_APPROVED');
    // While that publish runs, another plan may be made, but not approved.
    await addEdit(db.sql, o, 'site_pages', '2', T0, { name: 'Two' });
    const next = await readyPlan(o);
    await expectRefused(db.sql, () => api.post(o.token, { action: 'approve_publish_plan', planId: next.planId }), 409, 'PUBLISH_IN_PROGRESS');
    // A plan with nothing to publish (HubSpot has the target already: unchanged).
    const p = await owner();
    await addEdit(db.sql, p, 'site_pages', '3', T0, { name: 'Page 3' });
    const nothing = await readyPlan(p);
    await expectRefused(db.sql, () => api.post(p.token, { action: 'approve_publish_plan', planId: nothing.planId }), 409, 'PLAN_NOTHING_READY');
  });

  it('bad paths and queries; the publish actions count against the write limit', async () => {
    const o = await owner(1);
    const r = await expectRefused(db.sql, () => api.get(o.token, '/publish/plans/not-a-plan'), 400, 'INVALID_PATH');
    expect(r.body.details.fieldErrors[0].path).toBe('planId');
    await expectRefused(db.sql, () => api.get(o.token, `/publish/plans/${crypto.randomUUID()}/other`), 404, 'ROUTE_NOT_FOUND');
    await expectRefused(db.sql, () => api.get(o.token, '/publish'), 404, 'ROUTE_NOT_FOUND');
    await expectRefused(db.sql, () => api.get(o.token, `/publish/plans/${crypto.randomUUID()}/items?planStatus=maybe`), 400, 'INVALID_QUERY');
    await expectRefused(db.sql, () => api.get(o.token, `/publish/plans/${crypto.randomUUID()}/items?cursor=-1`), 400, 'INVALID_QUERY');
    await expectRefused(db.sql, () => api.get(o.token, `/publish/plans/${crypto.randomUUID()}/items?cursor=9223372036854775808`), 400, 'INVALID_QUERY');
    await expectRefused(db.sql, () => api.get(o.token, `/publish/plans/${crypto.randomUUID()}/items?limit=201`), 400, 'INVALID_QUERY');
    await expectRefused(db.sql, async () => {
      const res = await h.handler(new Request('http://127.0.0.1/functions/v1/orchestrator/publish/plans', {
        method: 'POST', headers: { Authorization: `Bearer ${o.token}`, 'Content-Type': 'application/json' }, body: '{}',
      }));
      return { status: res.status, body: await res.json(), headers: res.headers };
    }, 404, 'ROUTE_NOT_FOUND');
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'One' });
    await db.sql`update private.write_limit_settings set max_writes = 1`;
    try {
      const stranger = await h.keys.signUserToken(await createUser(db.sql));
      await expectRefused(db.sql, () => api.post(stranger, { action: 'approve_publish_plan', planId: crypto.randomUUID() }), 404, 'PLAN_NOT_FOUND');
      const limited = await expectRefused(db.sql, () => api.post(stranger, { action: 'approve_publish_plan', planId: crypto.randomUUID() }), 429, 'RATE_LIMITED');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await db.sql`update private.write_limit_settings set max_writes = 100000`;
    }
  });
});
