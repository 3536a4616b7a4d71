// Fetched pages: idempotent upserts with counts, checkpoints and progress;
// completing a fetch marks unseen items deleted and re-seen ones come back.
import { beforeEach, describe, expect, it } from 'vitest';
import type { ContentType } from '../shared/content-types.ts';
import { completeFetchJob } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { saveFetchedPage, type FetchedItem } from '../scripts/lib/queue-test-helpers.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { contentRows, drainQueue, expireLease, jobRow, notificationsOf, runRow } from './support/queue-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

const item = (id: string, updatedAt: string | null, data: Record<string, unknown> = { id }): FetchedItem => ({ id, updatedAt, data });

async function startFetch(portalId: string, userId: string, type: ContentType = 'blog_posts', kind: 'fetch' | 'export' = 'fetch'): Promise<ClaimedJob> {
  const r = await createRun(db.sql, { portalId, requestedBy: userId, kind, contentTypes: [type] });
  expect(r.createdTypes).toEqual([type]);
  const job = (await claimNextJob(db.sql, 'fetcher'))!;
  expect(job.runId).toBe(r.runId);
  return job;
}

describe('save_fetched_page', () => {
  it('upserts items idempotently and reports added / updated / unchanged', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const job = await startFetch(portalId, userId);
    const page1 = [item('a', '2026-01-01T00:00:00Z'), item('b', '2026-01-02T00:00:00Z'), item('c', null, { nested: { x: 1 } })];

    await db.sql`update public.jobs set lease_expires_at = now() + interval '5 seconds' where id = ${job.id}`;
    expect(await saveFetchedPage(db.sql, job, page1, { after: 'p2' }, 10)).toEqual({ fetched: 3, added: 3, updated: 0, unchanged: 0 });
    let row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({ checkpoint: { after: 'p2' }, progress_done: 3, progress_total: 10 });
    expect(row.result).toEqual({ fetched: 3, added: 3, updated: 0, unchanged: 0, pages: 1 });
    expect((row.lease_expires_at as Date).getTime()).toBeGreaterThan(Date.now() + 250_000); // saving a page extends the lease
    let content = await contentRows(db.sql, portalId);
    expect(content.map((c) => [c.hubspot_id, c.content_type, c.last_seen_job_id, c.deleted_at, c.owner_id])).toEqual([
      ['a', 'blog_posts', job.id, null, userId],
      ['b', 'blog_posts', job.id, null, userId],
      ['c', 'blog_posts', job.id, null, userId],
    ]);
    expect(content[2]!.data).toEqual({ nested: { x: 1 } });
    expect((content[0]!.hubspot_updated_at as Date).toISOString()).toBe('2026-01-01T00:00:00.000Z');

    // The same page again (a retried write) changes nothing but the counts.
    expect(await saveFetchedPage(db.sql, job, page1, { after: 'p2' })).toEqual({ fetched: 3, added: 0, updated: 0, unchanged: 3 });
    const again = await contentRows(db.sql, portalId);
    expect(again.map(({ fetched_at: _f, ...rest }) => rest)).toEqual(content.map(({ fetched_at: _f, ...rest }) => rest));

    // Changed timestamp, changed data, a new item and an in-page duplicate.
    const page2 = [item('a', '2026-03-01T00:00:00Z'), item('b', '2026-01-02T00:00:00Z', { title: 'new' }), item('d', null), item('d', null)];
    expect(await saveFetchedPage(db.sql, job, page2, { after: 'p3' }, null)).toEqual({ fetched: 3, added: 1, updated: 2, unchanged: 0 });
    row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({ checkpoint: { after: 'p3' }, progress_done: 9, progress_total: 10 });
    expect(row.result).toEqual({ fetched: 9, added: 4, updated: 2, unchanged: 3, pages: 3 });
    content = await contentRows(db.sql, portalId);
    expect(content.map((c) => c.hubspot_id)).toEqual(['a', 'b', 'c', 'd']);
    expect(content[1]!.data).toEqual({ title: 'new' });
    expect((content[0]!.hubspot_updated_at as Date).toISOString()).toBe('2026-03-01T00:00:00.000Z');

    // An empty last page still saves the checkpoint.
    expect(await saveFetchedPage(db.sql, job, [], null)).toEqual({ fetched: 0, added: 0, updated: 0, unchanged: 0 });
    expect(await jobRow(db.sql, job.id)).toMatchObject({ checkpoint: null, progress_done: 9 });
  });

  it('items of other portals and types are never touched', async () => {
    const a = await createUserWithPortal(db.sql);
    const b = await createUserWithPortal(db.sql);
    const jobA = await startFetch(a.portalId, a.userId, 'site_pages');
    await saveFetchedPage(db.sql, jobA, [item('1', null)], null);
    const jobB = await startFetch(b.portalId, b.userId, 'site_pages');
    expect(await saveFetchedPage(db.sql, jobB, [item('1', null, { other: true })], null)).toMatchObject({ added: 1 });
    expect(await completeFetchJob(db.sql, jobB)).toBe(true);
    const [rowA] = await contentRows(db.sql, a.portalId);
    expect(rowA).toMatchObject({ hubspot_id: '1', data: { id: '1' }, deleted_at: null, last_seen_job_id: jobA.id });
  });

  it('stores a ~2.4 KB item with lz4 where the server has it, else inline and uncompressed (never pglz)', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const job = await startFetch(portalId, userId, 'site_pages');
    // About what a site page weighs (the simulator's are ~2.4 KB of JSON), compressible text.
    const big = { id: 'big', html: 'lorem ipsum dolor sit amet '.repeat(90) };
    const small = { id: 'small' };
    await saveFetchedPage(db.sql, job, [item('big', null, big), item('small', null, small)], null);
    const [server] = await db.sql`select exists (select 1 from pg_settings
                                   where name = 'default_toast_compression' and 'lz4' = any (enumvals)) as lz4`;
    const rows = await db.sql`select hubspot_id, pg_column_compression(data) as method, pg_column_size(data) as stored,
                                     octet_length(data::text) as text_bytes
                                from public.hubspot_content where portal_id = ${portalId} order by hubspot_id`;
    const [options] = await db.sql`select coalesce(c.reloptions, '{}') as options from pg_class c
                                    where c.oid = 'public.hubspot_content'::regclass`;
    expect(rows.map((r) => r.hubspot_id)).toEqual(['big', 'small']);
    expect(Number(rows[0]!.text_bytes)).toBeGreaterThan(2100); // above TOAST's default target: a compression candidate
    expect(rows[1]!.method).toBeNull();
    if (server!.lz4) {
      expect(rows[0]!.method).toBe('lz4');
      expect(options!.options).not.toContain('toast_tuple_target=8160');
    } else {
      expect(rows[0]!.method).toBeNull(); // not pglz: stored as it came
      expect(Number(rows[0]!.stored)).toBeGreaterThan(2100);
      expect(options!.options).toContain('toast_tuple_target=8160');
    }
  });
});

describe('complete_fetch_job', () => {
  it('marks items this job never saw as deleted, keeps the rest, and re-seen items come back', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    // A first full fetch of blog_posts plus one site page (another type).
    const first = await startFetch(portalId, userId);
    await saveFetchedPage(db.sql, first, [item('a', null), item('b', null), item('c', null)], { after: 'x' });
    expect(await completeFetchJob(db.sql, first)).toBe(true);
    expect(await jobRow(db.sql, first.id)).toMatchObject({ status: 'completed', result: { fetched: 3, deleted: 0, pages: 1 } });
    const site = await startFetch(portalId, userId, 'site_pages');
    await saveFetchedPage(db.sql, site, [item('s1', null)], null);
    expect(await completeFetchJob(db.sql, site)).toBe(true);

    // The second fetch sees only a and c (b was deleted in HubSpot).
    const second = await startFetch(portalId, userId);
    expect(await saveFetchedPage(db.sql, second, [item('a', null), item('c', null)], null)).toMatchObject({ unchanged: 2 });
    expect(await completeFetchJob(db.sql, second)).toBe(true);
    let rows = await contentRows(db.sql, portalId);
    const byId = (id: string) => rows.find((r) => r.hubspot_id === id)!;
    expect(byId('b').deleted_at).toBeInstanceOf(Date);
    expect(byId('b').data).toEqual({ id: 'b' }); // kept, not lost
    expect(byId('a').deleted_at).toBeNull();
    expect(byId('c').deleted_at).toBeNull();
    expect(byId('s1').deleted_at).toBeNull(); // another type
    const secondRow = await jobRow(db.sql, second.id);
    expect(secondRow).toMatchObject({ status: 'completed', lease_expires_at: null });
    expect(secondRow.result).toMatchObject({ deleted: 1, fetched: 2 });
    expect(await runRow(db.sql, second.runId)).toMatchObject({ status: 'completed' });
    expect(await notificationsOf(db.sql, second.runId)).toHaveLength(1);

    // b shows up again: undeleted, counted as updated.
    const third = await startFetch(portalId, userId);
    expect(await saveFetchedPage(db.sql, third, [item('a', null), item('b', null), item('c', null)], null))
      .toEqual({ fetched: 3, added: 0, updated: 1, unchanged: 2 });
    rows = await contentRows(db.sql, portalId);
    expect(byId('b').deleted_at).toBeNull();
    expect(await completeFetchJob(db.sql, third)).toBe(true);
    rows = await contentRows(db.sql, portalId);
    expect(rows.filter((r) => r.deleted_at !== null)).toEqual([]);
  });

  it('a resumed job (reclaimed after a crash) keeps what its earlier attempt saw', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const first = await startFetch(portalId, userId);
    await saveFetchedPage(db.sql, first, [item('old', null)], null);
    expect(await completeFetchJob(db.sql, first)).toBe(true);

    const job = await startFetch(portalId, userId);
    await saveFetchedPage(db.sql, job, [item('p1', null), item('p2', null)], { after: 'page2' });
    await expireLease(db.sql, job.id);
    const resumed = (await claimNextJob(db.sql, 'second-worker'))!;
    expect(resumed).toMatchObject({ id: job.id, attempts: 2, checkpoint: { after: 'page2' }, progressDone: 2 });
    await saveFetchedPage(db.sql, resumed, [item('p3', null)], null);
    expect(await completeFetchJob(db.sql, resumed)).toBe(true);
    const rows = await contentRows(db.sql, portalId);
    expect(rows.map((r) => [r.hubspot_id, r.deleted_at === null])).toEqual([
      ['old', false], ['p1', true], ['p2', true], ['p3', true],
    ]);
    expect((await jobRow(db.sql, job.id)).result).toMatchObject({ fetched: 3, deleted: 1, pages: 2 });
  });

  it('refuses an export job (and changes nothing)', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const fetch = await startFetch(portalId, userId);
    await saveFetchedPage(db.sql, fetch, [item('a', null)], null);
    expect(await completeFetchJob(db.sql, fetch)).toBe(true);
    const exp = await startFetch(portalId, userId, 'blog_posts', 'export');
    const before = await jobRow(db.sql, exp.id);
    const contentBefore = await contentRows(db.sql, portalId);
    expect(await completeFetchJob(db.sql, exp)).toBe(false);
    expect(await jobRow(db.sql, exp.id)).toEqual(before);
    expect(await contentRows(db.sql, portalId)).toEqual(contentBefore);
  });
});
