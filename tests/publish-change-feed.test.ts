// The change feed's rule under a publish (0160, private.write_published_copy):
// within a portal and type, change_seq follows commit order, so a reader that
// moves its cursor to the last number it saw never skips a change. Many real
// connections at once: a fetch saving pages of a type and a publish recording
// applied items of the same type, each holding its transaction open a moment
// after its write (the window in which a number drawn earlier could commit
// later: the publish's longer than a whole fetch page, so that without the
// shared lock pages would commit inside it), while a reader polls the feed.
// Every row's last change must have been seen.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../shared/db.ts';
import { saveFetchedPageRaw } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { approvePublishPlan, nextPublishItems, preparePublishBatch, recordPublishBatch } from '../shared/sql/publish.ts';
import { createRun, stopRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { addEdit, cmsItem, HubSpotItems, makePlan, seedCopy } from './support/publish-fixtures.ts';

const db = useTestDatabase();
const T0 = '2026-01-10T00:00:00.000Z';
const PUBLISHED = 24; // items 1..24 edited and published, one per batch
const FETCHED = 24; // items 101..124 changed by the fetch, 4 per page
const MAX_PAGES = 400; // the fetch saves pages until the publish is done

describe('the change feed while a fetch and a publish write one type', () => {
  it('never skips a change: every row\'s last change_seq is seen by a reader polling its cursor', async () => {
    const portal = await createUserWithPortal(db.sql);
    const hs = new HubSpotItems('site_pages').put(
      ...Array.from({ length: PUBLISHED }, (_, i) => cmsItem(String(i + 1), T0)),
      ...Array.from({ length: FETCHED }, (_, i) => cmsItem(String(101 + i), T0)));
    await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
    for (let i = 1; i <= PUBLISHED; i++) await addEdit(db.sql, portal, 'site_pages', String(i), T0, { name: `Published ${i}` });
    const plan = await makePlan(db.sql, portal, { site_pages: hs });
    const publishRun = await approvePublishPlan(db.sql, plan.planId, portal.userId);
    const fetchRun = await createRun(db.sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'fetch', contentTypes: ['site_pages'] });
    const publishJob = (await claimNextJob(db.sql, 'publisher', ['publish']))!;
    const fetchJob = (await claimNextJob(db.sql, 'fetcher', ['fetch']))!;
    expect([publishJob.runId, fetchJob.runId]).toEqual([publishRun, fetchRun.runId]);
    const [start] = await db.sql`select coalesce(max(change_seq), 0)::text as c from public.hubspot_content where portal_id = ${portal.portalId}`;

    const [fetcher, publisher, reader] = [db.connect(1), db.connect(1), db.connect(1)];
    let writing = 2;
    let published = false;
    const seen = new Set<string>();
    const read = async (cursor: string): Promise<string> => {
      const rows = await reader`select hubspot_id, change_seq::text from public.hubspot_content
        where portal_id = ${portal.portalId} and content_type = 'site_pages' and change_seq > ${cursor}::bigint and change_seq > 0
        order by change_seq limit 200`;
      for (const r of rows) seen.add(`${r.hubspot_id}@${r.change_seq}`);
      return rows.length > 0 ? (rows.at(-1)!.change_seq as string) : cursor;
    };
    const polling = (async () => {
      let cursor = start!.c as string;
      while (writing > 0) cursor = await read(cursor);
      for (let next = await read(cursor); next !== cursor; next = await read(cursor)) cursor = next; // drained
    })();

    const fetching = (async () => {
      try {
        for (let page = 0; page < MAX_PAGES && (page < FETCHED || !published); page++) {
          const results = Array.from({ length: 4 }, (_, k) => cmsItem(String(101 + ((page * 4 + k) % FETCHED)), hs.tick(), { name: `Fetched ${page}` }));
          const body = JSON.stringify({ results, paging: { next: { after: String(page + 1) } } });
          await fetcher.begin(async (tx) => {
            expect(await saveFetchedPageRaw(tx as unknown as Sql, fetchJob, body)).not.toBeNull();
            await tx`select pg_sleep(0.002)`; // held open after its numbers were drawn
          });
        }
      } finally {
        writing--;
      }
    })();
    const publishing = (async () => {
      try {
        for (;;) {
          const [item] = (await nextPublishItems(publisher, publishJob, 1))!;
          if (!item) break;
          const toWrite = (await preparePublishBatch(publisher, publishJob, [item.itemId], hs.read([item.hubspotId]).body))!;
          const answer = hs.update(toWrite.map((w) => ({ id: w.hubspotId, fields: w.fields })));
          await publisher.begin(async (tx) => {
            expect(await recordPublishBatch(tx as unknown as Sql, publishJob as ClaimedJob, [item.itemId], answer.status, answer.body))
              .toEqual({ applied: 1, scheduled: 0, invalid: 0, writing: 0 });
            await tx`select pg_sleep(0.02)`;
          });
        }
      } finally {
        published = true;
        writing--;
      }
    })();
    await Promise.all([fetching, publishing, polling]);

    const rows = await db.sql`select hubspot_id, change_seq::text, data ->> 'name' as name from public.hubspot_content
                               where portal_id = ${portal.portalId} and content_type = 'site_pages' and change_seq > ${start!.c}::bigint`;
    expect(rows.filter((r) => r.name.startsWith('Published'))).toHaveLength(PUBLISHED);
    expect(rows.filter((r) => r.name.startsWith('Fetched'))).toHaveLength(FETCHED);
    const missed = rows.filter((r) => !seen.has(`${r.hubspot_id}@${r.change_seq}`)).map((r) => `${r.hubspot_id}@${r.change_seq}`);
    expect(missed).toEqual([]);
    await stopRun(db.sql, fetchRun.runId!);
    await stopRun(db.sql, publishRun);
  });
});
