// Scenario 7: a fleet. One large portal (~30k items) is triggered first; one
// second later 100 small portals (8 types × ~200 items) are triggered within
// 10 s. Every portal has its own token, so its own 190 per 10 s limit in the
// simulator. Everything runs through the real entrypoints in the local edge
// runtime (hosted limits per isolate), with a fixed cap on concurrent worker
// invocations; the orchestrator's wake-ups, the worker's continuations and a
// cron stand-in every 60 s drive the worker (pg_cron is not in embedded
// Postgres). Earlier in the same run, small portals are measured alone ("solo").
//
// Reports: the small portals' p50/p95 completion (trigger → run settled) ÷
// solo; the large portal's items/s ÷ its rate-limit ideal; the most database
// connections at once (pg_stat_activity sampled every 100 ms); worker
// invocations used; Postgres CPU per 1,000 items stored; and an SVG chart of
// items stored over time per portal class against the ideal.
import { setTimeout as sleep } from 'node:timers/promises';
import { startLocalSystem, type LocalSystem } from '../../local/system.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { addBenchPortal, functionCpuMs, idealFetchRequests, startCron, triggerRun, waitForRunsSettled, workerCpuMs, type BenchPortal, type Trigger } from '../lib/edge.ts';
import { connectionSampler, migratedDatabase, postgresCpuMs } from '../lib/pg.ts';
import { atLeast, atMost, figure, type Goal } from '../lib/report.ts';
import { percentile, round } from '../lib/stats.ts';
import { renderLineChart } from '../lib/svg.ts';

const S = '7';
const LIMIT = 190;
/** private.worker_settings.max_concurrent_invocations for this scenario. */
const INVOCATION_CAP = 8;
/**
 * The worker's settings: the free plan's wall clock, 3 lanes to start with, and
 * DB_POOL_MAX 3 (one connection per job in flight). Concurrent invocations
 * share an isolate, and with it its pool: with the default DB_POOL_MAX 1 every
 * invocation of the isolate queues on one connection.
 */
const WORKER_ENV = {
  WORKER_TIME_BUDGET_MS: '140000', WORKER_ISOLATE_WALL_CLOCK_MS: '150000', WORKER_LANES: '3', WORKER_MIN_START_MS: '2000',
  HUBSPOT_RATE_LIMIT_PER_10S: String(LIMIT), DB_POOL_MAX: '3',
};
const BUCKET_MS = 250;

type Sizes = Record<ContentType, number>;
/** 8 types × ~200 items (2 HubDB tables of 100 rows: a page per table). */
const SMALL: { sizes: Sizes; hubdbTables: number } = {
  sizes: { site_pages: 200, landing_pages: 200, blog_posts: 200, blog_authors: 200, blog_tags: 200, hubdb_tables: 2, hubdb_rows: 200, url_redirects: 200 },
  hubdbTables: 2,
};
const LARGE_FULL: { sizes: Sizes; hubdbTables: number } = {
  sizes: { site_pages: 7_000, landing_pages: 5_000, blog_posts: 7_000, blog_authors: 1_000, blog_tags: 1_000, hubdb_tables: 2, hubdb_rows: 4_000, url_redirects: 5_000 },
  hubdbTables: 2,
};
const LARGE_QUICK: { sizes: Sizes; hubdbTables: number } = {
  sizes: { site_pages: 500, landing_pages: 300, blog_posts: 500, blog_authors: 100, blog_tags: 100, hubdb_tables: 2, hubdb_rows: 1_000, url_redirects: 300 },
  hubdbTables: 2,
};
const FULL = { small: 100, spreadMs: 10_000, solo: 5, large: LARGE_FULL, settleTimeoutMs: 900_000 };
const QUICK = { small: 10, spreadMs: 2_000, solo: 1, large: LARGE_QUICK, settleTimeoutMs: 120_000 };

const itemsOf = (sizes: Sizes) => Object.values(sizes).reduce((a, b) => a + b, 0);

interface RunOutcome {
  portal: BenchPortal;
  trigger: Trigger;
  /** Trigger sent → run settled (finished_at), ms. */
  completionMs: number;
  status: string;
}

async function settledRuns(sql: Sql, pairs: readonly { portal: BenchPortal; trigger: Trigger }[]): Promise<RunOutcome[]> {
  const ids = pairs.map((p) => p.trigger.runId!);
  const rows = await sql`select id::text, status, (extract(epoch from finished_at) * 1000)::float8 as fin from public.runs where id = any(${ids}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id as string, r]));
  return pairs.map(({ portal, trigger }) => {
    const r = byId.get(trigger.runId!);
    return { portal, trigger, completionMs: Number(r?.fin) - trigger.sentAt, status: String(r?.status) };
  });
}

/** Fires `count` triggers evenly over `spreadMs` from now, each without waiting for the others. */
async function triggerSpread(sys: LocalSystem, portals: readonly BenchPortal[], spreadMs: number): Promise<{ portal: BenchPortal; trigger: Trigger }[]> {
  const t0 = performance.now();
  return await Promise.all(portals.map(async (portal, i) => {
    await sleep(Math.max(0, t0 + (i * spreadMs) / portals.length - performance.now()));
    return { portal, trigger: await triggerRun(sys, portal, 'fetch', CONTENT_TYPES) };
  }));
}

export async function fleet(ctx: BenchContext): Promise<ScenarioResult> {
  const shape = ctx.quick ? QUICK : FULL;
  const dbUrl = await migratedDatabase(ctx.pg, 's7_fleet');
  const sql: Sql = connectDatabase(dbUrl, { max: 3, applicationName: 'bench-fleet' });
  await sql`update private.worker_settings set max_concurrent_invocations = ${INVOCATION_CAP}`;
  const sys = await startLocalSystem(dbUrl, { sim: { rateLimit: { maxPer10s: LIMIT } }, env: WORKER_ENV });
  const cron = startCron(sys);
  try {
    ctx.log(`${S}: seeding 1 warm-up + ${shape.solo} solo + 1 large + ${shape.small} small portals`);
    let nextHubspotId = 32_000_001;
    const addSmall = (name: string) => addBenchPortal(sql, sys, { hubspotPortalId: nextHubspotId++, name, ...SMALL });
    const warmUp = await addSmall('Warm-up portal');
    const soloPortals: BenchPortal[] = [];
    for (let i = 0; i < shape.solo; i++) soloPortals.push(await addSmall(`Solo portal ${i + 1}`));
    const large = await addBenchPortal(sql, sys, { hubspotPortalId: nextHubspotId++, name: 'Large portal', ...shape.large });
    const small: BenchPortal[] = [];
    for (let i = 0; i < shape.small; i++) small.push(await addSmall(`Small portal ${i + 1}`));

    // Solo: one small portal at a time, nothing else queued, after one
    // unmeasured warm-up (the first run boots the isolates and opens their
    // connections), each once the previous one's invocation has had time to end.
    const solo: RunOutcome[] = [];
    for (const portal of [warmUp, ...soloPortals]) {
      const trigger = await triggerRun(sys, portal, 'fetch', CONTENT_TYPES);
      if (!trigger.runId) throw new Error(`solo trigger answered ${trigger.error}`);
      await waitForRunsSettled(sql, [trigger.runId], 120_000, 20);
      if (portal !== warmUp) solo.push(...(await settledRuns(sql, [{ portal, trigger }])));
      await sleep(300);
    }
    const soloMs = percentile(solo.map((r) => r.completionMs), 50);
    ctx.log(`${S}: solo ${solo.map((r) => `${Math.round(r.completionMs)} ms`).join(', ')}`);

    // The fleet.
    sys.sim.resetStats();
    const worker0 = sys.functions.stats().worker!;
    const orch0 = sys.functions.stats().orchestrator!;
    const workerCpu0 = workerCpuMs(sys);
    const orchCpu0 = functionCpuMs(sys, 'orchestrator');
    const benchCpu0 = process.cpuUsage();
    const pgCpu0 = await postgresCpuMs(ctx.pg.pid);
    const sampler = connectionSampler(dbUrl);
    const [{ now: fleetStartDb }] = (await sql`select now() as now`) as unknown as [{ now: Date }];
    const t0 = Date.now();
    ctx.log(`${S}: fleet: large portal (${itemsOf(shape.large.sizes).toLocaleString()} items), then ${shape.small} small portals within ${shape.spreadMs / 1000} s`);
    const largeTrigger = triggerRun(sys, large, 'fetch', CONTENT_TYPES);
    const largeJobs = watchRunJobs(sql, largeTrigger.then((t) => t.runId), t0);
    await sleep(1000);
    const smallTriggers = await triggerSpread(sys, small, shape.spreadMs);
    const largePair = { portal: large, trigger: await largeTrigger };
    const pairs = [largePair, ...smallTriggers];
    const refused = pairs.filter((p) => !p.trigger.runId);
    ctx.checks.equal(S, 'every trigger answered 201 with a run', refused.length, 0);
    if (refused.length) ctx.log(`${S}: refused triggers: ${refused.slice(0, 3).map((p) => p.trigger.error).join('; ')}`);
    const accepted = pairs.filter((p) => p.trigger.runId);
    await waitForRunsSettled(sql, accepted.map((p) => p.trigger.runId!), shape.settleTimeoutMs);
    const fleetSeconds = (Date.now() - t0) / 1000;
    const peaks = await sampler.stop();
    const pgCpuMs = ((await postgresCpuMs(ctx.pg.pid)) ?? Number.NaN) - (pgCpu0 ?? Number.NaN);
    const workerCpu = workerCpuMs(sys) - workerCpu0;
    const orchCpu = functionCpuMs(sys, 'orchestrator') - orchCpu0;
    const benchCpu = process.cpuUsage(benchCpu0);
    const benchCpuMs = (benchCpu.user + benchCpu.system) / 1000;
    const largeTimeline = await largeJobs.stop();
    await cron.stop();
    const worker1 = sys.functions.stats().worker!;
    const orch1 = sys.functions.stats().orchestrator!;
    const sim = sys.sim.stats();
    ctx.log(`${S}: fleet settled in ${fleetSeconds.toFixed(1)} s`);

    // Outcomes.
    const outcomes = await settledRuns(sql, accepted);
    const largeOut = outcomes.find((o) => o.portal === large);
    const smallOut = outcomes.filter((o) => o.portal !== large);
    const runIds = accepted.map((p) => p.trigger.runId!);
    const [jobs] = await sql`select count(*)::int as jobs, count(*) filter (where status <> 'completed')::int as not_completed,
        coalesce(sum(attempts - 1), 0)::int as extra_attempts
      from public.jobs where run_id = any(${runIds}::uuid[])`;
    const fleetPortals = accepted.map((p) => p.portal);
    const stored = await sql`select portal_id::text, count(*)::int as n from public.hubspot_content
      where portal_id = any(${fleetPortals.map((p) => p.portalId)}::uuid[]) and deleted_at is null group by 1`;
    const storedBy = new Map(stored.map((r) => [r.portal_id as string, Number(r.n)]));
    const expectedOf = (p: BenchPortal) => CONTENT_TYPES.reduce((n, t) => n + sys.sim.items(p.hubspotPortalId, t).length, 0);
    const wrongItems = fleetPortals.filter((p) => (storedBy.get(p.portalId) ?? 0) !== expectedOf(p));
    const itemsStored = [...storedBy.values()].reduce((a, b) => a + b, 0);
    ctx.checks.equal(S, 'every fleet run completed', outcomes.filter((o) => o.status !== 'completed').length, 0);
    ctx.checks.equal(S, 'every fleet job completed', jobs!.not_completed, 0);
    ctx.checks.equal(S, 'fleet jobs: 8 per run', jobs!.jobs, runIds.length * CONTENT_TYPES.length);
    ctx.checks.expect(S, 'every portal\'s items stored exactly once', wrongItems.length === 0,
      wrongItems.length ? `${wrongItems.length} portals differ from the simulator` : `${itemsStored.toLocaleString()} items`);
    ctx.checks.equal(S, 'solo runs completed', solo.filter((r) => r.status !== 'completed').length, 0);

    // Invocations: every worker request is one (billed) invocation; those that got an invocation lease are logged.
    const invocations = worker1.requests - worker0.requests;
    const logged = await sql`select source, count(*)::int as n, sum(claimed)::int as claimed from private.worker_invocation_log
      where started_at >= ${fleetStartDb} group by 1 order by 2 desc`;
    const working = logged.reduce((n, r) => n + Number(r.n), 0);
    const bySource = Object.fromEntries(logged.map((r) => [r.source as string, Number(r.n)]));

    // The large portal against HubSpot's limit: every request it needs (pages
    // plus the orchestrator's limit=1 counts) at 19 per second.
    const largeItems = itemsOf(shape.large.sizes);
    const largeRequests = idealFetchRequests(shape.large.sizes, shape.large.hubdbTables, true);
    const idealLargeS = (largeRequests * 10) / LIMIT;
    const largeS = (largeOut?.completionMs ?? Number.NaN) / 1000;
    const largeRatio = idealLargeS / largeS;
    const smallMs = smallOut.map((o) => o.completionMs);
    const p50 = percentile(smallMs, 50);
    const p95 = percentile(smallMs, 95);
    const functionConnCap = INVOCATION_CAP * Number(WORKER_ENV.DB_POOL_MAX);
    const workerConns = peaks.peakPerApp['queue-worker'] ?? 0;
    const functionConns = peaks.peak - (peaks.peakByApp['bench-fleet'] ?? 0);

    const full = !ctx.quick;
    const goal = (g: (m: number) => Goal) => (full ? { goal: g } : {});
    const figures = [
      figure(S, 'solo: one small portal alone, trigger → settled', 'ms', [soloMs], { note: `${solo.length} portal(s), median` }),
      figure(S, 'small portals p50 completion ÷ solo', 'ratio', [p50 / soloMs], { note: `p50 ${Math.round(p50)} ms` }),
      figure(S, 'small portals p95 completion ÷ solo', 'ratio', [p95 / soloMs], { note: `p95 ${Math.round(p95)} ms`, ...goal(atMost(3, '≤ 3')) }),
      figure(S, 'large portal: seconds with jobs pending but fewer than its cap running', 's', [largeTimeline.underServedS], {
        note: `mean ${round(largeTimeline.meanRunning, 2)} running of a mean portal cap of ${round(largeTimeline.meanCap, 2)} while its run was open`,
      }),
      figure(S, 'large portal items/s ÷ rate-limit ideal', 'ratio', [largeRatio], {
        note: `${Math.round(largeItems / largeS)} items/s in ${largeS.toFixed(1)} s; ideal ${idealLargeS.toFixed(1)} s = ${largeRequests} requests incl. ${CONTENT_TYPES.length} counts at 19/s`,
        ...goal(atLeast(0.9, '≥ 0.9')),
      }),
      figure(S, 'most worker DB connections at once', 'connections', [workerConns], {
        note: `cap ${INVOCATION_CAP} invocations × DB_POOL_MAX ${WORKER_ENV.DB_POOL_MAX}`, goal: atMost(functionConnCap, `≤ ${functionConnCap}`),
      }),
      figure(S, 'most DB connections of both functions at once', 'connections', [functionConns], { note: JSON.stringify(peaks.peakByApp) }),
      figure(S, 'most worker invocation leases held at once', 'count', [peaks.peakInvocationLeases], { goal: atMost(INVOCATION_CAP, `≤ ${INVOCATION_CAP}`) }),
      figure(S, 'worker invocations used (requests)', 'count', [invocations], { note: `${working} got an invocation lease: ${JSON.stringify(bySource)}` }),
      figure(S, 'orchestrator invocations', 'count', [orch1.requests - orch0.requests]),
      figure(S, 'Postgres CPU per 1,000 items stored', 'ms', [(pgCpuMs * 1000) / Math.max(1, itemsStored)], { note: `${Math.round(pgCpuMs)} ms for ${itemsStored.toLocaleString()} items` }),
      figure(S, 'worker CPU per 1,000 items stored', 'ms', [(workerCpu * 1000) / Math.max(1, itemsStored)]),
      figure(S, 'simulator 429 responses (ten-second limit)', 'count', [sim.rateLimited], { goal: atMost(0, '0') }),
      figure(S, 'attempts lost (attempts beyond the first)', 'count', [jobs!.extra_attempts], { goal: atMost(0, '0') }),
      figure(S, 'fleet: trigger of the large portal → last run settled', 's', [fleetSeconds]),
    ];

    const chart = await fleetChart(sql, {
      t0, large: largeOut, small: smallOut, soloMs, largeItems, idealLargeS,
      smallItems: smallOut.reduce((n, o) => n + expectedOf(o.portal), 0), smallItemsEach: itemsOf(SMALL.sizes),
      title: `Scenario 7: ${shape.small} small portals + 1 large portal (${largeItems.toLocaleString()} items), ${INVOCATION_CAP} worker invocations at most`,
    });
    const chartFile = await ctx.artifact('fleet.svg', chart);
    ctx.note(`${S}: fleet of 1 large portal (${JSON.stringify(shape.large.sizes)}) triggered first, then ${shape.small} small portals ` +
      `(${JSON.stringify(SMALL.sizes)}) triggered evenly over ${shape.spreadMs / 1000} s from 1 s later; each portal its own token and ${LIMIT}/10 s limit. ` +
      `Local edge runtime, hosted limits per isolate; worker ${JSON.stringify(WORKER_ENV)}; max_concurrent_invocations ${INVOCATION_CAP}; ` +
      `fetch portal cap from each portal's learned limit (private.portal_cap); cron stand-in every 60 s (${cron.invocations()} calls). ` +
      `Solo = median of ${solo.length} small portal(s) run alone first, one at a time, after an unmeasured warm-up portal. Completion = trigger sent → run finished_at. ` +
      `Connections: pg_stat_activity every 100 ms (${peaks.samples} samples), per application: ${JSON.stringify(peaks.peakPerApp)}. ` +
      `CPU over the fleet phase: Postgres (postmaster + backends, /proc) ${Math.round(pgCpuMs)} ms, worker isolates ${Math.round(workerCpu)} ms, ` +
      `orchestrator isolates ${Math.round(orchCpu)} ms, this process (HubSpot simulator, gateway, driver) ${Math.round(benchCpuMs)} ms, over ${fleetSeconds.toFixed(1)} s of wall clock. ` +
      `HubSpot requests ${sim.requests}, peak per token ${sim.peakPer10s}/10 s. Worker isolates ${worker1.isolatesStarted - worker0.isolatesStarted}, ` +
      `shutdowns ${JSON.stringify(worker1.shutdowns)}, hard kills ${worker1.hardKills - worker0.hardKills}. Chart: [${chartFile}](${chartFile}).`);
    return {
      figures,
      details: {
        shape: { small: shape.small, spreadMs: shape.spreadMs, smallSizes: SMALL.sizes, large: shape.large },
        settings: { invocationCap: INVOCATION_CAP, worker: WORKER_ENV, limitPer10s: LIMIT },
        solo: solo.map((r) => round(r.completionMs, 1)),
        soloMs, p50Ms: p50, p95Ms: p95,
        smallCompletionMs: smallMs.map((v) => round(v, 1)),
        large: { seconds: largeS, idealSeconds: idealLargeS, requestsNeeded: largeRequests, items: largeItems },
        connections: peaks, invocations: { requests: invocations, working, bySource }, pgCpuMs, workerCpuMs: workerCpu, orchestratorCpuMs: orchCpu,
        benchProcessCpuMs: benchCpuMs, itemsStored, largeJobTimeline: largeTimeline,
        simulator: sim, fleetSeconds, chart: chartFile, cron: cron.invocations(),
      },
    };
  } finally {
    await cron.stop();
    await sql.end({ timeout: 5 });
    await sys.stop();
  }
}

interface JobTimeline {
  /** [seconds since t0, running, pending, portal cap] every 250 ms while the run was open. */
  samples: [number, number, number, number][];
  meanRunning: number;
  meanCap: number;
  /** Seconds during which the run had pending jobs but fewer than its portal's cap running. */
  underServedS: number;
}

/** Samples a run's running and pending jobs every 250 ms until stop() (under-served: pending jobs while fewer than `cap` run). */
/** The run's running and pending jobs every 250 ms, with its portal's cap then (it follows the portal's learned limit). */
function watchRunJobs(sql: Sql, runId: Promise<string | null>, t0: number): { stop(): Promise<JobTimeline> } {
  let on = true;
  const samples: [number, number, number, number][] = [];
  const loop = (async () => {
    const id = await runId;
    if (!id) return;
    while (on) {
      const [r] = await sql`select count(*) filter (where status = 'running')::int as running, count(*) filter (where status = 'pending')::int as pending,
          (select coalesce(private.portal_cap(u.portal_id, 'fetch'), ${CONTENT_TYPES.length}) from public.runs u where u.id = ${id}) as cap
        from public.jobs where run_id = ${id}`;
      samples.push([(Date.now() - t0) / 1000, Number(r?.running ?? 0), Number(r?.pending ?? 0), Number(r?.cap ?? CONTENT_TYPES.length)]);
      if (Number(r?.running ?? 0) + Number(r?.pending ?? 0) === 0) return;
      await sleep(250);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      let under = 0;
      let running = 0;
      let capped = 0;
      let span = 0;
      for (let i = 1; i < samples.length; i++) {
        const dt = samples[i]![0] - samples[i - 1]![0];
        const [, run, pend, cap] = samples[i - 1]!;
        span += dt;
        running += run * dt;
        capped += cap * dt;
        if (pend > 0 && run < cap) under += dt;
      }
      return { samples, meanRunning: span > 0 ? running / span : Number.NaN, meanCap: span > 0 ? capped / span : Number.NaN, underServedS: under };
    },
  };
}

/** Items stored over time (fetched_at, per 250 ms) per portal class, with each class's ideal. */
async function fleetChart(sql: Sql, o: {
  t0: number; large: RunOutcome | undefined; small: RunOutcome[]; soloMs: number; largeItems: number; idealLargeS: number;
  smallItems: number; smallItemsEach: number; title: string;
}): Promise<string> {
  const largeId = o.large?.portal.portalId ?? '00000000-0000-0000-0000-000000000000';
  const rows = await sql`select portal_id = ${largeId}::uuid as large,
      floor((extract(epoch from fetched_at) * 1000 - ${o.t0}) / ${BUCKET_MS})::int as b, count(*)::int as n
    from public.hubspot_content where portal_id = any(${[largeId, ...o.small.map((s) => s.portal.portalId)]}::uuid[])
    group by 1, 2 order by 2`;
  const last = Math.max(0, ...rows.map((r) => Number(r.b)));
  const cumulative = (large: boolean): [number, number][] => {
    const per = new Map(rows.filter((r) => r.large === large).map((r) => [Number(r.b), Number(r.n)]));
    const pts: [number, number][] = [[0, 0]];
    let sum = 0;
    for (let b = 0; b <= last + 1; b++) {
      sum += per.get(b) ?? 0;
      pts.push([((b + 1) * BUCKET_MS) / 1000, sum]);
    }
    return pts;
  };
  const end = ((last + 2) * BUCKET_MS) / 1000;
  const steps = Math.ceil(end / (BUCKET_MS / 1000));
  const largeStart = o.large ? (o.large.trigger.sentAt - o.t0) / 1000 : 0;
  const idealLarge: [number, number][] = [[0, 0], [largeStart, 0], [largeStart + o.idealLargeS, o.largeItems], [Math.max(end, largeStart + o.idealLargeS), o.largeItems]];
  // Small: each portal as fast as alone, from its own trigger.
  const idealSmall: [number, number][] = [];
  for (let k = 0; k <= steps; k++) {
    const t = (k * BUCKET_MS) / 1000;
    let sum = 0;
    for (const s of o.small) sum += o.smallItemsEach * Math.min(1, Math.max(0, (t - (s.trigger.sentAt - o.t0) / 1000) / (o.soloMs / 1000)));
    idealSmall.push([t, sum]);
  }
  return renderLineChart({
    title: o.title,
    subtitle: `items stored over time (hubspot_content.fetched_at); ideal: large at 19 requests/s, each small portal as fast as alone (${Math.round(o.soloMs)} ms)`,
    xLabel: 'seconds since the large portal was triggered',
    yLabel: 'items stored',
    series: [
      { name: `large portal (${o.largeItems.toLocaleString()} items)`, color: '#d62728', points: cumulative(true) },
      { name: 'large portal, rate-limit ideal', color: '#d62728', points: idealLarge, dashed: true },
      { name: `${o.small.length} small portals (${o.smallItems.toLocaleString()} items)`, color: '#1f77b4', points: cumulative(false) },
      { name: 'small portals, each as fast as alone', color: '#1f77b4', points: idealSmall, dashed: true },
    ],
  });
}
