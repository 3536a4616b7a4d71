// Dedup: at most one active job per portal + kind + content type, race-free.
import { describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { createRun, stopRun } from '../shared/sql/runs.ts';
import { saveFetchedPage } from '../scripts/lib/queue-test-helpers.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, jobsOfRun, pgError, runRow } from './support/queue-fixtures.ts';

const db = useTestDatabase();

async function activeJobs(portalId: string) {
  return [...(await db.sql`select run_id, kind, content_type from public.jobs
                             where portal_id = ${portalId} and status in ('pending', 'running')
                             order by kind, content_type`)];
}

describe('create_run dedup', () => {
  it('50 concurrent create_run calls for all 8 types make exactly one run with one job per type', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const conns = Array.from({ length: 50 }, () => db.connect(1));
    await Promise.all(conns.map((c) => c`select 1`)); // connect first, so the calls really race
    const results = await Promise.all(
      conns.map((c) => createRun(c, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: CONTENT_TYPES })),
    );

    const winners = results.filter((r) => r.runId !== null);
    expect(winners).toHaveLength(1);
    expect([...winners[0]!.createdTypes].sort()).toEqual([...CONTENT_TYPES].sort());
    expect(winners[0]!.duplicateTypes).toEqual([]);
    for (const r of results.filter((x) => x.runId === null)) {
      expect(r.createdTypes).toEqual([]);
      expect([...r.duplicateTypes].sort()).toEqual([...CONTENT_TYPES].sort());
    }

    const active = await activeJobs(portalId);
    expect(active).toHaveLength(8);
    expect(new Set(active.map((j) => j.content_type)).size).toBe(8);
    expect(new Set(active.map((j) => j.run_id))).toEqual(new Set([winners[0]!.runId]));
    // The losers left no run row behind.
    const runs = await db.sql`select id, jobs_total, content_types from public.runs where portal_id = ${portalId}`;
    expect(runs.map((r) => r.id)).toEqual([winners[0]!.runId]);
    expect(runs[0]).toMatchObject({ jobs_total: 8 });
    await drainQueue(db.sql);
  });

  it('concurrent calls listing the types in different orders never deadlock', async () => {
    const conns = Array.from({ length: 16 }, () => db.connect(1));
    await Promise.all(conns.map((c) => c`select 1`));
    const forward = [...CONTENT_TYPES];
    const backward = [...CONTENT_TYPES].reverse();
    for (let round = 0; round < 6; round++) {
      const { userId, portalId } = await createUserWithPortal(db.sql);
      const orders = conns.map((_, i) => (i % 2 ? backward : forward));
      const settled = await Promise.allSettled(
        conns.map((c, i) => createRun(c, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: orders[i]! })),
      );
      const errors = settled.filter((s) => s.status === 'rejected').map((s) => String((s as PromiseRejectedResult).reason));
      expect(errors).toEqual([]);
      const results = settled.map((s) => (s as PromiseFulfilledResult<Awaited<ReturnType<typeof createRun>>>).value);
      // Every type was created exactly once across all the calls.
      expect(results.flatMap((r) => r.createdTypes).sort()).toEqual([...CONTENT_TYPES].sort());
      results.forEach((r, i) => {
        // created and duplicate types keep the caller's order
        expect(r.createdTypes).toEqual(orders[i]!.filter((t) => r.createdTypes.includes(t)));
        expect(r.duplicateTypes).toEqual(orders[i]!.filter((t) => !r.createdTypes.includes(t)));
      });
      expect(await activeJobs(portalId)).toHaveLength(8);
      const runs = await db.sql`select id from public.runs where portal_id = ${portalId}`;
      expect(runs.map((r) => r.id).sort()).toEqual(results.filter((r) => r.runId).map((r) => r.runId).sort());
    }
    await drainQueue(db.sql);
  });

  it('partial duplicates create only the new types and report the rest', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const first = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages', 'blog_posts', 'hubdb_rows'] });
    expect(first.duplicateTypes).toEqual([]);

    const second = await createRun(db.sql, {
      portalId, requestedBy: userId, kind: 'fetch',
      contentTypes: ['blog_tags', 'site_pages', 'hubdb_rows', 'url_redirects'],
    });
    expect(second.runId).not.toBeNull();
    expect(second.createdTypes).toEqual(['blog_tags', 'url_redirects']);
    expect([...second.duplicateTypes].sort()).toEqual(['hubdb_rows', 'site_pages']);
    expect(await runRow(db.sql, second.runId!)).toMatchObject({ jobs_total: 2, content_types: ['blog_tags', 'url_redirects'] });
    expect((await jobsOfRun(db.sql, second.runId!)).map((j) => j.content_type).sort()).toEqual(['blog_tags', 'url_redirects']);
    expect(await runRow(db.sql, first.runId!)).toMatchObject({ jobs_total: 3 });

    // Another kind is not a duplicate; and all-duplicate requests write nothing.
    const exp = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['site_pages'] });
    expect(exp.createdTypes).toEqual(['site_pages']);
    const [before] = await db.sql`select count(*)::int as n from public.runs`;
    const dup = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['url_redirects', 'site_pages'] });
    expect(dup).toEqual({ runId: null, createdTypes: [], duplicateTypes: ['url_redirects', 'site_pages'] });
    const [after] = await db.sql`select count(*)::int as n from public.runs`;
    expect(after!.n).toBe(before!.n);
    // Another portal of the same user is independent.
    const other = await createUserWithPortal(db.sql);
    const r = await createRun(db.sql, { portalId: other.portalId, requestedBy: other.userId, kind: 'fetch', contentTypes: ['site_pages'] });
    expect(r.createdTypes).toEqual(['site_pages']);
    await drainQueue(db.sql);
  });

  it('a type can run again once its job has finished (completed or stopped)', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const input = { portalId, requestedBy: userId, kind: 'fetch' as const, contentTypes: ['site_pages'] as ContentType[] };
    const first = await createRun(db.sql, input);
    const job = (await claimNextJob(db.sql, 'w'))!;
    expect((await createRun(db.sql, input)).runId).toBeNull(); // running is active too
    expect(await completeJob(db.sql, job)).toBe(true);
    const second = await createRun(db.sql, input);
    expect(second.runId).not.toBeNull();
    expect(second.runId).not.toBe(first.runId);
    expect(await stopRun(db.sql, second.runId!)).toBe(true);
    expect((await createRun(db.sql, input)).createdTypes).toEqual(['site_pages']);
    await drainQueue(db.sql);
  });

  it('the unique index refuses a second active job even from a direct insert', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const r = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'] });
    const err = await pgError(() => db.sql`insert into public.jobs (run_id, portal_id, owner_id, kind, content_type)
                                          values (${r.runId}, ${portalId}, ${userId}, 'fetch', 'site_pages')`);
    expect(err.code).toBe('23505');
    await drainQueue(db.sql);
  });

  it('an export run takes each job\'s total from the live fetched content', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_posts'] });
    const job = (await claimNextJob(db.sql, 'w'))!;
    const items = ['1', '2', '3'].map((id) => ({ id, updatedAt: null, data: { id } }));
    expect(await saveFetchedPage(db.sql, job, items, null)).toMatchObject({ added: 3 });
    await db.sql`update public.hubspot_content set deleted_at = now() where portal_id = ${portalId} and hubspot_id = '3'`;
    const exp = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['blog_posts', 'site_pages'] });
    const jobs = await jobsOfRun(db.sql, exp.runId!);
    expect(Object.fromEntries(jobs.map((j) => [j.content_type, j.progress_total]))).toEqual({ blog_posts: 2, site_pages: 0 });
    // Explicit totals win.
    const { userId: u2, portalId: p2 } = await createUserWithPortal(db.sql);
    const t = await createRun(db.sql, { portalId: p2, requestedBy: u2, kind: 'fetch', contentTypes: ['site_pages', 'blog_tags'], totals: [7, 0] });
    const tj = await jobsOfRun(db.sql, t.runId!);
    expect(Object.fromEntries(tj.map((j) => [j.content_type, j.progress_total]))).toEqual({ site_pages: 7, blog_tags: 0 });
    await drainQueue(db.sql);
  });
});
