// The worker entrypoint under the local edge runtime with hosted-shaped
// limits, made small enough to bind inside a test: the runtime's own
// `beforeunload("cpu")` cuts fetches and exports mid-work, and a HubSpot that
// answers `Retry-After: 60` near the deadline must not keep an invocation past
// its wall clock. Nothing may be lost, duplicated, published half-written, or
// cost an attempt.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, it } from 'vitest';
import { startLocalSystem, type LocalSystem } from '../scripts/lib/local-system.ts';
import type { ContentType } from '../shared/content-types.ts';
import { createRun } from '../shared/queue.ts';
import { useTestDatabase } from './support/database.ts';
import { connectSimPortal, expectSameAsSim, jobsOf, runOf, startFetchRun, type SimPortal } from './support/fetch-fixtures.ts';

const db = useTestDatabase();
const systems: LocalSystem[] = [];
afterAll(async () => {
  await Promise.all(systems.map((s) => s.stop()));
});

/** Invokes the worker (as cron would) until the run settles; returns the invocation summaries. */
async function driveUntilSettled(sys: LocalSystem, runId: string, maxInvocations: number): Promise<Record<string, unknown>[]> {
  const summaries: Record<string, unknown>[] = [];
  for (let i = 0; i < maxInvocations; i++) {
    const res = await fetch(sys.functions.functionUrl('worker'), {
      method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' }, body: '{"source":"test"}',
    });
    summaries.push({ status: res.status, ...((await res.json().catch(() => ({}))) as Record<string, unknown>) });
    if ((await runOf(db.sql, runId)).finished_at) return summaries;
  }
  const jobs = await db.sql`select content_type, status, attempts, run_after > now() as later, lease_expires_at > now() as leased, worker_id, last_error
    from public.jobs where run_id = ${runId}`;
  throw new Error(`run ${runId} did not settle in ${maxInvocations} invocations: ${JSON.stringify(summaries.slice(-2))}; jobs ${JSON.stringify(jobs)}; ` +
    `runtime ${JSON.stringify(sys.functions.stats().worker)}; worker warnings ` +
    JSON.stringify((sys.functions.output.get('worker') ?? []).filter((l) => /"level":"(warn|error)"|beforeunload/.test(l)).slice(-30)));
}

describe('worker under enforced edge limits', () => {
  it('beforeunload("cpu") mid-fetch and mid-export: released with checkpoints, resumed, nothing lost, duplicated or half-published', async () => {
    // CPU limits small enough that one isolate can do neither the whole fetch nor
    // the whole export: retire at 100 ms, beforeunload at 40% of 400 ms (hosted
    // keeps 10% of 2 s, 200 ms, for the release; this keeps 240 ms), killed at
    // 400 ms. The worker's own CPU budget is set out of the way, so the runtime's
    // beforeunload is what stops it.
    const sys = await startLocalSystem(db.url, {
      limits: { cpuSoftLimitMs: 100, cpuHardLimitMs: 400, beforeunloadCpuPct: 40 },
      env: { WORKER_CPU_BUDGET_MS: '60000', WORKER_CONCURRENCY: '2', WORKER_CONTINUE: '0' },
    });
    systems.push(sys);
    const types: ContentType[] = ['blog_posts', 'hubdb_rows', 'site_pages'];
    // ~68k items: more than one isolate's CPU both to fetch and to export.
    const p: SimPortal = await connectSimPortal(db.sql, sys.sim, { sizes: { blog_posts: 6_000, hubdb_rows: 60_000, site_pages: 2_000 }, hubdbTables: 6 });
    const runId = await startFetchRun(db.sql, p, types);
    const fetchSummaries = await driveUntilSettled(sys, runId, 200);

    expect(await runOf(db.sql, runId)).toMatchObject({ status: 'completed' });
    for (const job of await jobsOf(db.sql, runId)) expect(job, String(job.content_type)).toMatchObject({ status: 'completed', attempts: 1 });
    for (const t of types) await expectSameAsSim(db.sql, sys.sim, p, t);

    // Export the same types. Postgres does the export's work, so the worker spends
    // far less CPU on it than on the fetch (~2 µs a row): a second runtime with
    // beforeunload at 15% of 400 ms (60 ms, 340 ms kept for the release) makes
    // sure no single isolate can do it all.
    const exportSys = await startLocalSystem(db.url, {
      limits: { cpuSoftLimitMs: 30, cpuHardLimitMs: 400, beforeunloadCpuPct: 15 },
      env: { WORKER_CPU_BUDGET_MS: '60000', WORKER_CONCURRENCY: '2', WORKER_CONTINUE: '0' },
    });
    systems.push(exportSys);
    const exp = await createRun(db.sql, { portalId: p.portalId, requestedBy: p.userId, kind: 'export', contentTypes: types });
    const exportSummaries = await driveUntilSettled(exportSys, exp.runId!, 300);
    expect(await runOf(db.sql, exp.runId!)).toMatchObject({ status: 'completed' });
    const published: string[] = [];
    for (const job of await jobsOf(db.sql, exp.runId!)) {
      expect(job, String(job.content_type)).toMatchObject({ status: 'completed', attempts: 1 });
      const result = job.result as { rows: number; location: string };
      const [live] = await db.sql`select count(*)::int as n from public.hubspot_content
        where portal_id = ${p.portalId} and content_type = ${job.content_type as string} and deleted_at is null`;
      expect(result.rows).toBe(live!.n);
      const records = parse(await readFile(result.location, 'utf8'), { relax_column_count: false }) as string[][];
      // The header plus one record per stored row, each HubSpot id once.
      expect(records[0]!.slice(0, 2)).toEqual(['hubspot_id', 'hubspot_updated_at']);
      expect(records.length - 1, String(job.content_type)).toBe(live!.n);
      const ids = records.slice(1).map((r) => r[0]);
      expect(new Set(ids).size).toBe(ids.length);
      published.push(path.basename(result.location));
    }
    // Only complete files carry a final name.
    const folder = path.dirname((((await jobsOf(db.sql, exp.runId!))[0]!.result) as { location: string }).location);
    const finals = (await readdir(folder)).filter((f) => f.endsWith('.csv'));
    expect(finals.sort()).toEqual(published.sort());

    // The runtime really cut the work, in both phases, and never had to kill an isolate.
    const released = (summaries: Record<string, unknown>[]) => summaries.reduce((n, s) => n + Number(s.released ?? 0), 0);
    for (const [phase, system, summaries] of [['fetch', sys, fetchSummaries], ['export', exportSys, exportSummaries]] as const) {
      const stats = system.functions.stats().worker!;
      expect(stats.beforeunload.cpu ?? 0, phase).toBeGreaterThan(0);
      expect(stats.isolatesStarted, phase).toBeGreaterThan(1);
      expect(stats.hardKills, phase).toBe(0);
      expect(released(summaries), phase).toBeGreaterThan(0);
    }
  }, 180_000); // ~40 s on a quiet machine; the full suite on 2 cores can more than double it

  it('a HubSpot that hangs, or answers Retry-After: 60, near the wall clock: the invocation releases its jobs and answers before the limit', async () => {
    // A 12 s isolate wall clock (beforeunload at 10.8 s), and the worker keeps 3 s in reserve.
    const sys = await startLocalSystem(db.url, {
      limits: { wallClockLimitMs: 12_000 },
      env: { WORKER_ISOLATE_WALL_CLOCK_MS: '12000', WORKER_WALL_RESERVE_MS: '3000', WORKER_CONCURRENCY: '2', WORKER_CONTINUE: '0' },
    });
    systems.push(sys);
    const p = await connectSimPortal(db.sql, sys.sim, { sizes: { blog_posts: 3_000, site_pages: 3_000 } });
    const runId = await startFetchRun(db.sql, p, ['blog_posts', 'site_pages']);
    const faults = [
      { slowMs: 30_000 }, // every response 30 s late: the request timeout must shrink to the time left
      { slowMs: 100, forced429Rate: 0.5, retryAfterSeconds: 60 }, // a 60 s wait never fits
    ];
    for (const fault of faults) {
      sys.sim.setFaults(fault);
      const started = Date.now();
      const res = await fetch(sys.functions.functionUrl('worker'), {
        method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' }, body: '{}',
      });
      const elapsed = Date.now() - started;
      expect(res.status, JSON.stringify(fault)).toBe(200);
      const summary = (await res.json()) as Record<string, unknown>;
      expect(summary, JSON.stringify({ fault, summary })).toMatchObject({ claimed: 2, released: 2, failed: 0, lost: 0, stoppedBy: 'time_budget' });
      // The answer came from the function itself, inside its isolate's wall clock.
      expect(elapsed, JSON.stringify(fault)).toBeLessThan(12_000);
      for (const job of await jobsOf(db.sql, runId)) expect(job).toMatchObject({ status: 'pending', attempts: 0 });
    }
    expect(sys.functions.stats().worker!.hardKills).toBe(0);
  });
});
