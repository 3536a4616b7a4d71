// A publish against a HubSpot that changes under it: edits made "in HubSpot"
// (the simulator's hooks) between plan and apply, just before a batch's
// re-read, and inside a batch's re-read → write window (the audit log read
// from the re-read on HubSpot's clock, our own draft edits told apart); a
// rollback after HubSpot changed again; 429s; writes whose answer never came;
// drafts, and a schedule rolled back before its time. Real Postgres, the
// simulator on loopback, real worker invocations.
import { describe, expect, it } from 'vitest';
import type { HubSpotSimulator } from '../hubspot-sim/server.ts';
import type { HubSpotClientOptions } from '../shared/hubspot/client.ts';
import type { ContentType } from '../shared/content-types.ts';
import { AUDIT_LOGS_PATH, batchReadPath, batchUpdatePath, writeEndpoint, type WriteEndpointKind } from '../shared/hubspot/write-endpoints.ts';
import { createHubSpotWriteClient, type HubSpotWriteClient } from '../shared/hubspot/writes.ts';
import { approvePublishPlan, createPublishPlan, rollbackPublishRun } from '../shared/sql/publish.ts';
import { expectSameAsSim, jobOfType, runOf, sleep, startFetchRun } from './support/fetch-fixtures.ts';
import {
  copyItems, editFirst, fieldsOf, hubspotNow, logMark, planItems, requestsByEndpoint, runToEnd, seedPortal, type Json,
} from './support/publish-worker-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { useWorkerSuite } from './support/worker-suite.ts';

const suite = useWorkerSuite();
const UPDATE = `POST ${batchUpdatePath('site_pages')}`;
const READ = `POST ${batchReadPath('site_pages')}`;
const AUDIT = `GET ${AUDIT_LOGS_PATH}`;
/** The simulator's name of an endpoint (`PATCH <template>`), as writeCounts takes it. */
const key = (kind: WriteEndpointKind, type: ContentType): string => `${writeEndpoint(kind, type).method} ${writeEndpoint(kind, type).template}`;

/** The `after` of the portal's audit-log requests since `mark` (a time on the first page of a read, a cursor after). */
function auditAfters(sim: HubSpotSimulator, mark: number): (string | null)[] {
  return sim.requestLog().slice(mark).filter((e) => e.endpoint === AUDIT).map((e) => e.after);
}

describe('edits made in HubSpot are never overwritten', () => {
  it('between plan and apply, and just before a re-read: conflicts; inside the window: overwritten, with the revision to restore', async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 20 } }, ['site_pages']);
    const targets = await editFirst(db.sql, p, 'site_pages', 12);
    const ids = [...targets.keys()];
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const hp = p.hubspotPortalId;

    // Between plan and apply: the same field, and another field.
    sim.editInHubSpot(hp, 'site_pages', ids[0]!, { htmlTitle: 'Theirs 0' });
    sim.editInHubSpot(hp, 'site_pages', ids[1]!, { name: 'Renamed in HubSpot' });
    // During the apply, landing just before the batch's re-read.
    sim.editBeforeNextRead(hp, 'site_pages', ids[2]!, { htmlTitle: 'Theirs 2' });
    // Inside the window (right after the re-read returned it): the same field, and another field.
    sim.editAfterNextRead(hp, 'site_pages', ids[3]!, { htmlTitle: 'Theirs 3' });
    sim.editAfterNextRead(hp, 'site_pages', ids[4]!, { authorName: 'Theirs 4' });

    const approvedAt = Date.now();
    const mark = logMark(sim);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('partially_failed');
    const items = await planItems(db.sql, plan.planId);
    const item = (i: number) => items.get(`site_pages/${ids[i]}`)!;
    // The audit log is read from the batch's re-read (HubSpot's startedAt, less a second), not from T0 or a guessed bound.
    const written = [...items.values()].filter((i) => i.writes > 0);
    const firstRead = Math.min(...written.map((i) => (i.reread_at as Date).getTime()));
    for (const i of written) expect((i.reread_at as Date).getTime()).toBeLessThan((i.applied_updated_at as Date).getTime());
    expect(firstRead).toBeGreaterThanOrEqual(approvedAt);
    expect(auditAfters(sim, mark)).toEqual([new Date(firstRead - 1000).toISOString()]);
    const now = await hubspotNow(sim, p, 'site_pages', ids);

    for (const i of [0, 1, 2]) {
      expect([i, item(i).outcome, item(i).writes]).toEqual([i, 'conflict', 0]);
      expect(item(i).outcome_message).toMatch(/changed in HubSpot since the plan/);
    }
    expect(now.get(ids[0]!)!.htmlTitle).toBe('Theirs 0');
    expect(item(0).current).toMatchObject({ htmlTitle: 'Theirs 0' });
    expect(now.get(ids[1]!)!.name).toBe('Renamed in HubSpot');
    expect(now.get(ids[2]!)!.htmlTitle).toBe('Theirs 2');

    // The window: our write landed over theirs (HubSpot has no precondition); both reported, with their revision.
    for (const i of [3, 4]) {
      expect([i, item(i).outcome, item(i).writes]).toEqual([i, 'overwritten', 1]);
      const events = item(i).overwritten_by as Json[];
      expect(events.map((e) => [e.objectId, e.fullName])).toEqual([[ids[i], 'Dana Editor']]);
      const revisions = sim.revisions(hp, 'site_pages', ids[i]!);
      const theirs = revisions.find((r) => r.user.fullName === 'Dana Editor' && Date.parse(r.updatedAt) > (item(i).pre_updated_at as Date).getTime());
      expect(item(i).overwritten_revision_id).toBe(theirs!.id);
    }
    expect(fieldsOf(now.get(ids[3]!)!, targets.get(ids[3]!)!)).toEqual(targets.get(ids[3]!));
    expect(now.get(ids[4]!)!.authorName).toBe('Theirs 4'); // a sparse update keeps their other field
    for (let i = 5; i < 12; i++) {
      expect([i, item(i).outcome, item(i).writes]).toEqual([i, 'applied', 1]);
      expect(fieldsOf(now.get(ids[i]!)!, targets.get(ids[i]!)!)).toEqual(targets.get(ids[i]!));
    }
    const counts = sim.writeCounts(hp, 'site_pages');
    expect(Object.keys(counts).sort()).toEqual(ids.slice(3).sort());
    expect(Object.values(counts).every((n) => n === 1)).toBe(true);

    // Changed in HubSpot after our write: the rollback lists it and leaves it.
    sim.editInHubSpot(hp, 'site_pages', ids[5]!, { metaDescription: 'Theirs after ours' });
    const restore = await rollbackPublishRun(db.sql, run, p.userId);
    expect((await runToEnd(rt, db.sql, restore)).status).toBe('partially_failed');
    const restored = await planItems(db.sql, plan.planId);
    const after = await hubspotNow(sim, p, 'site_pages', ids);
    expect(restored.get(`site_pages/${ids[5]}`)).toMatchObject({ restore_outcome: 'conflict', restore_writes: 0 });
    expect(after.get(ids[5]!)!.metaDescription).toBe('Theirs after ours');
    for (let i = 6; i < 12; i++) {
      expect(restored.get(`site_pages/${ids[i]}`)!.restore_outcome).toBe('restored');
      expect(fieldsOf(after.get(ids[i]!)!, targets.get(ids[i]!)!)).toEqual(restored.get(`site_pages/${ids[i]}`)!.before);
    }
    // Overwritten and conflicting items are not restored.
    for (const i of [0, 1, 2, 3, 4]) expect(restored.get(`site_pages/${ids[i]}`)!.restore_outcome).toBeNull();
  }, 60_000);
});

describe('the window where HubSpot keeps less', () => {
  it('a redirect edited in its window is reported with the event (no revisions); a tag edited in its window cannot be detected', async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { url_redirects: 6, blog_tags: 6 } }, ['url_redirects', 'blog_tags']);
    const redirects = [...(await editFirst(db.sql, p, 'url_redirects', 6)).keys()];
    const tags = [...(await editFirst(db.sql, p, 'blog_tags', 6)).keys()];
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    sim.editAfterNextRead(p.hubspotPortalId, 'url_redirects', redirects[2]!, { destination: 'https://example.test/theirs' });
    sim.editAfterNextRead(p.hubspotPortalId, 'blog_tags', tags[2]!, { name: 'Theirs' });
    const approvedAt = Date.now();
    const mark = logMark(sim);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    const items = await planItems(db.sql, plan.planId);
    const redirect = items.get(`url_redirects/${redirects[2]}`)!;
    expect(redirect).toMatchObject({ outcome: 'overwritten', writes: 1, overwritten_revision_id: null });
    // A redirect's GET has no startedAt: its Date header (whole seconds) is the re-read's time.
    const reads = redirects.map((id) => items.get(`url_redirects/${id}`)!.reread_at as Date);
    for (const at of reads) expect(at.getTime() % 1000).toBe(0);
    // (Node caches its Date header for up to a second, later under load: a margin, far inside the 300 s the old bound guessed.)
    expect(Math.min(...reads.map((d) => d.getTime()))).toBeGreaterThanOrEqual(approvedAt - 30_000);
    expect(auditAfters(sim, mark)).toEqual([new Date(Math.min(...reads.map((d) => d.getTime())) - 1000).toISOString()]);
    expect((redirect.overwritten_by as Json[]).map((e) => [e.objectType, e.objectId, e.fullName])).toEqual([['URL_MAPPING', redirects[2], 'Dana Editor']]);
    // Blog tags leave no audit event and keep no revisions: their edit was overwritten without a trace.
    expect(items.get(`blog_tags/${tags[2]}`)).toMatchObject({ outcome: 'applied', writes: 1, overwritten_by: null });
    expect((await hubspotNow(sim, p, 'blog_tags', [tags[2]!])).get(tags[2]!)!.name).toBe('Edited tag 2');
    for (const key of [...items.keys()].filter((k) => k !== `url_redirects/${redirects[2]}`)) expect(items.get(key)!.outcome, key).toBe('applied');
  }, 60_000);
});

/** A runtime whose write client runs `before(method)` ahead of each write request (the simulator's next fault). */
async function runtimeWithHook(before: (method: keyof HubSpotWriteClient) => void) {
  const { db, sim } = suite;
  const rt = await testWorkerRuntime(db.sql, sim.url);
  const wrap = (o: HubSpotClientOptions): HubSpotWriteClient => {
    const real = createHubSpotWriteClient({ ...o, sleep: (ms) => sleep(Math.min(ms, 50)) });
    const hooked = { ...real };
    for (const m of ['batchUpdate', 'rowsDraftBatchUpdate', 'publishTable', 'patchRedirect', 'patchDraft', 'pushLive', 'schedule'] as const) {
      const send = real[m] as (...args: unknown[]) => Promise<unknown>;
      (hooked as Record<string, unknown>)[m] = (...args: unknown[]) => {
        before(m);
        return send(...args);
      };
    }
    return hooked;
  };
  return { ...rt, hubspotWrites: wrap };
}

describe('writes whose outcome is unknown, and 429s', () => {
  it('an answer lost after HubSpot applied the write: the re-read recognises it, nothing is written twice', async () => {
    const { db, sim } = suite;
    let faults = 1;
    const rt = await runtimeWithHook(() => faults-- > 0 && sim.failNext(1, 'lost'));
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 30 } }, ['site_pages']);
    const targets = await editFirst(db.sql, p, 'site_pages', 30);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const mark = logMark(sim);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.map((i) => [i.outcome, i.writes])).toEqual(Array(30).fill(['applied', 1]));
    expect(sim.writeCounts(p.hubspotPortalId, 'site_pages')).toEqual(Object.fromEntries([...targets.keys()].map((id) => [id, 1])));
    // One write (its answer lost), then one re-read that found it: no second write.
    expect(requestsByEndpoint(sim, p, mark)).toMatchObject({ [READ]: 2, [UPDATE]: 1 });
    const now = await hubspotNow(sim, p, 'site_pages', [...targets.keys()]);
    for (const [id, patch] of targets) expect(fieldsOf(now.get(id)!, patch)).toEqual(patch);
  }, 60_000);

  it('a 503 or a dropped connection on a write: not sent again by the client; re-read, then written (HubSpot applied it once)', async () => {
    const { db, sim } = suite;
    const script: (503 | 'drop')[] = [503, 'drop'];
    const rt = await runtimeWithHook(() => {
      const next = script.shift();
      if (next) sim.failNext(1, next);
    });
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 10 } }, ['site_pages']);
    const targets = await editFirst(db.sql, p, 'site_pages', 10);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const mark = logMark(sim);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    // Three write requests (two never applied), each after its own re-read; HubSpot applied one.
    expect(requestsByEndpoint(sim, p, mark)).toMatchObject({ [READ]: 3, [UPDATE]: 3 });
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.map((i) => [i.outcome, i.writes])).toEqual(Array(10).fill(['applied', 3]));
    expect(sim.writeCounts(p.hubspotPortalId, 'site_pages')).toEqual(Object.fromEntries([...targets.keys()].map((id) => [id, 1])));
  }, 60_000);

  it('writes that never get an answer three times in a row fail the try (retried, re-reading first, its attempt given back)', async () => {
    const { db, sim } = suite;
    let faults = 3;
    const rt = await runtimeWithHook(() => faults-- > 0 && sim.failNext(1, 502));
    const p = await seedPortal(db.sql, sim, rt, { sizes: { blog_tags: 5 } }, ['blog_tags']);
    await editFirst(db.sql, p, 'blog_tags', 5);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    await runToEnd(rt, db.sql, plan.runId);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    const job = await jobOfType(db.sql, run, 'blog_tags');
    expect(job).toMatchObject({ status: 'completed', attempts: 1 }); // a retryable failure uses no attempt (decision 0072)
    expect(String(job.last_error)).toMatch(/3 writes in a row got no answer/);
    expect(Object.values(sim.writeCounts(p.hubspotPortalId, 'blog_tags'))).toEqual([1, 1, 1, 1, 1]);
  }, 60_000);

  it("429s are waited out: every edit applied once", async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { blog_posts: 120, url_redirects: 15 } }, ['blog_posts', 'url_redirects']);
    const posts = await editFirst(db.sql, p, 'blog_posts', 120);
    const redirects = await editFirst(db.sql, p, 'url_redirects', 15);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    sim.setFaults({ forced429Rate: 0.3, seed: 7 });
    const limited = sim.stats().rateLimited;
    await runToEnd(rt, db.sql, plan.runId);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    expect(sim.stats().rateLimited - limited).toBeGreaterThan(10);
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.every((i) => i.outcome === 'applied' && i.writes === 1)).toBe(true);
    expect(Object.values(sim.writeCounts(p.hubspotPortalId, 'blog_posts'))).toEqual(Array(120).fill(1));
    expect(Object.values(sim.writeCounts(p.hubspotPortalId, 'url_redirects'))).toEqual(Array(15).fill(1));
    sim.clearFaults();
    for (const [type, targets] of [['blog_posts', posts], ['url_redirects', redirects]] as const) {
      const now = await hubspotNow(sim, p, type, [...targets.keys()]);
      for (const [id, patch] of targets) expect(fieldsOf(now.get(id)!, patch)).toEqual(patch);
    }
  }, 60_000);
});

describe('pages and posts through their drafts', () => {
  it('mode draft: each draft PATCHed and pushed live once, an edit in its window reported; mode schedule: scheduled, live at the time', async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { landing_pages: 8, blog_posts: 8 } }, ['landing_pages', 'blog_posts']);
    const hp = p.hubspotPortalId;
    const pages = await editFirst(db.sql, p, 'landing_pages', 8);
    const ids = [...pages.keys()];
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'draft' });
    await runToEnd(rt, db.sql, plan.runId);
    // Someone edits page 2 in HubSpot between our re-read and our draft PATCH: our own draft PATCHes are in every window too.
    sim.editAfterNextRead(hp, 'landing_pages', ids[2]!, { authorName: 'Theirs 2' });
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    const items = await planItems(db.sql, plan.planId);
    expect(ids.map((id) => [id, items.get(`landing_pages/${id}`)!.outcome, items.get(`landing_pages/${id}`)!.writes]))
      .toEqual(ids.map((id, i) => [id, i === 2 ? 'overwritten' : 'applied', 1]));
    const events = items.get(`landing_pages/${ids[2]}`)!.overwritten_by as Json[];
    expect(events.map((e) => [e.objectId, e.fullName])).toEqual([[ids[2], 'Dana Editor']]);
    expect(await jobOfType(db.sql, run, 'landing_pages')).toMatchObject({ result: { audit_pages: 1, overwritten: 1 } });
    const live = await hubspotNow(sim, p, 'landing_pages', ids);
    for (const [id, patch] of pages) expect(fieldsOf(live.get(id)!, patch)).toEqual(patch);
    expect(live.get(ids[2]!)!.authorName).toBe('Theirs 2');
    const ones = Object.fromEntries(ids.map((id) => [id, 1]));
    expect(sim.writeCounts(hp, 'landing_pages', key('draft_update', 'landing_pages'))).toEqual(ones);
    expect(sim.writeCounts(hp, 'landing_pages', key('push_live', 'landing_pages'))).toEqual(ones);

    const posts = await editFirst(db.sql, p, 'blog_posts', 8);
    const publishAt = new Date(Date.now() + 3_600_000);
    const scheduled = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'schedule', publishAt });
    await runToEnd(rt, db.sql, scheduled.runId);
    const run2 = await approvePublishPlan(db.sql, scheduled.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run2)).status).toBe('completed');
    expect([...(await planItems(db.sql, scheduled.planId)).values()].map((i) => [i.outcome, i.writes])).toEqual(Array(8).fill(['scheduled', 1]));
    const before = await hubspotNow(sim, p, 'blog_posts', [...posts.keys()]);
    for (const [id, patch] of posts) expect(fieldsOf(before.get(id)!, patch), 'live until the time').not.toEqual(patch);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts'); // the copy holds the live posts, not the drafts
    expect(Object.values(sim.writeCounts(hp, 'blog_posts', key('schedule', 'blog_posts')))).toEqual(Array(8).fill(1));
    sim.advanceContentClock(3_700);
    const after = await hubspotNow(sim, p, 'blog_posts', [...posts.keys()]);
    for (const [id, patch] of posts) expect(fieldsOf(after.get(id)!, patch)).toEqual(patch);
    // The next fetch brings the published posts into the copy.
    const fetch = await startFetchRun(db.sql, p, ['blog_posts']);
    expect((await runToEnd(rt, db.sql, fetch)).status).toBe('completed');
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
    expect((await runOf(db.sql, run2)).status).toBe('completed');
  }, 60_000);

  it('a schedule rolled back before its time: the drafts written back, and HubSpot then publishes the fields as they were', async () => {
    const { db, sim } = suite;
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const p = await seedPortal(db.sql, sim, rt, { sizes: { site_pages: 6 } }, ['site_pages']);
    const hp = p.hubspotPortalId;
    const targets = await editFirst(db.sql, p, 'site_pages', 6);
    const ids = [...targets.keys()];
    const before = await hubspotNow(sim, p, 'site_pages', ids);
    // Far beyond any clock the earlier tests moved HubSpot's to.
    const publishAt = new Date(Date.now() + 10 * 86_400_000);
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId, mode: 'schedule', publishAt });
    await runToEnd(rt, db.sql, plan.runId);
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    expect((await runToEnd(rt, db.sql, run)).status).toBe('completed');
    expect([...(await planItems(db.sql, plan.planId)).values()].map((i) => i.outcome)).toEqual(Array(6).fill('scheduled'));

    const restore = await rollbackPublishRun(db.sql, run, p.userId);
    expect((await runToEnd(rt, db.sql, restore)).status).toBe('completed');
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.map((i) => [i.outcome, i.restore_outcome, i.restore_writes])).toEqual(Array(6).fill(['scheduled', 'restored', 1]));
    expect(items[0]!.restore_message).toMatch(/^its draft written back: HubSpot has no way to cancel a schedule/);
    const twice = Object.fromEntries(ids.map((id) => [id, 2]));
    expect(sim.writeCounts(hp, 'site_pages', key('draft_update', 'site_pages'))).toEqual(twice);
    expect(sim.writeCounts(hp, 'site_pages', UPDATE)).toEqual({});
    await expectSameAsSim(db.sql, sim, p, 'site_pages');

    sim.advanceContentClock(11 * 86_400);
    const after = await hubspotNow(sim, p, 'site_pages', ids);
    for (const [id, patch] of targets) {
      expect(after.get(id)!.state, id).toBe('PUBLISHED');
      expect(fieldsOf(after.get(id)!, patch), id).toEqual(fieldsOf(before.get(id)!, patch));
    }
  }, 60_000);
});
