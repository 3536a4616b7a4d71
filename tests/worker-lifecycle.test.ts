// The worker inside the edge runtime's lifecycle: a `beforeunload` releases
// every job in flight with its checkpoint (no attempt used), the CPU budget and
// the isolate's wall clock end an invocation in time, invocation leases are
// capped in Postgres under real concurrency, and an invocation that ran out of
// budget with work left starts the next one itself.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHandler } from '../functions/worker/handler.ts';
import { invocationLeases } from '../shared/sql/invocations.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { manualPlatform } from '../shared/edge-platform.ts';
import { useWorkerSuite } from './support/worker-suite.ts';
import { connectSimPortal, expectSameAsSim, jobOfType, runOf, startFetchRun, waitUntil } from './support/fetch-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const suite = useWorkerSuite({ resetInvocations: true });
const db = suite.db;

describe('worker lifecycle', () => {
  it('beforeunload mid-fetch releases the job with its checkpoint, no attempt used; the next invocation finishes it exactly', async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_posts: 2_500 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    suite.sim.setFaults({ slowMs: 40 }); // ~25 pages at 40 ms: time to shut down mid-job
    const platform = manualPlatform();
    const rt = { ...(await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 1 })), platform };
    const invocation = runWorkerInvocation(rt, 'shutdown-worker');
    await waitUntil(async () => ((await jobOfType(db.sql, runId, 'blog_posts')).progress_done as number) >= 300, 20_000, 'a few pages saved');
    platform.shutDown('cpu');
    const summary = await invocation;
    expect(summary).toMatchObject({ claimed: 1, released: 1, completed: 0, failed: 0, lost: 0, stopReason: 'shutdown' });

    const released = await jobOfType(db.sql, runId, 'blog_posts');
    expect(released).toMatchObject({ status: 'pending', attempts: 0 });
    expect(released.checkpoint).not.toBeNull();
    const doneAtRelease = released.progress_done as number;
    expect(doneAtRelease).toBeGreaterThanOrEqual(300);
    expect(doneAtRelease).toBeLessThan(2_500);

    suite.sim.clearFaults();
    const next = await runWorkerInvocation(await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 1 }), 'after-shutdown');
    expect(next).toMatchObject({ claimed: 1, completed: 1 });
    const job = await jobOfType(db.sql, runId, 'blog_posts');
    expect(job).toMatchObject({ status: 'completed', attempts: 1, progress_done: 2_500 });
    await expectSameAsSim(db.sql, suite.sim, p, 'blog_posts');
    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
  });

  it('a spent CPU budget releases the job between pages; invocations resume it without using attempts', async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_posts: 1_200 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts']);
    // Each invocation in a new isolate whose CPU clock charges 100 ms per reading: the 1,000 ms budget lasts a few pages.
    const rt = await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 1, cpuBudgetMs: 1_000 });
    const summaries = [];
    for (let i = 0; i < 40; i++) {
      let cpu = 0;
      const s = await runWorkerInvocation({ ...rt, platform: manualPlatform({ cpuMs: () => (cpu += 100) }) }, `cpu-${i}`);
      summaries.push(s);
      if ((await runOf(db.sql, runId)).finished_at) break;
    }
    expect(summaries.length).toBeGreaterThan(1);
    expect(summaries.slice(0, -1).every((s) => s.stopReason === 'cpu_budget' && s.released === 1)).toBe(true);
    expect(summaries.every((s) => s.failed === 0 && s.lost === 0 && s.retried === 0)).toBe(true);
    const job = await jobOfType(db.sql, runId, 'blog_posts');
    expect(job).toMatchObject({ status: 'completed', attempts: 1, progress_done: 1_200 });
    await expectSameAsSim(db.sql, suite.sim, p, 'blog_posts');
  });

  it("counts the wall clock from the isolate's start: an isolate near its limit claims nothing", async () => {
    const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_tags: 10 } });
    const runId = await startFetchRun(db.sql, p, ['blog_tags']);
    const platform = manualPlatform({ isolateStartedAt: Date.now() - 146_000 });
    const rt = {
      ...(await testWorkerRuntime(db.sql, suite.sim.url, { isolateWallClockMs: 150_000, wallReserveMs: 1_000, budgetMs: 120_000 })),
      platform,
    };
    const s = await runWorkerInvocation(rt, 'old-isolate');
    expect(s).toMatchObject({ claimed: 0, stopReason: 'time_budget' });
    expect((await jobOfType(db.sql, runId, 'blog_tags')).status).toBe('pending');
    // A fresh isolate takes it.
    const fresh = await runWorkerInvocation({ ...rt, platform: manualPlatform() }, 'fresh-isolate');
    expect(fresh).toMatchObject({ claimed: 1, completed: 1 });
  });

  it('caps concurrent invocations in Postgres: 24 callers on their own connections, cap 3, exactly 3 invocation leases', async () => {
    await db.sql`update private.worker_settings set max_concurrent_invocations = 3`;
    const pools = Array.from({ length: 24 }, () => db.connect(1));
    const results = await Promise.all(pools.map((sql) =>
      sql`select public.begin_worker_invocation(gen_random_uuid(), 'test', 60) as ok`.then((r) => r[0]!.ok as boolean)));
    expect(results.filter(Boolean)).toHaveLength(3);
    expect(await invocationLeases(db.sql)).toEqual({ active: 3, cap: 3 });
    // An expired invocation lease is freed by the next caller.
    await db.sql`update private.worker_invocations set lease_expires_at = now() - interval '1 second'`;
    const [again] = await db.sql`select public.begin_worker_invocation(gen_random_uuid(), 'test', 60) as ok`;
    expect(again!.ok).toBe(true);
    expect((await invocationLeases(db.sql)).active).toBe(1);
  });

  describe('handler', () => {
    const SECRET = 'worker-secret-lifecycle-0123456789';
    let server: Server;
    let url: string;
    let handler: (req: Request) => Promise<Response>;
    const statuses: number[] = [];

    beforeAll(async () => {
      // The worker served over loopback HTTP, so a continuation is a real POST.
      server = createServer(async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const response = await handler(new Request(`http://127.0.0.1${req.url}`, {
          method: req.method, headers: req.headers as Record<string, string>, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined,
        }));
        statuses.push(response.status);
        res.writeHead(response.status, Object.fromEntries(response.headers)).end(Buffer.from(await response.arrayBuffer()));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}/functions/v1/worker`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });
    const post = (body: unknown) =>
      fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${SECRET}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

    it('answers skipped at the cap, and 400 for a body it does not know', async () => {
      const platform = manualPlatform();
      handler = createWorkerHandler({ ...(await testWorkerRuntime(db.sql, suite.sim.url)), platform, acceptedSecrets: [SECRET] });
      await db.sql`update private.worker_settings set max_concurrent_invocations = 1`;
      await db.sql`select public.begin_worker_invocation(gen_random_uuid(), 'test', 60)`;
      const skipped = await post({ source: 'cron' });
      expect(skipped.status).toBe(200);
      expect(await skipped.json()).toMatchObject({ status: 'skipped', reason: 'INVOCATION_CAP' });
      const bad = await post({ mode: 'later' });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ code: 'INVALID_BODY' });
    });

    it('background mode answers 202 and works under waitUntil; budget spent with work left continues by itself until done', async () => {
      const p = await connectSimPortal(db.sql, suite.sim, { sizes: { blog_posts: 2_000, site_pages: 600 } });
      const runId = await startFetchRun(db.sql, p, ['blog_posts', 'site_pages']);
      // Invocations of 3.5 s of wall clock (3 s are kept in reserve) against a slowed HubSpot
      // (26 pages of 60 ms over 2 lanes, ~0.8 s): each invocation does part of the work.
      suite.sim.setFaults({ slowMs: 60 });
      const platform = manualPlatform();
      handler = createWorkerHandler({
        ...(await testWorkerRuntime(db.sql, suite.sim.url, { lanes: 2, budgetMs: 3_500, minStartMs: 200 })),
        platform,
        acceptedSecrets: [SECRET],
        continuation: { url, secret: SECRET },
      });
      statuses.length = 0;
      const res = await post({ source: 'test', mode: 'background' });
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ status: 'accepted' });
      await waitUntil(async () => !!(await runOf(db.sql, runId)).finished_at, 60_000, 'the run to finish through continuations');
      await platform.settled();
      expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
      // The first request plus at least one continuation, each accepted in the background.
      expect(statuses.filter((s) => s === 202).length).toBeGreaterThan(1);
      for (const type of ['blog_posts', 'site_pages'] as const) {
        expect(await jobOfType(db.sql, runId, type)).toMatchObject({ status: 'completed', attempts: 1 });
        await expectSameAsSim(db.sql, suite.sim, p, type);
      }
      expect((await invocationLeases(db.sql)).active).toBe(0);
      // Operators see how each invocation ended.
      const [row] = await db.sql`select public.queue_stats() -> 'recent_invocations' as r`;
      const recent = row!.r as { source: string; stop_reason: string; claimed: number }[];
      expect(recent.some((i) => i.source === 'test' && i.stop_reason === 'time_budget' && i.claimed > 0)).toBe(true);
      expect(recent.some((i) => i.source === 'continuation')).toBe(true);
    });
  });
});
