// Scenario 4: fetch throughput against HubSpot's rate limit. One portal, its 8
// fetch jobs run at once by 4 in-process runWorkerInvocation calls (2 lanes
// each) against the simulator (190 requests / rolling 10 s per token). The
// shared request budget in Postgres paces every request.
//
// Ratio = items saved per second ÷ (19 requests/s × page size), page size being
// the `limit` our client sent, averaged over the requests in the window. The
// budget admits requests in bursts (its rolling window fills, then drains), so
// the window is whole budget periods from the first request: [t0, t0 + k × 10.15 s).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { connectDatabase } from '../../shared/db.ts';
import { LIST_PATHS } from '../../shared/hubspot/endpoints.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { effectiveBudget } from '../../shared/hubspot/request-budget.ts';
import { silentLogger } from '../../shared/log.ts';
import { createRun, stopRun } from '../../shared/sql/runs.ts';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { runWorkerInvocation, type InvocationSummary } from '../../functions/worker/invocation.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../../hubspot-sim/server.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, migratedDatabase } from '../lib/pg.ts';
import { atLeast, atMost, figure } from '../lib/report.ts';
import { benchIds, seedUsersAndPortals } from '../lib/seed.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const S = '4';
const LIMIT = 190;
const INVOCATIONS = 4;
const LANES = 2;
const PERIOD_MS = effectiveBudget({ maxPer10s: LIMIT }).windowMs;
const TABLES_ENDPOINT = `GET ${LIST_PATHS.hubdb_tables}`;

const FULL_SIZES = { site_pages: 15_000, landing_pages: 15_000, blog_posts: 15_000, blog_authors: 15_000, blog_tags: 15_000, url_redirects: 15_000, hubdb_rows: 60_000 };
const QUICK_SIZES = { site_pages: 300, landing_pages: 120, blog_posts: 400, blog_authors: 25, blog_tags: 60, url_redirects: 150, hubdb_rows: 1_000 };

interface FetchRep {
  windowMs: number;
  requests: number;
  items: number;
  meanPageSize: number;
  itemsPerSec: number;
  ratio: number;
  /** The same without HubDB table-list requests (limit 1000, a handful of tables each) and the tables they return. */
  ratioContentPages: number;
  requestRatio: number;
  rateLimited: number;
  peakPer10s: number;
  typesActiveThroughWindow: number;
  /** Seconds after the first request at which each type's job completed (null: still running when stopped). */
  completedAfterS: Record<string, number | null>;
  invocations: InvocationSummary[];
}

export async function fetchThroughput(ctx: BenchContext): Promise<ScenarioResult> {
  const periods = ctx.quick ? 0 : 3; // 0: the whole run (quick mode finishes inside the first burst)
  const tpl = await migratedDatabase(ctx.pg, 's4_tpl');
  const sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: LIMIT } });
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-bench-s4-'));
  const reps: FetchRep[] = [];
  try {
    for (let rep = 0; rep < ctx.reps; rep++) {
      const url = await cloneDatabase(ctx.pg, tpl, 's4_run');
      try {
        const r = await fetchRep(ctx, sim, url, rep + 1, periods, exportDir);
        reps.push(r);
        ctx.log(`[4] rep ${rep + 1}/${ctx.reps}: ${Math.round(r.itemsPerSec)} items/s over ${(r.windowMs / 1000).toFixed(1)} s, ratio ${r.ratio.toFixed(3)}, ` +
          `${r.requests} requests, 429s ${r.rateLimited}, peak ${r.peakPer10s}/10 s`);
      } finally {
        await dropDatabase(ctx.pg, url);
      }
    }
  } finally {
    await sim.close();
    await dropDatabase(ctx.pg, tpl);
    await rm(exportDir, { recursive: true, force: true });
  }
  const full = !ctx.quick;
  ctx.note(`Scenario 4: one portal (${JSON.stringify(full ? FULL_SIZES : QUICK_SIZES)}, ${full ? 10 : 2} HubDB tables), its 8 fetch jobs run by ` +
    `${INVOCATIONS} in-process runWorkerInvocation calls × ${LANES} lanes; simulator limit ${LIMIT}/10 s. ` +
    (full ? `Window = ${periods} whole budget periods (${periods} × ${PERIOD_MS} ms) from the first request; the run is then stopped (stop_run). ` +
      'hubdb_tables is one request (a portal would need ~100k tables to page for 30 s); the other 7 types page through the whole window. '
      : 'Quick mode: the whole (small) run, which fits in the first budget burst, so its ratio is not meaningful. ') +
    `Page size = mean \`limit\` of the requests in the window (100, or 1000 for HubDB). Our budget allows itself ${effectiveBudget({ maxPer10s: LIMIT }).maxRequests} ` +
    `requests per ${PERIOD_MS} ms (headroom), so the best possible ratio is ${(effectiveBudget({ maxPer10s: LIMIT }).maxRequests / (PERIOD_MS / 1000) / 19).toFixed(3)}.`);
  return {
    figures: [
      figure(S, 'fetch items/s', 'items/s', reps.map((r) => r.itemsPerSec)),
      figure(S, 'fetch ratio: items/s ÷ (19 × page size)', 'ratio', reps.map((r) => r.ratio), { goal: full ? atLeast(0.95, '≥ 0.95') : undefined }),
      figure(S, 'fetch ratio without the HubDB table-list requests', 'ratio', reps.map((r) => r.ratioContentPages)),
      figure(S, 'requests/s ÷ 19', 'ratio', reps.map((r) => r.requestRatio)),
      figure(S, 'simulator 429 responses', 'count', reps.map((r) => r.rateLimited), { goal: atMost(0, '0') }),
      figure(S, 'simulator peak requests per rolling 10 s', 'requests', reps.map((r) => r.peakPer10s)),
    ],
    details: { limit: LIMIT, periodMs: PERIOD_MS, periods, invocations: INVOCATIONS, lanes: LANES, sizes: full ? FULL_SIZES : QUICK_SIZES, reps },
  };
}

async function fetchRep(ctx: BenchContext, sim: HubSpotSimulator, url: string, i: number, periods: number, exportDir: string): Promise<FetchRep> {
  const sql = connectDatabase(url, { max: INVOCATIONS * 3, applicationName: 'bench-fetch' });
  try {
    const ids = benchIds(i);
    const token = `pat-bench-fetch-${i}-${crypto.randomUUID()}`;
    await seedUsersAndPortals(sql, i, 1);
    await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: ids.userId, hubspotPortalId: ids.hubspotPortalId, name: `Bench portal ${i}`, accessToken: token });
    sim.addPortal({ portalId: ids.hubspotPortalId, token, sizes: { ...(ctx.quick ? QUICK_SIZES : FULL_SIZES), hubdb_tables: 0 }, hubdbTables: ctx.quick ? 2 : 10 });
    sim.resetStats();
    const run = await createRun(sql, { portalId: ids.portalId, requestedBy: ids.userId, kind: 'fetch', contentTypes: [...CONTENT_TYPES] });
    const runtime = {
      sql, log: silentLogger, exportSink: localDirectorySink(exportDir), tokenKeys: testTokenKeys,
      settings: { budgetMs: 120_000, lanes: LANES, minStartMs: 1_000, hubspotBasePath: sim.url, rateLimit: { maxPer10s: LIMIT } },
    };
    const invocations = Promise.all(Array.from({ length: INVOCATIONS }, (_, k) => runWorkerInvocation(runtime, `bench-fetch-${i}-${k}`)));
    let stopped = false;
    if (periods > 0) {
      while (sim.requestLog().length === 0) await sleep(20);
      const t0 = Math.min(...sim.requestLog().map((e) => e.at));
      await sleep(Math.max(0, t0 + periods * PERIOD_MS + 500 - Date.now()));
      stopped = await stopRun(sql, run.runId!);
    }
    const summaries = await invocations;
    const log = sim.requestLog().filter((e) => e.portalId === ids.hubspotPortalId && e.status !== 0);
    const tStart = Math.min(...log.map((e) => e.at));
    const tEnd = periods > 0 ? tStart + periods * PERIOD_MS : Math.max(...log.map((e) => e.at)) + 1;
    const inWindow = log.filter((e) => e.at >= tStart && e.at < tEnd);
    const pageSizes = inWindow.map((e) => Number(e.limit ?? 0));
    const meanPageSize = pageSizes.reduce((a, b) => a + b, 0) / Math.max(1, pageSizes.length);
    const [row] = await sql`select count(*)::int as n, count(*) filter (where content_type = 'hubdb_tables')::int as tables
      from public.hubspot_content where portal_id = ${ids.portalId}
      and fetched_at >= to_timestamp(${tStart / 1000}) and fetched_at < to_timestamp(${tEnd / 1000})`;
    const pages = inWindow.filter((e) => e.endpoint !== TABLES_ENDPOINT).map((e) => Number(e.limit ?? 0));
    const meanContentPageSize = pages.reduce((a, b) => a + b, 0) / Math.max(1, pages.length);
    const windowMs = periods > 0 ? periods * PERIOD_MS : tEnd - tStart;
    const items = Number(row?.n ?? 0);
    const itemsPerSec = (items * 1000) / windowMs;
    const stats = sim.stats();
    const jobs = await sql`select content_type, status, (extract(epoch from finished_at) * 1000)::float8 as fin from public.jobs where run_id = ${run.runId}`;
    const completedAfterS = Object.fromEntries(jobs.map((j) => [j.content_type as string, j.status === 'completed' ? (Number(j.fin) - tStart) / 1000 : null]));
    const activeThrough = jobs.filter((j) => j.status !== 'completed' || Number(j.fin) >= tEnd).length;
    await checkRep(ctx, sql, run.runId!, ids.portalId, ids.hubspotPortalId, sim, periods > 0, stopped, summaries);
    return {
      windowMs, requests: inWindow.length, items, meanPageSize, itemsPerSec,
      ratio: itemsPerSec / (19 * meanPageSize),
      ratioContentPages: (((items - Number(row?.tables ?? 0)) * 1000) / windowMs) / (19 * meanContentPageSize),
      requestRatio: (inWindow.length * 1000) / windowMs / 19,
      rateLimited: stats.rateLimited, peakPer10s: stats.peakPer10s, typesActiveThroughWindow: activeThrough, completedAfterS, invocations: summaries,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function checkRep(
  ctx: BenchContext, sql: ReturnType<typeof connectDatabase>, runId: string, portalId: string, hubspotPortalId: number,
  sim: HubSpotSimulator, stoppedEarly: boolean, stopped: boolean, summaries: InvocationSummary[],
): Promise<void> {
  const failed = summaries.reduce((n, s) => n + s.failed + s.retried, 0);
  ctx.checks.equal(S, 'no fetch job failed or was retried', failed, 0);
  const [run] = await sql`select status from public.runs where id = ${runId}`;
  if (stoppedEarly) {
    ctx.checks.expect(S, 'the run was stopped after the window', stopped && run?.status === 'stopped', `stopped=${stopped}, status=${String(run?.status)}`);
    return;
  }
  ctx.checks.equal(S, 'the fetch run completed', run?.status, 'completed');
  const rows = await sql`select content_type, count(*)::int as n from public.hubspot_content where portal_id = ${portalId} and deleted_at is null group by 1`;
  const got = new Map(rows.map((r) => [r.content_type as string, r.n as number]));
  const wrong = CONTENT_TYPES.filter((t) => (got.get(t) ?? 0) !== sim.items(hubspotPortalId, t).length);
  ctx.checks.expect(S, 'every simulator item of every type is in hubspot_content', wrong.length === 0, wrong.length ? `mismatch for ${wrong.join(', ')}` : 'all types match');
}
