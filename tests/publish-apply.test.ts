// Publish, the apply and the rollback (supabase/schemas/0479-0502 and the
// settlement of 0308-0311): a publish job's re-read and write of each batch
// against HubSpot-shaped batch answers, the copy and the change feed updated,
// a retried batch that finds its own write (never a conflict, never written
// twice), foreign edits in the re-read–write window reported as overwritten,
// runs settled by their items, failed jobs failing their items, a rollback
// under the same conflict rule, and every holder call fenced.
import { beforeEach, describe, expect, it } from 'vitest';
import type { ContentType } from '../shared/content-types.ts';
import { claimJobs, claimNextJob, completeJob, failJob } from '../shared/sql/jobs.ts';
import {
  approvePublishPlan, createPublishPlan, nextPublishItems, preparePublishBatch, prepareRestoreBatch, publishRefusalOf, recordOverwrittenRevision,
  recordPlanBatch, recordPublishBatch, recordRestoreBatch, recordWindowEvents, rollbackPublishRun,
} from '../shared/sql/publish.ts';
import { stopRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, expireLease, notificationsOf, pgError, runRow } from './support/queue-fixtures.ts';
import {
  addEdit, applyBatch, batchAnswer, cmsItem, HubSpotItems, makePlan, runApply, seedCopy, seedRows, type Item,
} from './support/publish-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

const T0 = '2026-01-10T00:00:00.000Z';

/** A portal whose copy and HubSpot hold site pages 1..n, with the given name edits approved: the publish run. */
async function approved(names: Record<string, string>, n = 4) {
  const portal = await createUserWithPortal(db.sql);
  const hs = new HubSpotItems('site_pages').put(...Array.from({ length: n }, (_, i) => cmsItem(String(i + 1), T0)));
  await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
  for (const [id, name] of Object.entries(names)) await addEdit(db.sql, portal, 'site_pages', id, T0, { name });
  const plan = await makePlan(db.sql, portal, { site_pages: hs });
  const runId = await approvePublishPlan(db.sql, plan.planId, portal.userId);
  return { ...portal, hs, planId: plan.planId, runId };
}

async function items(planId: string) {
  return [...await db.sql`select id::text, hubspot_id, plan_status, outcome, outcome_message, writes, pre_updated_at, applied_updated_at,
      answer, current, overwritten_by, overwritten_revision_id, restore_outcome, restore_message, restore_writes
    from public.publish_items i where plan_id = ${planId} order by i.id`];
}

async function copyOf(portalId: string, type: ContentType, id: string) {
  const [row] = await db.sql`select data, hubspot_updated_at, change_seq::text, inserted_seq::text from public.hubspot_content
                              where portal_id = ${portalId} and content_type = ${type} and hubspot_id = ${id}`;
  return row!;
}

/** The change feed of a portal's type after a cursor, as docs/sync.md reads it. */
async function feed(portalId: string, type: ContentType, cursor: string) {
  return (await db.sql`select hubspot_id, case when deleted_at is not null then 'deleted' when inserted_seq > ${cursor}::bigint then 'inserted' else 'updated' end as change
    from public.hubspot_content where portal_id = ${portalId} and content_type = ${type} and change_seq > ${cursor}::bigint order by change_seq`)
    .map((r) => `${r.hubspot_id}:${r.change}`)
    .sort(); // (one statement's rows take their numbers in no particular order)
}

async function feedEnd(portalId: string): Promise<string> {
  const [row] = await db.sql`select coalesce(max(change_seq), 0)::text as c from public.hubspot_content where portal_id = ${portalId}`;
  return row!.c as string;
}

async function digest(): Promise<string> {
  const [row] = await db.sql`select md5(concat_ws('|',
      (select string_agg(t::text, ',' order by t.id) from public.publish_items t),
      (select string_agg(t::text, ',' order by t.id) from public.hubspot_content t),
      (select string_agg(t::text, ',' order by t.id) from public.jobs t))) as digest`;
  return row!.digest as string;
}

describe('a publish job', () => {
  it('re-reads, counts each write before it is sent, records HubSpot\'s answers; the copy and the change feed show the updates', async () => {
    const p = await approved({ 1: 'One', 2: 'Two' });
    const cursor = await feedEnd(p.portalId);
    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    expect(job.runId).toBe(p.runId);
    const next = (await nextPublishItems(db.sql, job, 100))!;
    expect(next.map((i) => [i.hubspotId, i.state, i.writes, i.after, i.before])).toEqual([
      ['1', null, 0, { name: 'One' }, { name: 'Page 1' }], ['2', null, 0, { name: 'Two' }, { name: 'Page 2' }]]);
    const ids = next.map((i) => i.itemId);
    const toWrite = (await preparePublishBatch(db.sql, job, ids, p.hs.read(['1', '2']).body))!;
    expect(toWrite.map((w) => [w.hubspotId, w.fields])).toEqual([['1', { name: 'One' }], ['2', { name: 'Two' }]]);
    let rows = await items(p.planId);
    expect(rows.map((r) => [r.outcome, r.writes])).toEqual([['writing', 1], ['writing', 1]]);
    expect(rows[0]!.pre_updated_at).toEqual(new Date(T0));
    const [pre] = await db.sql`select pre_image from public.publish_items where id = ${ids[0]!}`;
    expect(pre!.pre_image).toEqual(p.hs.get('1'));

    const answer = p.hs.update(toWrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
    expect(answer.status).toBe(200);
    expect(await recordPublishBatch(db.sql, job, ids, answer.status, answer.body)).toEqual({ applied: 2, scheduled: 0, invalid: 0, writing: 0 });
    rows = await items(p.planId);
    expect(rows.map((r) => [r.outcome, r.writes])).toEqual([['applied', 1], ['applied', 1]]);
    expect(rows[0]!.applied_updated_at).toEqual(new Date(p.hs.get('1').updated as string));
    expect(rows[0]!.answer).toEqual(p.hs.get('1'));
    const copy = await copyOf(p.portalId, 'site_pages', '1');
    expect(copy.data).toEqual(p.hs.get('1'));
    expect(copy.hubspot_updated_at).toEqual(new Date(p.hs.get('1').updated as string));
    expect(await feed(p.portalId, 'site_pages', cursor)).toEqual(['1:updated', '2:updated']);
    expect(await nextPublishItems(db.sql, job, 100)).toEqual([]);

    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ kind: 'publish', status: 'completed' });
    expect((await notificationsOf(db.sql, p.runId))[0]).toMatchObject({ kind: 'run_completed', message: 'Publish run completed: 2 of 2 items applied.' });
  });

  it('never writes a conflict; HubSpot\'s refusals are invalid with its message; the run settles partially failed by its items', async () => {
    const p = await approved({ 1: 'One', 2: 'Two', 3: 'Three', 4: 'Four' });
    p.hs.edit('2', { name: 'Changed in HubSpot' }); // between plan and apply
    p.hs.items.delete('3'); // deleted in HubSpot meanwhile
    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, job, 100))!.map((i) => i.itemId);
    // Item 4 shows its target already, at the plan's update time (nothing to write).
    const four = { ...p.hs.get('4'), name: 'Four' };
    const reread = batchAnswer([p.hs.get('1'), p.hs.get('2'), four]);
    const toWrite = (await preparePublishBatch(db.sql, job, ids, reread.body))!;
    expect(toWrite.map((w) => w.hubspotId)).toEqual(['1']);
    let rows = await items(p.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.writes])).toEqual([['1', 'writing', 1], ['2', 'conflict', 0], ['3', 'conflict', 0], ['4', 'unchanged', 0]]);
    expect(rows[1]!.current).toEqual({ name: 'Changed in HubSpot' });
    expect(rows[1]!.outcome_message).toMatch(/^changed in HubSpot since the plan \(updated .*, the plan read 2026-01-10T00:00:00.000Z\): not written$/);
    expect(rows[2]!.outcome_message).toBe('deleted in HubSpot since the plan (not written)');
    expect(p.hs.get('2').name).toBe('Changed in HubSpot');

    const answer = p.hs.update([{ id: '1', fields: { name: 'One' } }], { 1: 'Property values were not valid: name is too long' });
    expect(answer.status).toBe(207);
    expect(await recordPublishBatch(db.sql, job, [ids[0]!], answer.status, answer.body)).toEqual({ applied: 0, scheduled: 0, invalid: 1, writing: 0 });
    rows = await items(p.planId);
    expect(rows[0]).toMatchObject({ outcome: 'invalid', outcome_message: 'Property values were not valid: name is too long' });
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 1, jobs_failed: 0 });
    expect((await notificationsOf(db.sql, p.runId))[0]).toMatchObject({
      kind: 'run_partially_failed',
      message: 'Publish run partially failed: 0 of 4 items applied, 1 already as planned, 2 conflicts (changed in HubSpot, not written), 1 refused by HubSpot.',
    });
  });

  it('a whole-batch refusal (400) makes every sent item invalid; a run with nothing applied fails', async () => {
    const p = await approved({ 1: 'One', 2: 'Two' });
    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, job, 100))!.map((i) => i.itemId);
    expect(await preparePublishBatch(db.sql, job, ids, p.hs.read(['1', '2']).body)).toHaveLength(2);
    const refusal = JSON.stringify({ status: 'error', message: 'Invalid input JSON on line 1', correlationId: 'c-1', category: 'VALIDATION_ERROR' });
    expect((await pgError(() => recordPublishBatch(db.sql, job, ids, 429, refusal))).code).toBe('22023'); // 429: not an answer to record
    expect(await recordPublishBatch(db.sql, job, ids, 400, refusal)).toEqual({ applied: 0, scheduled: 0, invalid: 2, writing: 0 });
    expect((await items(p.planId)).map((r) => r.outcome_message)).toEqual(['Invalid input JSON on line 1', 'Invalid input JSON on line 1']);
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'failed' });
    expect((await notificationsOf(db.sql, p.runId))[0]!.message).toBe('Publish run failed: 0 of 2 items applied, 2 refused by HubSpot.');
  });

  it('a batch retried after a cut-off recognises its own write: applied, never a conflict, never written twice', async () => {
    const p = await approved({ 1: 'One', 2: 'Two', 3: 'Three' });
    const first = (await claimNextJob(db.sql, 'publisher-1', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, first, 100))!.map((i) => i.itemId);
    const toWrite = (await preparePublishBatch(db.sql, first, ids, p.hs.read(['1', '2', '3']).body))!;
    expect(toWrite).toHaveLength(3);
    // HubSpot applies the write for items 1 and 2 (3's request never got there)...
    const answer = p.hs.update(toWrite.filter((w) => w.hubspotId !== '3').map((w) => ({ id: w.hubspotId, fields: w.fields })));
    p.hs.edit('2', { htmlTitle: 'Another field, changed after our write' }); // survives: HubSpot's updates are sparse
    // ...and the worker is cut off before recording the answer; its job lease expires and another claims it.
    await expireLease(db.sql, first.id);
    const second = (await claimNextJob(db.sql, 'publisher-2', ['publish']))!;
    expect(second.id).toBe(first.id);
    const before = await digest();
    expect(await recordPublishBatch(db.sql, first, ids, answer.status, answer.body)).toBeNull(); // the old holder: fenced off
    expect(await nextPublishItems(db.sql, first, 100)).toBeNull();
    expect(await digest()).toBe(before);

    const again = (await nextPublishItems(db.sql, second, 100))!;
    expect(again.map((i) => [i.hubspotId, i.state, i.writes])).toEqual([['1', 'writing', 1], ['2', 'writing', 1], ['3', 'writing', 1]]);
    const cursor = await feedEnd(p.portalId);
    const rewrite = (await preparePublishBatch(db.sql, second, ids, p.hs.read(['1', '2', '3']).body))!;
    // 1 and 2 are its own earlier write; 3 was never applied (its update time is still T0): written now.
    expect(rewrite.map((w) => w.hubspotId)).toEqual(['3']);
    let rows = await items(p.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.writes])).toEqual([['1', 'applied', 1], ['2', 'applied', 1], ['3', 'writing', 2]]);
    expect(rows[1]!.applied_updated_at).toEqual(new Date(p.hs.get('2').updated as string));
    expect(await feed(p.portalId, 'site_pages', cursor)).toEqual(['1:updated', '2:updated']);
    const last = p.hs.update(rewrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
    expect(await recordPublishBatch(db.sql, second, [ids[2]!], last.status, last.body)).toEqual({ applied: 1, scheduled: 0, invalid: 0, writing: 0 });
    rows = await items(p.planId);
    expect(rows.map((r) => r.outcome)).toEqual(['applied', 'applied', 'applied']);
    expect(rows.filter((r) => r.outcome === 'conflict')).toEqual([]);
    expect(await completeJob(db.sql, second)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'completed' });
  });

  it('a same-field edit in HubSpot after a cut-off write is a conflict, not ours', async () => {
    const p = await approved({ 1: 'One' });
    const first = (await claimNextJob(db.sql, 'publisher-1', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, first, 100))!.map((i) => i.itemId);
    const toWrite = (await preparePublishBatch(db.sql, first, ids, p.hs.read(['1']).body))!;
    p.hs.update(toWrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
    p.hs.edit('1', { name: 'Theirs, after ours' });
    await expireLease(db.sql, first.id);
    const second = (await claimNextJob(db.sql, 'publisher-2', ['publish']))!;
    expect(await preparePublishBatch(db.sql, second, ids, p.hs.read(['1']).body)).toEqual([]);
    const [row] = await items(p.planId);
    expect(row).toMatchObject({ outcome: 'conflict', writes: 1, current: { name: 'Theirs, after ours' } });
    expect(row!.outcome_message).toMatch(/^changed in HubSpot while our write was in flight/);
  });

  it('a foreign edit inside the re-read–write window is reported overwritten, with the revision to restore', async () => {
    const p = await approved({ 1: 'One', 2: 'Two' });
    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, job, 100))!.map((i) => i.itemId);
    const toWrite = (await preparePublishBatch(db.sql, job, ids, p.hs.read(['1', '2']).body))!;
    const theirsAt = p.hs.edit('1', { name: 'Theirs, in the window' }).updated as string; // lands between our re-read and our write
    const answer = p.hs.update(toWrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
    expect(await recordPublishBatch(db.sql, job, ids, answer.status, answer.body)).toMatchObject({ applied: 2 });
    const event = (objectId: string, timestamp: string, fullName: string) =>
      ({ objectId, objectType: 'WEBSITE_PAGE', event: 'UPDATED', timestamp, fullName, userId: '9', objectName: `Page ${objectId}` });
    const page = JSON.stringify({ results: [
      event('1', theirsAt, 'Someone in HubSpot'),
      event('1', p.hs.get('1').updated as string, 'Our app'), // our own write: not in the window
      event('2', p.hs.get('2').updated as string, 'Our app'),
      { ...event('1', theirsAt, 'A blog event'), objectType: 'BLOG_POST' },
    ], paging: { next: { after: '1710081138123' } } });
    expect(await recordWindowEvents(db.sql, job, page)).toBe(1);
    expect(await recordWindowEvents(db.sql, job, page)).toBe(0); // the same page again: nothing new
    let rows = await items(p.planId);
    expect(rows.map((r) => r.outcome)).toEqual(['overwritten', 'applied']);
    expect(rows[0]!.overwritten_by).toEqual([event('1', theirsAt, 'Someone in HubSpot')]);
    expect(await recordOverwrittenRevision(db.sql, job, ids[0]!, '1712345')).toBe(true);
    expect(await recordOverwrittenRevision(db.sql, job, ids[1]!, '1712346')).toBe(false);
    rows = await items(p.planId);
    expect(rows.map((r) => r.overwritten_revision_id)).toEqual(['1712345', null]);
    expect((await pgError(() => recordWindowEvents(db.sql, job, '{"paging":{}}'))).code).toBe('22023');
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'completed' });
    expect((await notificationsOf(db.sql, p.runId))[0]!.message).toBe(
      'Publish run completed: 2 of 2 items applied; 1 overwrote an edit made in HubSpot meanwhile (listed with the revision to restore).');
  });

  it("a job that fails fails its items at once (the one in flight said to be perhaps written); a stopped run's items fail too", async () => {
    const portal = await createUserWithPortal(db.sql);
    const pages = new HubSpotItems('site_pages').put(cmsItem('1', T0), cmsItem('2', T0));
    const tags = new HubSpotItems('blog_tags').put({ id: 't1', name: 'News', slug: 'news', created: T0, updated: T0 });
    await seedCopy(db.sql, portal, 'site_pages', [...pages.items.values()]);
    await seedCopy(db.sql, portal, 'blog_tags', [...tags.items.values()]);
    await addEdit(db.sql, portal, 'site_pages', '1', T0, { name: 'One' });
    await addEdit(db.sql, portal, 'site_pages', '2', T0, { name: 'Two' });
    await addEdit(db.sql, portal, 'blog_tags', 't1', T0, { name: 'Updates' });
    const plan = await makePlan(db.sql, portal, { site_pages: pages, blog_tags: tags });
    const runId = await approvePublishPlan(db.sql, plan.planId, portal.userId);
    const claimed = await claimJobs(db.sql, 'publisher', 2, ['publish']);
    const job = claimed.find((j) => j.contentType === 'site_pages')!;
    const tagsJob = claimed.find((j) => j.contentType === 'blog_tags')!;
    const ids = (await nextPublishItems(db.sql, job, 1))!.map((i) => i.itemId);
    expect(await preparePublishBatch(db.sql, job, ids, pages.read(['1']).body)).toHaveLength(1);
    expect(await failJob(db.sql, job, 'HubSpot answered 500 three times', false)).toBe('failed');
    const rows = await items(plan.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome])).toEqual([['t1', null], ['1', 'failed'], ['2', 'failed']]);
    expect(rows[1]!.outcome_message).toBe("its job ended after our write was sent, before HubSpot's answer was recorded (it may be written): HubSpot answered 500 three times");
    expect(rows[2]!.outcome_message).toBe('not written: HubSpot answered 500 three times');
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'running' });
    expect(await applyBatch(db.sql, tagsJob, tags)).toBe(1);
    expect(await completeJob(db.sql, tagsJob)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 1, jobs_failed: 1 });
    expect((await notificationsOf(db.sql, runId))[0]!.message).toBe('Publish run partially failed: 1 of 3 items applied, 2 failed.');
  });

  it('a stopped publish run stays stopped; its unwritten items fail', async () => {
    const p = await approved({ 1: 'One' });
    expect(await stopRun(db.sql, p.runId)).toBe(true);
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'stopped' });
    expect((await items(p.planId))[0]).toMatchObject({ outcome: 'failed', outcome_message: 'not written: the run was stopped' });
    expect((await notificationsOf(db.sql, p.runId))[0]!.message).toBe('Publish run stopped: 0 of 1 items applied, 1 failed.');
  });

  it("reads HubDB rows of several tables from their tables' answers, sent as one array", async () => {
    const portal = await createUserWithPortal(db.sql);
    const row = (id: string, title: string): Item => ({ id, path: id, name: id, values: { title }, childTableId: '0', createdAt: T0, updatedAt: T0 });
    const seven = new HubSpotItems('hubdb_rows').put(row('101', 'Alpha'));
    const eight = new HubSpotItems('hubdb_rows').put(row('201', 'Beta'));
    await seedRows(db.sql, portal, { 7: [row('101', 'Alpha')], 8: [row('201', 'Beta')] });
    await addEdit(db.sql, portal, 'hubdb_rows', '7:101', T0, { values: { title: 'Alpha 2' } });
    await addEdit(db.sql, portal, 'hubdb_rows', '8:201', T0, { name: 'Renamed' });
    const plan = await createPublishPlan(db.sql, { portalId: portal.portalId, userId: portal.userId });
    const job = (await claimNextJob(db.sql, 'planner', ['plan']))!;
    const next = (await nextPublishItems(db.sql, job, 100))!;
    expect(next.map((i) => i.hubspotId)).toEqual(['7:101', '8:201']);
    // One request per table; the worker joins their answers as text: `[answer7,answer8]`.
    const body = `[${seven.read(['101']).body},${eight.read(['201']).body}]`;
    expect(await recordPlanBatch(db.sql, job, next.map((i) => i.itemId), body)).toEqual({ ready: 2, conflict: 0, invalid: 0, unchanged: 0, missing: 0 });
    expect((await db.sql`select before from public.publish_items i where plan_id = ${plan.planId} order by i.id`).map((r) => r.before))
      .toEqual([{ values: { title: 'Alpha' } }, { name: '201' }]);
  });

  it('writes a HubDB row\'s changed columns only, and stores the answer with its table', async () => {
    const portal = await createUserWithPortal(db.sql);
    const rows = new HubSpotItems('hubdb_rows').put(
      { id: '101', path: 'a', name: 'A', values: { title: 'Alpha', rank: 1 }, childTableId: '0', createdAt: T0, updatedAt: T0 },
      { id: '102', path: 'b', name: 'B', values: { title: 'Beta', rank: 2 }, childTableId: '0', createdAt: T0, updatedAt: T0 });
    await seedCopy(db.sql, portal, 'hubdb_rows', [...rows.items.values()], '7');
    await addEdit(db.sql, portal, 'hubdb_rows', '7:101', T0, { values: { rank: 5 } });
    const plan = await makePlan(db.sql, portal, { hubdb_rows: rows });
    expect((await db.sql`select before from public.publish_items where plan_id = ${plan.planId}`)[0]!.before).toEqual({ values: { rank: 1 } });
    const runId = await approvePublishPlan(db.sql, plan.planId, portal.userId);
    await runApply(db.sql, 'publish', runId, { hubdb_rows: rows });
    expect(rows.get('101').values).toEqual({ title: 'Alpha', rank: 5 });
    expect((await copyOf(portal.portalId, 'hubdb_rows', '7:101')).data).toEqual({ ...rows.get('101'), tableId: '7' });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed' });
  });
});

describe('every holder call is fenced', () => {
  it('a stale token writes nothing and is told to stop (null)', async () => {
    const p = await approved({ 1: 'One' });
    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, job, 100))!.map((i) => i.itemId);
    const stale = { id: job.id, fencingToken: String(BigInt(job.fencingToken) + 1000n) };
    const body = p.hs.read(['1']).body;
    const before = await digest();
    expect(await nextPublishItems(db.sql, stale, 10)).toBeNull();
    expect(await preparePublishBatch(db.sql, stale, ids, body)).toBeNull();
    expect(await recordPublishBatch(db.sql, stale, ids, 200, batchAnswer([p.hs.get('1')]).body)).toBeNull();
    expect(await recordWindowEvents(db.sql, stale, '{"results":[]}')).toBeNull();
    expect(await recordOverwrittenRevision(db.sql, stale, ids[0]!, '1')).toBeNull();
    expect(await prepareRestoreBatch(db.sql, stale, ids, body)).toBeNull();
    expect(await recordRestoreBatch(db.sql, stale, ids, 200, body)).toBeNull();
    // The holder itself, calling a restore function with its publish job: the wrong kind.
    expect((await pgError(() => prepareRestoreBatch(db.sql, job, ids, body))).message).toMatch(/is a publish job, not a restore job/);
    expect(await digest()).toBe(before);
    // An expired job lease is no lease.
    await expireLease(db.sql, job.id);
    const expired = await digest();
    expect(await preparePublishBatch(db.sql, job, ids, body)).toBeNull();
    expect(await digest()).toBe(expired);
  });
});

describe('rollback_publish_run', () => {
  it('writes the pre-images back, skipping (and listing) items changed in HubSpot since our write', async () => {
    const p = await approved({ 1: 'One', 2: 'Two', 3: 'Three' });
    const stranger = await createUserWithPortal(db.sql);
    const refused = async (call: () => Promise<unknown>) => publishRefusalOf(await call().then(() => null, (e) => e))?.code;
    expect(await refused(() => rollbackPublishRun(db.sql, p.runId, p.userId))).toBe('running');
    await runApply(db.sql, 'publish', p.runId, { site_pages: p.hs });
    expect(await runRow(db.sql, p.runId)).toMatchObject({ status: 'completed' });
    expect(p.hs.get('1').name).toBe('One');
    p.hs.edit('2', { metaDescription: 'Changed in HubSpot after our write' });

    expect(await refused(() => rollbackPublishRun(db.sql, p.runId, stranger.userId))).toBe('not_found');
    const restoreRun = await rollbackPublishRun(db.sql, p.runId, p.userId);
    expect(await refused(() => rollbackPublishRun(db.sql, p.runId, p.userId))).toBe('already_rolled_back');
    expect(await runRow(db.sql, restoreRun)).toMatchObject({ kind: 'restore', content_types: ['site_pages'] });
    const cursor = await feedEnd(p.portalId);
    await runApply(db.sql, 'restore', restoreRun, { site_pages: p.hs });
    const rows = await items(p.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.restore_outcome, r.restore_writes])).toEqual([
      ['1', 'applied', 'restored', 1], ['2', 'applied', 'conflict', 0], ['3', 'applied', 'restored', 1]]);
    expect(rows[1]!.restore_message).toMatch(/^changed in HubSpot since our write/);
    expect([p.hs.get('1').name, p.hs.get('2').name, p.hs.get('3').name]).toEqual(['Page 1', 'Two', 'Page 3']);
    expect((await copyOf(p.portalId, 'site_pages', '1')).data).toEqual(p.hs.get('1'));
    expect(await feed(p.portalId, 'site_pages', cursor)).toEqual(['1:updated', '3:updated']);
    expect(await runRow(db.sql, restoreRun)).toMatchObject({ status: 'partially_failed' });
    expect((await notificationsOf(db.sql, restoreRun))[0]!.message).toBe(
      'Restore run partially failed: 2 of 3 items restored, 1 changed in HubSpot since our write (not restored).');
    const [plan] = await db.sql`select restored_by, restore_run_id from public.publish_plans where id = ${p.planId}`;
    expect(plan).toEqual({ restored_by: p.userId, restore_run_id: restoreRun });
  });

  it('a retried restore batch recognises its own write', async () => {
    const p = await approved({ 1: 'One' });
    await runApply(db.sql, 'publish', p.runId, { site_pages: p.hs });
    const restoreRun = await rollbackPublishRun(db.sql, p.runId, p.userId);
    const first = (await claimNextJob(db.sql, 'restorer-1', ['restore']))!;
    const ids = (await nextPublishItems(db.sql, first, 10))!.map((i) => i.itemId);
    const toWrite = (await prepareRestoreBatch(db.sql, first, ids, p.hs.read(['1']).body))!;
    expect(toWrite.map((w) => w.fields)).toEqual([{ name: 'Page 1' }]);
    p.hs.update(toWrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
    await expireLease(db.sql, first.id);
    const second = (await claimNextJob(db.sql, 'restorer-2', ['restore']))!;
    expect(await applyBatch(db.sql, second, p.hs)).toBe(1);
    expect((await items(p.planId))[0]).toMatchObject({ restore_outcome: 'restored', restore_writes: 1 });
    expect(await completeJob(db.sql, second)).toBe(true);
    expect(await runRow(db.sql, restoreRun)).toMatchObject({ status: 'completed' });
  });
});
