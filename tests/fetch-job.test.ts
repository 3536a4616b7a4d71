// Fetch jobs end to end: real Postgres, the HubSpot simulator on loopback, and
// the worker invocation (or a hand-played worker doing exactly what
// functions/worker/fetch-job.ts does). Every test checks database state and
// the simulator's own counters.
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { parseFetchCheckpoint, processFetchJob, type FetchCheckpoint } from '../functions/worker/fetch-job.ts';
import { runWorkerInvocation, type InvocationSummary } from '../functions/worker/invocation.ts';
import type { JobContext, UnitCost } from '../functions/worker/job-context.ts';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { createHubSpotClient, type HubSpotClientOptions } from '../shared/hubspot/client.ts';
import { PAGE_SIZE } from '../shared/hubspot/content-types.ts';
import { silentLogger } from '../shared/log.ts';
import { completeFetchJob, saveFetchedPageRaw } from '../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { stopRun } from '../shared/sql/runs.ts';
import { saveFetchedPage } from '../scripts/lib/queue-test-helpers.ts';
import { startHubSpotSimulator, type HubSpotSimulator, type SimulatorOptions } from '../hubspot-sim/server.ts';
import { useTestDatabase } from './support/database.ts';
import { databaseDigest } from './support/queue-fixtures.ts';
import {
  allContent, connectSimPortal, expectSameAsSim, fetchAndSavePage, invokeUntilFinished, jobOfType, jobsOf, listRequests,
  liveIds, manualClient, notificationOf, runOf, simKeys, sleep, startFetchRun, stopAllRuns, waitUntil, type Row, type SimPortal,
} from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const db = useTestDatabase();
const sims: HubSpotSimulator[] = [];

async function newSim(options: SimulatorOptions = {}): Promise<HubSpotSimulator> {
  const sim = await startHubSpotSimulator(options);
  sims.push(sim);
  return sim;
}

afterEach(async () => {
  // Leave an empty queue for the next test (the worker claims any due job).
  await stopAllRuns(db.sql);
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

const POSTS = LIST_PATHS.blog_posts;
const total = (summaries: InvocationSummary[], key: keyof InvocationSummary) =>
  summaries.reduce((n, s) => n + (s[key] as number), 0);
const result = (job: Row) => job.result as Record<string, number>;

describe('fetch jobs against the HubSpot simulator', () => {
  it('fetches all eight types completely; a second fetch finds everything unchanged and adds no rows', async () => {
    const sim = await newSim();
    // Two HubDB tables of 1,300 rows: rows page inside a table and across tables.
    const p = await connectSimPortal(db.sql, sim, { sizes: { hubdb_rows: 2_600 }, hubdbTables: 2 });
    const counts = Object.fromEntries(CONTENT_TYPES.map((t) => [t, sim.items(p.hubspotPortalId, t).length])) as Record<ContentType, number>;
    expect(Math.min(...Object.values(counts))).toBeGreaterThan(0);

    const run1 = await startFetchRun(db.sql, p, CONTENT_TYPES);
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const s1 = await runWorkerInvocation(rt, 'complete-1');
    expect(s1).toMatchObject({ claimed: 8, completed: 8, failed: 0, retried: 0, released: 0, lost: 0 });
    expect(await runOf(db.sql, run1)).toMatchObject({ status: 'completed', jobs_total: 8, jobs_completed: 8 });
    expect((await notificationOf(db.sql, run1)).map((n) => n.kind)).toEqual(['run_completed']);

    for (const type of CONTENT_TYPES) {
      await expectSameAsSim(db.sql, sim, p, type);
      const job = await jobOfType(db.sql, run1, type);
      expect(job.status, type).toBe('completed');
      expect(job.attempts, type).toBe(1);
      expect(job.progress_done, type).toBe(counts[type]);
      expect(result(job), type).toMatchObject({ fetched: counts[type], added: counts[type], updated: 0, unchanged: 0, deleted: 0 });
    }
    // Page counts: 100 per page for the CMS types, 1,000 rows per page per HubDB table.
    expect(result(await jobOfType(db.sql, run1, 'blog_posts')).pages).toBe(Math.ceil(counts.blog_posts / PAGE_SIZE.blog_posts));
    expect(result(await jobOfType(db.sql, run1, 'hubdb_rows')).pages).toBe(4);
    // Each page requested once: no after-cursor repeats.
    const postAfters = listRequests(sim, p, POSTS).map((e) => e.after);
    expect(new Set(postAfters).size).toBe(postAfters.length);

    const run2 = await startFetchRun(db.sql, p, CONTENT_TYPES);
    const s2 = await runWorkerInvocation(rt, 'complete-2');
    expect(s2).toMatchObject({ claimed: 8, completed: 8 });
    expect((await runOf(db.sql, run2)).status).toBe('completed');
    for (const type of CONTENT_TYPES) {
      await expectSameAsSim(db.sql, sim, p, type);
      const job = await jobOfType(db.sql, run2, type);
      expect(result(job), type).toMatchObject({ fetched: counts[type], added: 0, updated: 0, unchanged: counts[type], deleted: 0 });
      const rows = await allContent(db.sql, p, type);
      expect(rows.length, `${type}: no duplicate or extra rows`).toBe(counts[type]);
      // Unchanged rows are not written again (still the first job's); the second job's pages say it saw them all.
      const first = await jobOfType(db.sql, run1, type);
      expect(rows.every((r) => r.deleted_at === null && String(r.last_seen_job_id) === String(first.id)), type).toBe(true);
      const [seen] = await db.sql`select count(distinct i)::int as n from private.full_fetch_pages f, unnest(f.content_ids) i
        where f.job_id = ${String(job.id)}`;
      expect(seen!.n, type).toBe(counts[type]);
    }
  });

  it('eight jobs of one portal from four concurrent workers never exceed a low HubSpot limit (shared budget)', async () => {
    // 30 + 10 + 3 + 1 + 1 + 1 + (1 + 3) + 2 = 52 requests > 40 per 10 s.
    const sizes = { blog_posts: 3_000, site_pages: 1_000, landing_pages: 300 };
    const sim = await newSim({ rateLimit: { maxPer10s: 40 } });
    const p = await connectSimPortal(db.sql, sim, { sizes });
    const runId = await startFetchRun(db.sql, p, CONTENT_TYPES);
    const workers = await Promise.all([0, 1, 2, 3].map(() =>
      testWorkerRuntime(db.connect(3), sim.url, { lanes: 2, rateLimit: { maxPer10s: 40 } })));
    const summaries = await Promise.all(workers.map((rt, i) => runWorkerInvocation(rt, `limited-${i}`)));

    expect(total(summaries, 'completed')).toBe(8);
    expect(total(summaries, 'claimed')).toBe(8);
    expect(summaries.filter((s) => s.claimed > 0).length, 'the jobs really ran on several workers').toBeGreaterThan(1);
    expect((await runOf(db.sql, runId)).status).toBe('completed');
    for (const type of CONTENT_TYPES) await expectSameAsSim(db.sql, sim, p, type);

    const stats = sim.stats();
    expect(stats.requests).toBeGreaterThan(40);
    expect(stats.rateLimited).toBe(0);
    expect(stats.peakPer10s).toBeLessThanOrEqual(40);
    // More than one window's worth of requests had to be spread over more than 10 s.
    const log = sim.requestLog();
    expect(log.at(-1)!.at - log[0]!.at).toBeGreaterThanOrEqual(9_000); // unthrottled: ~1-2 s

    // Control: the same workload with the budget off (no grant taken, nothing
    // learned: a high ceiling no longer turns it off, the learned limit applies)
    // draws 429s from the same simulator limit, so the assertions above can fail.
    const sim2 = await newSim({ rateLimit: { maxPer10s: 40 } });
    const p2 = await connectSimPortal(db.sql, sim2, { sizes });
    const control = await startFetchRun(db.sql, p2, CONTENT_TYPES);
    const unlimited = await Promise.all([0, 1, 2, 3].map(async () => ({
      ...(await testWorkerRuntime(db.connect(3), sim2.url, { lanes: 2 })),
      hubspot: (o: HubSpotClientOptions) => createHubSpotClient({ ...o, beforeRequest: undefined, onRateLimitHeaders: undefined, sleep: (ms) => sleep(Math.min(ms, 50)) }),
    })));
    await Promise.all(unlimited.map((rt, i) => runWorkerInvocation(rt, `unlimited-${i}`)));
    expect(sim2.stats().rateLimited).toBeGreaterThan(0);
    await stopRun(db.sql, control);
  }, 60_000);

  it('a job whose worker crashed after two saved pages is reclaimed and resumes from its checkpoint', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_200 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    const job = await claimNextJob(db.sql, 'doomed-worker', ['fetch']);
    expect(job?.runId).toBe(runId);
    expect(job!.attempts).toBe(1);

    // The doomed worker saves two pages, exactly like fetch-job.ts.
    const client = manualClient(sim, p);
    let checkpoint: FetchCheckpoint = parseFetchCheckpoint(job!.checkpoint);
    const cursorsUsed: (string | null)[] = [];
    for (let i = 0; i < 2; i++) {
      cursorsUsed.push(checkpoint.after);
      const { ids, next, counts } = await fetchAndSavePage(db.sql, client, job!, checkpoint);
      expect(counts).toMatchObject({ fetched: 100, added: 100, checkpoint: next });
      expect(ids).toHaveLength(100);
      checkpoint = next;
    }
    expect(checkpoint.finished).toBe(false);
    expect(await liveIds(db.sql, p, 'blog_posts')).toHaveLength(200);

    // ... and dies: its lease runs out.
    const back = await db.sql`update public.jobs set lease_expires_at = now() - interval '1 second'
                               where id = ${job!.id} and status = 'running'`;
    expect(back.count).toBe(1);
    const before = listRequests(sim, p, POSTS).length;
    expect(before).toBe(2);

    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const s = await runWorkerInvocation(rt, 'rescuer');
    expect(s).toMatchObject({ claimed: 1, completed: 1, failed: 0, lost: 0 });

    const done = await jobOfType(db.sql, runId, 'blog_posts');
    expect(done).toMatchObject({ status: 'completed', attempts: 2, worker_id: 'rescuer', last_error: null, progress_done: 1_200 });
    expect(result(done)).toMatchObject({ fetched: 1_200, added: 1_200, pages: 12, deleted: 0 });
    expect((await runOf(db.sql, runId)).status).toBe('completed');

    // The saved pages were not requested again: the rescuer started at the checkpoint.
    const posts = listRequests(sim, p, POSTS);
    expect(posts).toHaveLength(12);
    const rescued = posts.slice(before);
    expect(rescued[0]!.after).toBe(checkpoint.after);
    for (const cursor of cursorsUsed) expect(posts.filter((e) => e.after === cursor), `cursor ${cursor}`).toHaveLength(1);
    expect(new Set(posts.map((e) => e.after)).size).toBe(12);

    const rows = await allContent(db.sql, p, 'blog_posts');
    expect(rows).toHaveLength(1_200);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
    // The crashed holder's token is fenced off for good.
    expect(await saveFetchedPage(db.sql, job!, [{ id: 'zombie', updatedAt: null, data: {} }], { after: null, finished: true })).toBeNull();
    expect(await saveFetchedPageRaw(db.sql, job!, '{"results":[{"id":"zombie"}]}')).toBeNull();
    expect(await liveIds(db.sql, p, 'blog_posts')).not.toContain('zombie');
  });

  it('a type too big for one invocation is released (no attempt used) and resumed until complete', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 3_000 } });
    sim.setFaults({ slowMs: 100 }); // every request takes >= 100 ms: 30 pages >= 3 s
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    // fetch-job.ts keeps >= 3 s in reserve before starting a page, so the budget
    // must exceed 3 s for any page to be fetched; 4 s leaves about 1 s of pages.
    const rt = await testWorkerRuntime(db.sql, sim.url, { budgetMs: 4_000, minStartMs: 500, lanes: 1 });

    let lastDone = 0;
    let releases = 0;
    const summaries = await invokeUntilFinished(rt, db.sql, runId, {
      maxInvocations: 30,
      onEach: async (s) => {
        const job = await jobOfType(db.sql, runId, 'blog_posts');
        expect(job.last_error).toBeNull();
        expect(['pending', 'completed']).toContain(job.status);
        expect(s.failed + s.retried + s.lost).toBe(0);
        if (job.status === 'pending') {
          releases++;
          // Released, not failed: the attempt was given back and the checkpoint kept.
          expect(job.attempts).toBe(0);
          expect((job.run_after as Date).getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
          const cp = parseFetchCheckpoint(job.checkpoint);
          expect(cp.finished).toBe(false);
          expect(cp.after).not.toBeNull();
          expect(job.progress_done as number).toBeGreaterThan(lastDone);
          // Released once for lack of time, not claimed and released over and over.
          expect(s.released, JSON.stringify(s)).toBe(1);
          expect(s.claimed, JSON.stringify(s)).toBe(1);
        }
        lastDone = job.progress_done as number;
      },
    });
    expect(releases).toBeGreaterThanOrEqual(1);
    expect(summaries.length).toBe(releases + 1);

    const job = await jobOfType(db.sql, runId, 'blog_posts');
    expect(job).toMatchObject({ status: 'completed', attempts: 1, last_error: null, progress_done: 3_000 });
    expect(result(job)).toMatchObject({ fetched: 3_000, added: 3_000, pages: 30, deleted: 0 });
    expect((await runOf(db.sql, runId)).status).toBe('completed');
    // No page fetched twice across invocations.
    const afters = listRequests(sim, p, POSTS).map((e) => e.after);
    expect(afters).toHaveLength(30);
    expect(new Set(afters).size).toBe(30);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  }, 80_000);

  it('finishes with exact counts through 5xx storms, slow responses and dropped connections', async () => {
    const sim = await newSim({ seed: 11 });
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_500, hubdb_rows: 2_200 }, hubdbTables: 2 });
    sim.setFaults({ errorRate: 0.3, errorStatuses: [500, 502, 503, 504], slowMs: 250, slowRate: 0.25, dropRate: 0.05 });
    sim.failNext(2, 'drop');
    const runId = await startFetchRun(db.sql, p, CONTENT_TYPES, 10);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 2 });
    await invokeUntilFinished(rt, db.sql, runId, { maxInvocations: 12, makeRetriesDue: true });

    const stats = sim.stats();
    expect(stats.errorsInjected).toBeGreaterThan(5);
    expect(stats.dropped).toBeGreaterThanOrEqual(2);
    sim.clearFaults();
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed', jobs_completed: 8 });
    for (const type of CONTENT_TYPES) {
      await expectSameAsSim(db.sql, sim, p, type);
      const job = await jobOfType(db.sql, runId, type);
      const n = sim.items(p.hubspotPortalId, type).length;
      // Retried pages are saved once: no double counting, no duplicates.
      expect(result(job), type).toMatchObject({ fetched: n, added: n, updated: 0, deleted: 0 });
      expect((await allContent(db.sql, p, type)).length, type).toBe(n);
    }
  }, 80_000);

  it('a revoked token fails the job at once with a reconnect message, without leaking the token', async () => {
    const sim = await newSim();
    const token = `pat-na1-SECRET-${randomUUID()}`;
    const p = await connectSimPortal(db.sql, sim, { token, sizes: { blog_posts: 1_200 } });
    sim.setFaults({ slowMs: 60 });
    // blog_authors (1 page) is claimed first and completes; blog_posts loses its token mid-run.
    const runId = await startFetchRun(db.sql, p, ['blog_authors', 'blog_posts']);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const invocation = runWorkerInvocation(rt, 'revoked-worker');
    await waitUntil(() => listRequests(sim, p, POSTS).length >= 3, 20_000, 'three blog post requests');
    sim.revokeToken(token);
    const s = await invocation;
    expect(s).toMatchObject({ claimed: 2, completed: 1, failed: 1, retried: 0 });

    const posts = await jobOfType(db.sql, runId, 'blog_posts');
    expect(posts).toMatchObject({ status: 'failed', attempts: 1 });
    expect(posts.last_error).toMatch(/reconnect HubSpot/i);
    expect(posts.finished_at).not.toBeNull();
    // One 401 and nothing after it: no retries burnt on a dead token.
    const requests = listRequests(sim, p, POSTS);
    expect(requests.filter((e) => e.status === 401)).toHaveLength(1);
    expect(requests.at(-1)!.status).toBe(401);
    // Pages saved before the revocation stay (and are not marked deleted).
    const saved = (await allContent(db.sql, p, 'blog_posts'));
    expect(saved.length).toBe((posts.progress_done as number));
    expect(saved.length).toBeGreaterThanOrEqual(200);
    expect(saved.every((r) => r.deleted_at === null)).toBe(true);

    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 1, jobs_failed: 1 });
    const notes = await notificationOf(db.sql, runId);
    expect(notes.map((n) => n.kind)).toEqual(['run_partially_failed']);
    expect(notes[0]!.message).toMatch(/reconnect HubSpot/i);

    // Revoked before the run: every job fails on its first attempt, the run fails.
    const run2 = await startFetchRun(db.sql, p, ['site_pages', 'url_redirects']);
    const s2 = await runWorkerInvocation(rt, 'revoked-worker-2');
    expect(s2).toMatchObject({ claimed: 2, failed: 2, retried: 0 });
    for (const job of await jobsOf(db.sql, run2)) {
      expect(job).toMatchObject({ status: 'failed', attempts: 1 });
      expect(job.last_error).toMatch(/reconnect HubSpot/i);
    }
    expect((await runOf(db.sql, run2)).status).toBe('failed');
    expect((await notificationOf(db.sql, run2))[0]!.message).toMatch(/reconnect HubSpot/i);

    // The token appears nowhere users can see.
    const [leaks] = await db.sql`select
        (select count(*)::int from public.jobs j where j::text like ${'%' + token + '%'}) as jobs,
        (select count(*)::int from public.runs r where r::text like ${'%' + token + '%'}) as runs,
        (select count(*)::int from public.notifications n where n::text like ${'%' + token + '%'}) as notifications,
        (select count(*)::int from public.hubspot_content c where c.portal_id = ${p.portalId} and c::text like ${'%' + token + '%'}) as content`;
    expect(leaks).toEqual({ jobs: 0, runs: 0, notifications: 0, content: 0 });
  }, 40_000);

  it('items added and deleted upstream mid-fetch: deletions are marked, additions picked up, counts right', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_200 } });
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const base = await startFetchRun(db.sql, p, ['blog_posts']);
    await runWorkerInvocation(rt, 'baseline');
    expect((await runOf(db.sql, base)).status).toBe('completed');
    const original = simKeys(sim, p, 'blog_posts');
    const ordered = sim.items(p.hubspotPortalId, 'blog_posts').map((i) => i.key); // paging order
    expect(ordered).toHaveLength(1_200);

    // Second fetch, played by hand so upstream changes land between pages.
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    const job = await claimNextJob(db.sql, 'hand-worker', ['fetch']);
    expect(job?.runId).toBe(runId);
    const client = manualClient(sim, p);
    let checkpoint = parseFetchCheckpoint(job!.checkpoint);
    const first = await fetchAndSavePage(db.sql, client, job!, checkpoint);
    checkpoint = first.next;
    expect(first.ids).toEqual(ordered.slice(0, 100));

    const deletedSeen = sim.deleteItems(p.hubspotPortalId, 'blog_posts', ordered.slice(10, 15)); // already saved
    const deletedUnseen = sim.deleteItems(p.hubspotPortalId, 'blog_posts', ordered.slice(1_100, 1_107)); // not yet
    const touched = sim.touchItems(p.hubspotPortalId, 'blog_posts', ordered.slice(600, 602));
    const addedEarly = sim.addItems(p.hubspotPortalId, 'blog_posts', 4); // new ids sort last: this fetch sees them
    expect([deletedSeen.length, deletedUnseen.length, touched.length, addedEarly.length]).toEqual([5, 7, 2, 4]);

    let pages = 1;
    while (!checkpoint.finished) {
      const { next, counts } = await fetchAndSavePage(db.sql, client, job!, checkpoint);
      expect(counts).not.toBeNull();
      checkpoint = next;
      pages++;
      expect(pages).toBeLessThan(20);
    }
    const addedLate = sim.addItems(p.hubspotPortalId, 'blog_posts', 3); // after the last page: the next fetch's
    expect(await completeFetchJob(db.sql, job!)).toBe(true);

    const j2 = await jobOfType(db.sql, runId, 'blog_posts');
    const fetched2 = 1_200 - deletedUnseen.length + addedEarly.length;
    expect(j2.status).toBe('completed');
    expect(result(j2)).toMatchObject({
      fetched: fetched2, added: 4, updated: 2, unchanged: fetched2 - 4 - 2, deleted: deletedUnseen.length,
    });
    const rows2 = new Map((await allContent(db.sql, p, 'blog_posts')).map((r) => [r.hubspot_id as string, r]));
    expect(rows2.size).toBe(1_200 + 4); // deleted rows kept, not removed
    for (const key of deletedUnseen) expect(rows2.get(key)?.deleted_at, key).toBeInstanceOf(Date);
    for (const key of [...deletedSeen, ...addedEarly, ...touched]) expect(rows2.get(key)?.deleted_at, key).toBeNull();
    for (const key of addedLate) expect(rows2.has(key), key).toBe(false);

    // A later fetch marks the items deleted after they were seen and picks up the late additions.
    const run3 = await startFetchRun(db.sql, p, ['blog_posts']);
    const s3 = await runWorkerInvocation(rt, 'later');
    expect(s3.completed).toBe(1);
    const j3 = await jobOfType(db.sql, run3, 'blog_posts');
    const live3 = original.length - 12 + 7;
    expect(result(j3)).toMatchObject({ fetched: live3, added: 3, updated: 0, unchanged: live3 - 3, deleted: deletedSeen.length });
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
    const rows3 = await allContent(db.sql, p, 'blog_posts');
    expect(rows3).toHaveLength(1_200 + 7);
    expect(rows3.filter((r) => r.deleted_at !== null).map((r) => r.hubspot_id).sort()).toEqual([...deletedSeen, ...deletedUnseen].sort());
  });

  it('stop_run during a fetch: the worker is fenced off, the job and run end stopped, nothing written after', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 2_000 } });
    sim.setFaults({ slowMs: 150 });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const invocation = runWorkerInvocation(rt, 'stopped-worker');
    const progress = async () => (await jobOfType(db.sql, runId, 'blog_posts')).progress_done as number;
    await waitUntil(async () => (await progress()) >= 200, 20_000, 'two saved pages', 25);

    expect(await stopRun(db.sql, runId)).toBe(true);
    const stoppedAt = Date.now();
    const frozen = { rows: (await allContent(db.sql, p, 'blog_posts')).length, job: await jobOfType(db.sql, runId, 'blog_posts') };
    expect(frozen.job.status).toBe('stopped');
    expect(frozen.rows).toBe(frozen.job.progress_done);
    expect(frozen.rows).toBeLessThan(2_000);

    const s = await invocation;
    expect(s).toMatchObject({ claimed: 1, completed: 0, failed: 0, lost: 1 });
    await sleep(300);
    const after = await jobOfType(db.sql, runId, 'blog_posts');
    expect(after).toMatchObject({ status: 'stopped', last_error: null, progress_done: frozen.job.progress_done });
    expect(after.result).toEqual(frozen.job.result);
    expect(after.checkpoint).toEqual(frozen.job.checkpoint);
    expect((await allContent(db.sql, p, 'blog_posts')).length).toBe(frozen.rows);
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'stopped', jobs_stopped: 1 });
    expect((await notificationOf(db.sql, runId)).map((n) => n.kind)).toEqual(['run_stopped']);
    // The worker stopped asking HubSpot: at most the page already in flight came after the stop.
    expect(listRequests(sim, p, POSTS).filter((e) => e.at > stoppedAt).length).toBeLessThanOrEqual(1);
  }, 40_000);
});

/**
 * A JobContext as the invocation builds it, with the budget questions in the
 * test's hands: `outOfBudget` sees every page's measured cost and may act
 * between pages (change the simulator's faults, say).
 */
async function fetchContext(
  sim: HubSpotSimulator, p: SimPortal, job: ClaimedJob,
  opts: { outOfBudget?: (next: UnitCost, call: number) => string | null; timeLeft?: () => number; signal?: AbortSignal; client?: Partial<HubSpotClientOptions> } = {},
): Promise<{ ctx: JobContext; asked: UnitCost[] }> {
  const asked: UnitCost[] = [];
  const cpuAtStart = process.cpuUsage();
  const timeLeft = opts.timeLeft ?? (() => 60_000);
  const ctx: JobContext = {
    sql: db.sql,
    job,
    log: silentLogger,
    signal: opts.signal ?? new AbortController().signal,
    timeLeft,
    outOfBudget: (next = {}) => {
      asked.push(next);
      return opts.outOfBudget?.(next, asked.length) ?? null;
    },
    cpuMs: () => {
      const used = process.cpuUsage(cpuAtStart);
      return (used.user + used.system) / 1000;
    },
    hubspotForPortal: async () => createHubSpotClient({
      accessToken: p.token, basePath: sim.url, timeLeft, sleep: (ms) => sleep(Math.min(ms, 50)), ...opts.client,
    }),
    exportSink: localDirectorySink(await mkdtemp(path.join(tmpdir(), 'fetch-ctx-'))),
    now: Date.now,
  };
  return { ctx, asked };
}

async function claimOnly(p: SimPortal, type: ContentType): Promise<{ runId: string; job: ClaimedJob }> {
  const runId = await startFetchRun(db.sql, p, [type]);
  const job = await claimNextJob(db.sql, `ctx-worker-${randomUUID().slice(0, 6)}`, ['fetch']);
  expect(job?.runId).toBe(runId);
  return { runId, job: job! };
}

describe('the fetch job between pages (budget, deadline, lost lease)', () => {
  it('asks the budget before every page with its measured cost, and releases with the checkpoint when told to stop', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_000 } });
    const { runId, job } = await claimOnly(p, 'blog_posts');
    const { ctx, asked } = await fetchContext(sim, p, job, { outOfBudget: (_, call) => (call === 4 ? 'CPU budget spent' : null) });
    expect(await processFetchJob(ctx)).toEqual({ kind: 'released', reason: 'CPU budget spent' });

    // The first page was asked about too (no measurement yet); then each page's own wall and CPU time.
    expect(asked[0]).toEqual({});
    for (const cost of asked.slice(1)) {
      expect(cost.wallMs).toBeGreaterThan(0);
      expect(cost.cpuMs).toBeGreaterThanOrEqual(0);
    }
    expect(asked).toHaveLength(4);
    const released = await jobOfType(db.sql, runId, 'blog_posts');
    expect(released).toMatchObject({ status: 'pending', attempts: 0, last_error: null, progress_done: 300 });
    const cp = parseFetchCheckpoint(released.checkpoint);
    expect(cp.finished).toBe(false);
    expect(listRequests(sim, p, POSTS)).toHaveLength(3);

    // Resumed from that checkpoint: the rest, no page twice.
    const again = (await claimNextJob(db.sql, 'ctx-worker-2', ['fetch']))!;
    expect(again.id).toBe(job.id);
    const resumed = await fetchContext(sim, p, again);
    expect(await processFetchJob(resumed.ctx)).toEqual({ kind: 'completed' });
    const afters = listRequests(sim, p, POSTS).map((e) => e.after);
    expect(afters).toHaveLength(10);
    expect(new Set(afters).size).toBe(10);
    expect(afters[3]).toBe(cp.after);
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  });

  it('a stop before the first page releases the claim without asking HubSpot', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 300 } });
    const { runId, job } = await claimOnly(p, 'blog_posts');
    const { ctx } = await fetchContext(sim, p, job, { outOfBudget: () => 'wall-clock budget spent' });
    expect(await processFetchJob(ctx)).toEqual({ kind: 'released', reason: 'wall-clock budget spent' });
    expect(await jobOfType(db.sql, runId, 'blog_posts')).toMatchObject({ status: 'pending', attempts: 0, progress_done: 0, checkpoint: null });
    expect(listRequests(sim, p, POSTS)).toHaveLength(0);
  });

  it('a Retry-After past the deadline parks the job until then with its checkpoint (no attempt used, no error)', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_000 } });
    const { runId, job } = await claimOnly(p, 'blog_posts');
    const deadline = Date.now() + 30_000;
    const { ctx } = await fetchContext(sim, p, job, {
      timeLeft: () => deadline - Date.now(),
      // After two saved pages HubSpot starts answering 429 with Retry-After: 60 (past the 30 s deadline).
      outOfBudget: (_, call) => {
        if (call === 3) sim.setFaults({ forced429Rate: 1, retryAfterSeconds: 60 });
        return null;
      },
      client: { sleep: (ms) => Promise.reject(new Error(`slept ${ms} ms`)) }, // any sleep would fail the job
    });
    const outcome = await processFetchJob(ctx);
    expect(outcome).toMatchObject({ kind: 'released', reason: 'HubSpot asked to wait 60 s' });
    const released = await jobOfType(db.sql, runId, 'blog_posts');
    expect(released).toMatchObject({ status: 'pending', attempts: 0, last_error: null, progress_done: 200, waiting_reason: 'HubSpot asked to wait 60 s' });
    // Not due again before HubSpot's wait is over: no invocation claims it only to meet the same 429.
    expect((released.run_after as Date).getTime()).toBeGreaterThan(Date.now() + 50_000);
    const cp = parseFetchCheckpoint(released.checkpoint);
    expect(cp).toEqual({ after: listRequests(sim, p, POSTS)[2]!.after, finished: false });
    expect(listRequests(sim, p, POSTS).map((e) => e.status)).toEqual([200, 200, 429]);
  });

  it('a 429 with Retry-After past the invocation deadline: parked through the worker, finished by an invocation after the wait', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 300 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    sim.setFaults({ forced429Rate: 1, retryAfterSeconds: 3_600 });
    const rt = await testWorkerRuntime(db.sql, sim.url, { lanes: 1 });
    const s1 = await runWorkerInvocation(rt, 'retry-after-1');
    expect(s1).toMatchObject({ claimed: 1, released: 1, failed: 0, retried: 0, lost: 0 });
    expect(await jobOfType(db.sql, runId, 'blog_posts')).toMatchObject({ status: 'pending', attempts: 0, last_error: null });
    expect(await runWorkerInvocation(rt, 'retry-after-early')).toMatchObject({ claimed: 0 });
    sim.clearFaults();
    // The hour HubSpot asked for has passed (back-dated, not slept).
    await db.sql`update public.jobs set run_after = now() where run_id = ${runId}`;
    const s2 = await runWorkerInvocation(rt, 'retry-after-2');
    expect(s2).toMatchObject({ claimed: 1, completed: 1 });
    await expectSameAsSim(db.sql, sim, p, 'blog_posts');
  });

  it('a lost job lease (signal) mid-request stops the job at once: lost, and nothing written', async () => {
    const sim = await newSim();
    const p = await connectSimPortal(db.sql, sim, { sizes: { blog_posts: 1_000 } });
    const { runId, job } = await claimOnly(p, 'blog_posts');
    const lease = new AbortController();
    const { ctx } = await fetchContext(sim, p, job, {
      signal: lease.signal,
      outOfBudget: (_, call) => {
        if (call === 2) sim.setFaults({ slowMs: 60_000 }); // the second page hangs
        return null;
      },
    });
    const outcome = processFetchJob(ctx);
    await waitUntil(() => listRequests(sim, p, POSTS).length === 2, 10_000, 'the second page request');
    const digest = await databaseDigest(db.sql, { budgets: false });
    lease.abort(new Error('job lease lost'));
    expect(await outcome).toEqual({ kind: 'lost', reason: 'job lease lost' });
    expect(await databaseDigest(db.sql, { budgets: false })).toBe(digest);
    expect(await jobOfType(db.sql, runId, 'blog_posts')).toMatchObject({ status: 'running', progress_done: 100 });
    sim.clearFaults();
  });
});
