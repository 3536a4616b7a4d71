// Scenario 8: a large portal under hosted Supabase's edge limits. About 60k
// blog posts, 100k HubDB rows and 20k site pages are fetched and then exported
// completely, through the real entrypoints in the local edge runtime (2 s CPU
// per isolate, 150 s wall clock, 256 MB), triggered over HTTP like a user
// would, with cron every 60 s as the safety net and the worker continuing
// itself. Reports hard kills, attempts lost to kills, CPU per invocation,
// worker CPU per fetched item and per exported row, invocations used, and the
// fetch's time against the rate-limit ideal.
import { randomUUID } from 'node:crypto';
import { startLocalSystem, type LocalSystem } from '../../scripts/lib/local-system.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { connectPortal } from '../../shared/queue.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { PAGE_SIZE } from '../../shared/hubspot/content-types.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { migratedDatabase } from '../lib/pg.ts';
import { atLeast, atMost, figure } from '../lib/report.ts';
import { percentile, sleep } from '../lib/stats.ts';

const S = '8';
const LIMIT = 190;
const TYPES: ContentType[] = ['blog_posts', 'hubdb_rows', 'site_pages'];
const FULL = { sizes: { blog_posts: 60_000, hubdb_rows: 100_000, site_pages: 20_000 }, hubdbTables: 20 };
const QUICK = { sizes: { blog_posts: 1_500, hubdb_rows: 3_000, site_pages: 500 }, hubdbTables: 3 };

/**
 * The fetch's duration at exactly HubSpot's limit: every page request (HubDB
 * rows page per table, plus one tables list) sent at LIMIT per 10 s.
 */
function idealFetchSeconds(sizes: Record<string, number>, hubdbTables: number, limitPer10s: number): number {
  let requests = 0;
  for (const [type, n] of Object.entries(sizes)) {
    if (type === 'hubdb_rows') {
      const perTable = Math.ceil(n / hubdbTables);
      requests += hubdbTables * Math.max(1, Math.ceil(perTable / PAGE_SIZE.hubdb_rows)) + 1;
    } else requests += Math.max(1, Math.ceil(n / PAGE_SIZE[type as ContentType]));
  }
  return (requests * 10) / limitPer10s;
}

interface Phase {
  seconds: number;
  items: number;
  workerCpuMs: number;
  status: string;
}

/** CPU ms every worker isolate has used so far (finished ones and live ones). */
function workerCpuMs(sys: LocalSystem): number {
  const stats = sys.functions.stats().worker!;
  const finished = stats.cpuMsPerIsolate.reduce((a, b) => a + b, 0);
  const live = sys.functions.isolates('worker').reduce((a, i) => a + i.cpuMs, 0);
  return finished + live;
}

export async function edgeLargePortal(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = ctx.quick ? QUICK : FULL;
  const dbUrl = await migratedDatabase(ctx.pg, 's8_edge');
  const sql: Sql = connectDatabase(dbUrl, { max: 2 });
  const sys = await startLocalSystem(dbUrl, {
    sim: { rateLimit: { maxPer10s: LIMIT } },
    // Hosted free plan limits (the runtime's defaults); the worker as deployed, but for the simulator's URL.
    env: { WORKER_TIME_BUDGET_MS: '140000', WORKER_ISOLATE_WALL_CLOCK_MS: '150000', WORKER_CONCURRENCY: '3', WORKER_MIN_START_MS: '2000', HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT) },
  });
  let cronOn = true;
  const invocationsBySource = { cron: 0 };
  try {
    const userId = randomUUID();
    await sql`insert into auth.users (id, email, aud, role) values (${userId}, ${`${userId}@bench.test`}, 'authenticated', 'authenticated')`;
    const hubspotPortalId = 31_000_001;
    const token = `pat-bench-${randomUUID()}`;
    sys.sim.addPortal({ portalId: hubspotPortalId, token, sizes: shape.sizes, hubdbTables: shape.hubdbTables });
    const portalId = await connectPortal(sql, { ownerId: userId, hubspotPortalId, name: 'Large portal', accessToken: token });
    const jwt = await sys.keys.signUserToken(userId);

    // Cron, as pg_cron would call it: every 60 s, a background invocation.
    const cron = (async () => {
      while (cronOn) {
        for (let waited = 0; waited < 60_000 && cronOn; waited += 250) await sleep(250);
        if (!cronOn) break;
        invocationsBySource.cron++;
        await fetch(sys.functions.functionUrl('worker'), {
          method: 'POST', headers: { Authorization: `Bearer ${sys.workerSecret}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ source: 'cron', mode: 'background' }),
        }).then((r) => r.body?.cancel()).catch(() => {});
      }
    })();

    const runPhase = async (kind: 'fetch' | 'export'): Promise<Phase & { runId: string }> => {
      const cpu0 = workerCpuMs(sys);
      const t0 = performance.now();
      const res = await fetch(sys.functions.functionUrl('orchestrator'), {
        method: 'POST', headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ portalId, kind, contentTypes: TYPES }),
      });
      const body = (await res.json()) as { runId?: string };
      if (res.status !== 201 || !body.runId) throw new Error(`${kind} trigger answered HTTP ${res.status}: ${JSON.stringify(body)}`);
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
    cronOn = false;
    await cron;

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
      `beforeunload ${JSON.stringify(stats.beforeunload)}; cron invocations ${invocationsBySource.cron}; HubSpot requests ${simStats.requests}, 429s ${simStats.rateLimited}.`);
    return {
      figures,
      details: {
        sizes: shape.sizes, fetched, exported, ideal, workerStats: stats, simulator: simStats, attemptsBeyondFirst: att!.extra,
        cron: invocationsBySource.cron,
      },
    };
  } finally {
    cronOn = false;
    await sql.end({ timeout: 5 });
    await sys.stop();
  }
}
