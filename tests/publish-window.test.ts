// Publish, the publish window: between a batch's re-read and its write
// (supabase/schemas/0491-0493, 0501, 0502): each written item keeps HubSpot's
// time of its re-read, which bounds the job's audit-log read
// (publish_job_context, a fenced holder call like the job's other reads);
// the log's events of our own writer (the user of the event at our write's
// update time) are ours in a draft's window, another's are reported; and a
// retried batch recognises a value HubSpot normalised when the answer to its
// write's first step was kept.
import { beforeEach, describe, expect, it } from 'vitest';
import { claimNextJob } from '../shared/sql/jobs.ts';
import {
  approvePublishPlan, nextPublishItems, overwrittenPublishItems, preparePublishBatch, publishJobContext, recordOverwrittenRevision,
  recordPublishBatch, recordWindowEvents, type PublishMode,
} from '../shared/sql/publish.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, expireLease, pgError } from './support/queue-fixtures.ts';
import { addEdit, cmsItem, HubSpotItems, makePlan, seedCopy } from './support/publish-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

/** Years before the publish: the pages' update time when planned (T0). */
const T0 = '2021-03-01T00:00:00.000Z';

/** A portal whose copy and HubSpot hold site pages 1..n, with the given edits approved in `mode`: the claimed publish job. */
async function approved(patches: Record<string, Record<string, unknown>>, mode: PublishMode = 'live', n = 3) {
  const portal = await createUserWithPortal(db.sql);
  const hs = new HubSpotItems('site_pages').put(...Array.from({ length: n }, (_, i) => cmsItem(String(i + 1), T0)));
  await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
  for (const [id, patch] of Object.entries(patches)) await addEdit(db.sql, portal, 'site_pages', id, T0, patch);
  const plan = await makePlan(db.sql, portal, { site_pages: hs }, { mode });
  const runId = await approvePublishPlan(db.sql, plan.planId, portal.userId);
  const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
  expect(job.runId).toBe(runId);
  const ids = (await nextPublishItems(db.sql, job, 100))!.map((i) => i.itemId);
  return { ...portal, hs, planId: plan.planId, runId, job, ids };
}

/** A batch answer's text with another `startedAt` (HubSpot's clock when the read started). */
function startedAt(body: string, iso: string): string {
  return JSON.stringify({ ...JSON.parse(body), startedAt: iso });
}

async function itemRows(planId: string) {
  return [...await db.sql`select hubspot_id, outcome, writes, reread_at, pre_updated_at, applied_updated_at, writer_user_id, overwritten_by
    from public.publish_items i where plan_id = ${planId} order by i.id`];
}

/** An audit-log event as HubSpot's CMS audit log answers it (PublicAuditLog). */
function event(objectId: string, timestamp: string, userId: string, fullName: string, meta: Record<string, unknown> = {}) {
  return { objectId, objectType: 'WEBSITE_PAGE', event: 'UPDATED', timestamp, userId, fullName, objectName: `Page ${objectId}`, meta };
}

const ms = (iso: string, deltaMs: number) => new Date(Date.parse(iso) + deltaMs).toISOString();

describe("a publish job's reads of its plan are holder calls", () => {
  it('publish_job_context and overwritten_publish_items answer the holder only; a stale token gets null, another kind an error', async () => {
    const p = await approved({ 1: { name: 'One' } }, 'draft');
    expect(await publishJobContext(db.sql, p.job)).toEqual({ mode: 'draft', publishAt: null, publishWindow: null });
    expect(await overwrittenPublishItems(db.sql, p.job)).toEqual([]);
    const stale = { id: p.job.id, fencingToken: String(BigInt(p.job.fencingToken) + 1n) };
    expect(await publishJobContext(db.sql, stale)).toBeNull();
    expect(await overwrittenPublishItems(db.sql, stale)).toBeNull();
    await expireLease(db.sql, p.job.id);
    expect(await publishJobContext(db.sql, p.job)).toBeNull();
    const planJob = { id: p.job.id, fencingToken: p.job.fencingToken };
    await db.sql`update public.jobs set kind = 'plan', lease_expires_at = now() + interval '1 minute' where id = ${planJob.id}`;
    expect((await pgError(() => publishJobContext(db.sql, planJob))).message).toMatch(/is a plan job, not a publish or restore job/);
    expect((await pgError(() => overwrittenPublishItems(db.sql, planJob))).message).toMatch(/is a plan job, not a publish job/);
  });
});

describe("the publish window starts at HubSpot's re-read", () => {
  it("keeps the re-read's startedAt per written item; the audit-log read starts a second before it, not at T0 years ago", async () => {
    const p = await approved({ 1: { name: 'One' }, 2: { name: 'Two' }, 3: { name: 'Three' } });
    const readAt = '2026-02-01T00:00:00.500Z';
    // Items 1 and 2 in a batch whose answer says when HubSpot started reading (an array of two answers: the earliest counts).
    const body = `[${startedAt(p.hs.read(['1']).body, '2026-02-01T00:00:00.700Z')},${startedAt(p.hs.read(['2']).body, readAt)}]`;
    const toWrite = (await preparePublishBatch(db.sql, p.job, p.ids.slice(0, 2), body))!;
    expect(toWrite).toHaveLength(2);
    // Item 3 read on its own, its answer without a time: the read's Date header passed in instead.
    const bare = JSON.stringify({ results: [p.hs.get('3')] });
    expect(await preparePublishBatch(db.sql, p.job, [p.ids[2]!], bare, new Date('2026-02-01T00:00:02.000Z'))).toHaveLength(1);
    let rows = await itemRows(p.planId);
    expect(rows.map((r) => (r.reread_at as Date).toISOString())).toEqual([readAt, readAt, '2026-02-01T00:00:02.000Z']);
    expect(await publishJobContext(db.sql, p.job)).toMatchObject({ mode: 'live', publishWindow: null }); // nothing written yet

    const answer = p.hs.update([{ id: '1', fields: { name: 'One' } }, { id: '2', fields: { name: 'Two' } }, { id: '3', fields: { name: 'Three' } }]);
    expect(await recordPublishBatch(db.sql, p.job, p.ids, answer.status, answer.body)).toMatchObject({ applied: 3 });
    rows = await itemRows(p.planId);
    const lastWrite = Math.max(...rows.map((r) => (r.applied_updated_at as Date).getTime()));
    expect(await publishJobContext(db.sql, p.job)).toEqual({
      mode: 'live', publishAt: null,
      publishWindow: { after: new Date(Date.parse(readAt) - 1000), before: new Date(lastWrite + 1), items: 3 },
    });
  });

  it('an item re-read without any time is bounded by its pre-image (T0); a retried write keeps its first re-read time', async () => {
    const p = await approved({ 1: { name: 'One' } });
    const bare = JSON.stringify({ results: [p.hs.get('1')] });
    expect(await preparePublishBatch(db.sql, p.job, p.ids, bare)).toHaveLength(1);
    expect((await itemRows(p.planId))[0]!.reread_at).toBeNull();
    // The write never got an answer; the retried re-read (HubSpot never applied it) has a time: the item takes it.
    expect(await preparePublishBatch(db.sql, p.job, p.ids, startedAt(p.hs.read(['1']).body, '2026-02-01T00:00:00.000Z'))).toHaveLength(1);
    expect((await itemRows(p.planId))[0]).toMatchObject({ writes: 2, reread_at: new Date('2026-02-01T00:00:00.000Z') });
    expect(await preparePublishBatch(db.sql, p.job, p.ids, startedAt(p.hs.read(['1']).body, '2026-02-01T00:00:09.000Z'))).toHaveLength(1);
    expect((await itemRows(p.planId))[0]).toMatchObject({ writes: 3, reread_at: new Date('2026-02-01T00:00:00.000Z') });

    const q = await approved({ 1: { name: 'Uno' } });
    expect(await preparePublishBatch(db.sql, q.job, q.ids, JSON.stringify({ results: [q.hs.get('1')] }))).toHaveLength(1);
    const answer = q.hs.update([{ id: '1', fields: { name: 'Uno' } }]);
    await recordPublishBatch(db.sql, q.job, q.ids, answer.status, answer.body);
    expect((await publishJobContext(db.sql, q.job))!.publishWindow!.after).toEqual(new Date(T0));
  });
});

describe("our own writer's events in a draft's window", () => {
  it('mode draft: the events of the user who made our writes are ours (the draft PATCH, a retried one); another user\'s are reported', async () => {
    const p = await approved({ 1: { name: 'One' }, 2: { name: 'Two' } }, 'draft');
    const read = startedAt(p.hs.read(['1', '2']).body, '2026-02-01T00:00:00.000Z');
    expect(await preparePublishBatch(db.sql, p.job, p.ids, read)).toHaveLength(2);
    // The drafts PATCHed, then pushed live (the live items read back: T2 is the push's update time).
    const patchedAt = ['2026-02-01T00:00:00.100Z', '2026-02-01T00:00:00.200Z'];
    const theirsAt = '2026-02-01T00:00:00.150Z';
    const answer = p.hs.update([{ id: '1', fields: { name: 'One' } }, { id: '2', fields: { name: 'Two' } }]);
    expect(await recordPublishBatch(db.sql, p.job, p.ids, answer.status, answer.body)).toMatchObject({ applied: 2 });
    const t2 = [p.hs.get('1').updated as string, p.hs.get('2').updated as string];
    const app = (id: string, at: string, e = 'UPDATED') => ({ ...event(id, at, '6000001', 'Private App Integration'), event: e });
    // Newest first, as the worker reads it; our write of item 2 names our writer before anything else.
    const page1 = { results: [app('2', t2[1]!, 'PUBLISHED'), app('1', t2[0]!, 'PUBLISHED'), app('2', patchedAt[1]!)], paging: { next: { after: 'c1' } } };
    const page2 = { results: [event('1', theirsAt, '7000001', 'Dana Editor'), app('1', patchedAt[0]!), app('1', ms(patchedAt[0]!, -50))] };
    expect(await recordWindowEvents(db.sql, p.job, JSON.stringify(page1))).toBe(0);
    expect(await recordWindowEvents(db.sql, p.job, JSON.stringify(page2))).toBe(1);
    const rows = await itemRows(p.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.writer_user_id])).toEqual([['1', 'overwritten', '6000001'], ['2', 'applied', '6000001']]);
    expect(rows[0]!.overwritten_by).toEqual([event('1', theirsAt, '7000001', 'Dana Editor')]);
    expect((await overwrittenPublishItems(db.sql, p.job))!.map((i) => i.hubspotId)).toEqual(['1']);
    expect(await recordOverwrittenRevision(db.sql, p.job, p.ids[0]!, 'r-1')).toBe(true);
    expect(await overwrittenPublishItems(db.sql, p.job)).toEqual([]);
  });

  it('mode live: an event in the window is another\'s whoever made it (only our write\'s own event, at T2, is ours)', async () => {
    const p = await approved({ 1: { name: 'One' } });
    expect(await preparePublishBatch(db.sql, p.job, p.ids, p.hs.read(['1']).body)).toHaveLength(1);
    const answer = p.hs.update([{ id: '1', fields: { name: 'One' } }]);
    await recordPublishBatch(db.sql, p.job, p.ids, answer.status, answer.body);
    const t2 = p.hs.get('1').updated as string;
    const page = { results: [event('1', t2, '6000001', 'Our app'), event('1', ms(t2, -10), '6000001', 'Same user, in the HubSpot editor')] };
    expect(await recordWindowEvents(db.sql, p.job, JSON.stringify(page))).toBe(1);
    expect((await itemRows(p.planId))[0]).toMatchObject({ outcome: 'overwritten', writer_user_id: '6000001' });
  });
});

describe('a value HubSpot normalises on write', () => {
  it("a retried batch recognises its own write by HubSpot's answer to the write's first step, kept while the rest was lost", async () => {
    const p = await approved({ 1: { slug: 'My-New-Slug' }, 2: { slug: 'Other-Slug' } }, 'draft');
    expect(await preparePublishBatch(db.sql, p.job, p.ids, p.hs.read(['1', '2']).body)).toHaveLength(2);
    // The drafts were PATCHed (HubSpot lowercased the slugs) and pushed live; push-live's answer was lost for both.
    // The worker sends the drafts' answers as `pending` for item 1 only.
    const draft1 = { ...p.hs.get('1'), slug: 'my-new-slug', updated: '2026-02-01T00:00:00.100Z' };
    const pending = JSON.stringify({ results: [], pending: [draft1] });
    expect(await recordPublishBatch(db.sql, p.job, p.ids, 200, pending)).toEqual({ applied: 0, scheduled: 0, invalid: 0, writing: 2 });
    p.hs.edit('1', { slug: 'my-new-slug' });
    p.hs.edit('2', { slug: 'other-slug' });
    await expireLease(db.sql, p.job.id);
    const again = (await claimNextJob(db.sql, 'publisher-2', ['publish']))!;
    expect(await preparePublishBatch(db.sql, again, p.ids, p.hs.read(['1', '2']).body)).toEqual([]);
    const rows = await itemRows(p.planId);
    // Item 1: its own write (HubSpot's values as its answer had them); item 2: no answer kept, so HubSpot's
    // normalised value cannot be told from another's edit: a conflict, never written again (docs/publish.md).
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.writes])).toEqual([['1', 'applied', 1], ['2', 'conflict', 1]]);
  });
});
