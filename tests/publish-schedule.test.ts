// Publish in mode schedule (supabase/schemas/0485-0498): the draft is
// written and scheduled, nothing is live yet: the item is `scheduled` (not
// `applied`), the copy keeps the live item, and the run's notification says
// when HubSpot publishes. A rollback writes the drafts back while they are
// not live (HubSpot has no way to cancel a schedule: it then publishes the
// fields as they were), restores live an item its schedule put live
// meanwhile, and leaves one changed by someone else.
import { beforeEach, describe, expect, it } from 'vitest';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import {
  approvePublishPlan, nextPublishItems, preparePublishBatch, prepareRestoreBatch, recordPublishBatch, recordRestoreBatch, rollbackPublishRun,
} from '../shared/sql/publish.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, notificationsOf, runRow } from './support/queue-fixtures.ts';
import { addEdit, batchAnswer, cmsItem, HubSpotItems, makePlan, seedCopy, type Item } from './support/publish-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

const T0 = '2026-01-10T00:00:00.000Z';

async function copyData(portalId: string, id: string) {
  const [row] = await db.sql`select data, hubspot_updated_at from public.hubspot_content
                              where portal_id = ${portalId} and content_type = 'site_pages' and hubspot_id = ${id}`;
  return row!;
}

async function itemRows(planId: string) {
  return [...await db.sql`select hubspot_id, outcome, writes, applied_updated_at, answer, restore_outcome, restore_message, restore_writes,
      restored_updated_at from public.publish_items i where plan_id = ${planId} order by i.id`];
}

/** HubSpot's draft of a page after our PATCH (and the schedule): its own update time, SCHEDULED. */
function draftOf(item: Item, fields: Record<string, unknown>, updated: string, publishAt: Date): Item {
  return { ...item, ...fields, updated, state: 'SCHEDULED', publishDate: publishAt.toISOString() };
}

describe('mode schedule', () => {
  it('items are scheduled, the copy left as it is; a rollback writes the drafts back, or restores live what went live', async () => {
    const portal = await createUserWithPortal(db.sql);
    const hs = new HubSpotItems('site_pages').put(cmsItem('1', T0), cmsItem('2', T0), cmsItem('3', T0));
    await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
    for (const id of ['1', '2', '3']) await addEdit(db.sql, portal, 'site_pages', id, T0, { name: `Scheduled ${id}` });
    const publishAt = new Date(Date.now() + 3_600_000);
    const plan = await makePlan(db.sql, portal, { site_pages: hs }, { mode: 'schedule', publishAt });
    const runId = await approvePublishPlan(db.sql, plan.planId, portal.userId);

    const job = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const ids = (await nextPublishItems(db.sql, job, 10))!.map((i) => i.itemId);
    const toWrite = (await preparePublishBatch(db.sql, job, ids, hs.read(['1', '2', '3']).body))!;
    expect(toWrite).toHaveLength(3);
    // The worker's answer: each draft as HubSpot answered its PATCH (the schedule request answers 204).
    const drafts = toWrite.map((w, n) => draftOf(hs.get(w.hubspotId), w.fields, `2026-02-01T00:00:0${n}.000Z`, publishAt));
    expect(await recordPublishBatch(db.sql, job, ids, 200, batchAnswer(drafts).body)).toEqual({ applied: 0, scheduled: 3, invalid: 0, writing: 0 });
    let rows = await itemRows(plan.planId);
    expect(rows.map((r) => [r.outcome, r.writes])).toEqual(Array(3).fill(['scheduled', 1]));
    expect(rows[0]!.applied_updated_at).toEqual(new Date('2026-02-01T00:00:00.000Z')); // the draft's update time
    // Nothing is live: the copy still holds the live page (the first fetch after publishAt brings the new one).
    expect((await copyData(portal.portalId, '1')).data).toEqual(hs.get('1'));
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed' });
    const at = publishAt.toISOString().slice(0, 16).replace('T', ' ');
    expect((await notificationsOf(db.sql, runId))[0]!.message).toBe(
      `Publish run completed: 3 of 3 items applied (3 scheduled: HubSpot publishes them at ${at} UTC).`);

    // Before the rollback: page 2 went live by its schedule (at its time, with our edit); page 3 was changed by someone.
    hs.put({ ...hs.get('2'), name: 'Scheduled 2', updated: new Date(publishAt.getTime() + 1000).toISOString() });
    hs.edit('3', { htmlTitle: 'Theirs' });
    const restoreRun = await rollbackPublishRun(db.sql, runId, portal.userId);
    const restorer = (await claimNextJob(db.sql, 'restorer', ['restore']))!;
    const items = (await nextPublishItems(db.sql, restorer, 10))!;
    expect(items.map((i) => [i.hubspotId, i.state])).toEqual([['1', null], ['2', null], ['3', null]]);
    const back = (await prepareRestoreBatch(db.sql, restorer, items.map((i) => i.itemId), hs.read(['1', '2', '3']).body))!;
    // Page 1 is not live yet: its draft is written back; page 2 is live: restored live, as an applied item now.
    expect(back.map((w) => [w.hubspotId, w.fields, w.draft ?? false])).toEqual([['1', { name: 'Page 1' }, true], ['2', { name: 'Page 2' }, false]]);
    rows = await itemRows(plan.planId);
    expect(rows.map((r) => [r.hubspot_id, r.outcome, r.restore_outcome])).toEqual([
      ['1', 'scheduled', 'restoring'], ['2', 'applied', 'restoring'], ['3', 'scheduled', 'conflict']]);
    expect(rows[1]!.applied_updated_at).toEqual(new Date(publishAt.getTime() + 1000));
    expect(rows[2]!.restore_message).toMatch(/^changed in HubSpot since our schedule/);

    const restoredDraft = draftOf(hs.get('1'), { name: 'Page 1' }, '2026-02-01T00:00:09.000Z', publishAt);
    const live = hs.update([{ id: '2', fields: { name: 'Page 2' } }]);
    const answer = `[${live.body},${batchAnswer([restoredDraft]).body}]`;
    const sent = back.map((w) => w.itemId);
    expect(await recordRestoreBatch(db.sql, restorer, sent, 200, answer)).toEqual({ restored: 2, invalid: 0, restoring: 0 });
    rows = await itemRows(plan.planId);
    expect(rows.map((r) => [r.hubspot_id, r.restore_outcome, r.restore_writes])).toEqual([['1', 'restored', 1], ['2', 'restored', 1], ['3', 'conflict', 0]]);
    expect(rows[0]!.restore_message).toMatch(/^its draft written back: HubSpot has no way to cancel a schedule, so it still publishes the draft at /);
    // The copy: page 1 untouched (nothing live changed), page 2 as restored live.
    expect((await copyData(portal.portalId, '1')).data).toEqual(cmsItem('1', T0));
    expect((await copyData(portal.portalId, '2')).data).toEqual(hs.get('2'));
    expect(await completeJob(db.sql, restorer)).toBe(true);
    expect(await runRow(db.sql, restoreRun)).toMatchObject({ status: 'partially_failed' });
    expect((await notificationsOf(db.sql, restoreRun))[0]!.message).toBe(
      'Restore run partially failed: 2 of 3 items restored, 1 changed in HubSpot since our write (not restored).');
  });
});
