// Scenario 8: a large portal under hosted Supabase's edge limits. About 60k
// blog posts, 100k HubDB rows and 20k site pages are fetched and then exported
// completely, through the real entrypoints in the local edge runtime (2 s CPU
// per isolate, 150 s wall clock, 256 MB), triggered over HTTP like a user
// would, with cron every 60 s as the safety net and the worker continuing
// itself. Reports hard kills, attempts lost to kills, CPU per invocation,
// worker CPU per fetched item and per exported row, invocations used, and the
// fetch's time against the rate-limit ideal.
import { setTimeout as sleep } from 'node:timers/promises';
import { startLocalSystem } from '../../local/system.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import type { ContentType } from '../../shared/content-types.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { addBenchPortal, idealFetchSeconds, startCron, triggerRun, workerCpuMs } from '../lib/edge.ts';
import { migratedDatabase } from '../lib/pg.ts';
import { atLeast, atMost, figure } from '../lib/report.ts';
import { percentile } from '../lib/stats.ts';

const S = '8';
const LIMIT = 190;
const TYPES: ContentType[] = ['blog_posts', 'hubdb_rows', 'site_pages'];
const FULL = { sizes: { blog_posts: 60_000, hubdb_rows: 100_000, site_pages: 20_000 }, hubdbTables: 20 };
const QUICK = { sizes: { blog_posts: 1_500, hubdb_rows: 3_000, site_pages: 500 }, hubdbTables: 3 };

interface Phase {
  seconds: number;
  items: number;
  workerCpuMs: number;
  status: string;
}

export async function edgeLargePortal(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = ctx.quick ? QUICK : FULL;
  const dbUrl = await migratedDatabase(ctx.pg, 's8_edge');
  const sql: Sql = connectDatabase(dbUrl, { max: 2 });
  const sys = await startLocalSystem(dbUrl, {
    sim: { rateLimit: { maxPer10s: LIMIT } },
    // Hosted free plan limits (the runtime's defaults); the worker as deployed, but for the simulator's URL.
    env: { WORKER_TIME_BUDGET_MS: '140000', WORKER_ISOLATE_WALL_CLOCK_MS: '150000', WORKER_LANES: '3', WORKER_MIN_START_MS: '2000', HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT) },
  });
  const cron = startCron(sys);
  try {
    const hubspotPortalId = 31_000_001;
    const portal = await addBenchPortal(sql, sys, { hubspotPortalId, name: 'Large portal', sizes: shape.sizes, hubdbTables: shape.hubdbTables });
    const portalId = portal.portalId;

    const runPhase = async (kind: 'fetch' | 'export'): Promise<Phase & { runId: string }> => {
      const cpu0 = workerCpuMs(sys);
      const t0 = performance.now();
      const trigger = await triggerRun(sys, portal, kind, TYPES);
      if (!trigger.runId) throw new Error(`${kind} trigger answered ${trigger.error}`);
      const body = { runId: trigger.runId };
      const deadline = performance.now() + (ctx.quick ? 120_000 : 900_000);
      for (;;) {
        const [run] = await sql`select status, finished_at from public.runs where id = ${body.runId}`;
        if (run?.finished_at) break;
        if (performance.now() > deadline) throw new Error(`${kind} run did not finish in time (status ${run?.status})`);
        await sleep(250);
      }
      const seconds = (performance.now() - t0) / 1000;
      const [row] = await sql`select r.status, coalesce(sum(j.progress_done), 0)::int as items,
          coalesce(sum((j.result ->> 'rows')::int), 0)::int as rows
        from public.runs r join public.jobs j on j.run_id = r.id where r.id = ${body.runId} group by r.status`;
      return { runId: body.runId, seconds, items: kind === 'fetch' ? row!.items : row!.rows, workerCpuMs: workerCpuMs(sys) - cpu0, status: row!.status };
    };

    ctx.log(`${S}: fetching ${TYPES.join(', ')} (${Object.values(shape.sizes).reduce((a, b) => a + b, 0).toLocaleString()} items) under the edge limits`);
    const fetched = await runPhase('fetch');
    ctx.log(`${S}: fetch ${fetched.status} in ${fetched.seconds.toFixed(1)} s; exporting`);
    const exported = await runPhase('export');
    ctx.log(`${S}: export ${exported.status} in ${exported.seconds.toFixed(1)} s`);
    await cron.stop();

    const stats = sys.functions.stats().worker!;
    const [att] = await sql`select coalesce(sum(attempts - 1), 0)::int as extra, count(*)::int as jobs,
        count(*) filter (where status <> 'completed')::int as not_completed
      from public.jobs where run_id in (${fetched.runId}, ${exported.runId})`;
    const [stored] = await sql`select count(*)::int as n from public.hubspot_content where portal_id = ${portalId} and deleted_at is null`;
    const expectedItems = TYPES.reduce((n, t) => n + sys.sim.items(hubspotPortalId, t).length, 0);
    const simStats = sys.sim.stats();

    ctx.checks.equal(S, 'fetch run completed', fetched.status, 'completed');
    ctx.checks.equal(S, 'export run completed', exported.status, 'completed');
    ctx.checks.equal(S, 'every item stored once', stored!.n, expectedItems);
    ctx.checks.equal(S, 'every stored item exported', exported.items, expectedItems);
    ctx.checks.equal(S, 'every job completed', att!.not_completed, 0);

    const cpu = [...stats.cpuMsPerRequest];
    const ideal = idealFetchSeconds(shape.sizes, shape.hubdbTables, LIMIT);
    const invocations = stats.requests;
    const figures = [
      figure(S, 'hard kills (CPU, memory or wall clock)', 'count', [stats.hardKills], { goal: atMost(0, '0') }),
      figure(S, 'attempts used up by kills', 'count', [att!.extra], { goal: atMost(0, '0') }),
      figure(S, 'CPU per invocation p50', 'ms', [percentile(cpu, 50)]),
      figure(S, 'CPU per invocation p99', 'ms', [percentile(cpu, 99)]),
      figure(S, 'CPU per invocation max', 'ms', [Math.max(0, ...cpu)], { goal: atMost(2000, '< 2,000 ms') }),
      figure(S, 'worker CPU per fetched item', 'µs', [(fetched.workerCpuMs * 1000) / Math.max(1, fetched.items)], { goal: atMost(5, '≤ 5 µs') }),
      figure(S, 'worker CPU per exported row', 'µs', [(exported.workerCpuMs * 1000) / Math.max(1, exported.items)], { goal: atMost(2, '≤ 2 µs') }),
      figure(S, 'worker invocations used (fetch + export)', 'count', [invocations]),
      figure(S, 'fetch time vs the rate-limit ideal', 'ratio', [ideal / fetched.seconds], {
        goal: ctx.quick ? undefined : atLeast(0.9, '≥ 0.9'),
        note: `ideal ${ideal.toFixed(1)} s (${LIMIT} requests / 10 s, pages of 100, HubDB rows 1,000), actual ${fetched.seconds.toFixed(1)} s`,
      }),
      figure(S, 'export time', 's', [exported.seconds]),
    ];
    ctx.note(`${S}: ${expectedItems.toLocaleString()} items; worker isolates ${stats.isolatesStarted}, shutdowns ${JSON.stringify(stats.shutdowns)}, ` +
      `beforeunload ${JSON.stringify(stats.beforeunload)}; cron invocations ${cron.invocations()}; HubSpot requests ${simStats.requests}, 429s ${simStats.rateLimited}.`);
    return {
      figures,
      details: {
        sizes: shape.sizes, fetched, exported, ideal, workerStats: stats, simulator: simStats, attemptsBeyondFirst: att!.extra,
        cron: cron.invocations(),
      },
    };
  } finally {
    await cron.stop();
    await sql.end({ timeout: 5 });
    await sys.stop();
  }
}
