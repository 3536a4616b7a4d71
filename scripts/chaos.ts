// Chaos run: several real worker processes, plus the worker function itself in
// the local edge runtime under tight CPU limits (so the runtime's own
// beforeunload and kills cut it) called as cron would, fetch and export several
// simulated HubSpot portals at once while a driver SIGKILLs random workers and
// edge isolates (and starts replacements), freezes one with SIGSTOP past its lease, makes HubSpot fail
// in bursts (5xx, 429, slow, dropped connections), changes HubSpot content,
// restarts Postgres mid-run and fires duplicate triggers. Then the queue
// drains, a final clean fetch and export run, and every invariant is checked.
//
//   npm run chaos -- [--minutes 3 | --seconds N] [--workers 4] [--edge 2] [--portals N] [--seed 1] [--lease 4]
//
// Writes bench/results/chaos-latest.json and .md; exits 1 on any violation.
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CONTENT_TYPES, type ContentType } from '../shared/content-types.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator, type FaultOptions } from '../hubspot-sim/server.ts';
import { spawnWorkerProcess, type WorkerEvent, type WorkerProcess } from './chaos/worker-process.ts';
import { analyseAudit, installAudit, type AuditFigures } from './chaos/audit.ts';
import { checkContent, checkExports, checkQueue, sleep, type Violation } from './chaos/checks.ts';
import { startChaosPostgres, type ChaosPostgres } from './chaos/postgres.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { createSigningKeys, startLocalFunctions, summarizeEdgeStats, type LocalFunctions } from '../local/supabase.ts';
import { TEST_TOKEN_KEYS, testTokenKeys } from '../local/test-token-keys.ts';

// ---------- options ----------

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string' },
    seconds: { type: 'string' },
    workers: { type: 'string', default: '4' },
    edge: { type: 'string', default: '2' },
    portals: { type: 'string' },
    seed: { type: 'string', default: String(Date.now() % 100_000) },
    lease: { type: 'string', default: '4' },
    out: { type: 'string', default: path.join(PROJECT_ROOT, 'bench/results') },
    quiet: { type: 'boolean', default: false },
  },
  allowPositionals: false,
});
const durationMs = args.seconds ? Number(args.seconds) * 1000 : Number(args.minutes ?? 3) * 60_000;
if (!Number.isFinite(durationMs) || durationMs < 10_000) {
  console.error('chaos: the run must last at least 10 seconds (--seconds N or --minutes N)');
  process.exit(2);
}
const WORKERS = Number(args.workers);
/** Concurrent cron-like loops calling the worker function in the local edge runtime. */
const EDGE_LOOPS = Number(args.edge);
const PORTALS = Number(args.portals ?? (durationMs < 90_000 ? 3 : 4));
const LEASE_SECONDS = Number(args.lease);
const SEED = Number(args.seed);

// Deterministic choices (the timing of a multi-process run is not).
let rngState = SEED >>> 0 || 1;
const rand = () => {
  rngState = (rngState * 1664525 + 1013904223) >>> 0;
  return rngState / 2 ** 32;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const between = (lo: number, hi: number) => lo + rand() * (hi - lo);
const subset = <T>(xs: readonly T[]): T[] => {
  const s = xs.filter(() => rand() < 0.5);
  return s.length ? s : [pick(xs)];
};

const SIZES = { site_pages: 600, landing_pages: 200, blog_posts: 1500, blog_authors: 25, blog_tags: 60, hubdb_tables: 3, hubdb_rows: 1500, url_redirects: 300 };
const say = (msg: string) => {
  if (!args.quiet) console.log(`[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
};
const t0 = Date.now();

// ---------- state and figures ----------

interface PortalRef {
  portalId: string;
  userId: string;
  hubspotPortalId: number;
}

const figures = {
  triggers: 0,
  triggersAllDuplicate: 0,
  duplicateTypesRefused: 0,
  kills: 0,
  freezes: 0,
  pgRestarts: 0,
  faultBursts: 0,
  itemsAdded: 0,
  itemsDeleted: 0,
  itemsTouched: 0,
  workerProcesses: 0,
  edgeInvocations: 0,
  edgeInvocationFailures: 0,
  edgeIsolateKills: 0,
  zombieWritesRejected: 0,
  heartbeatsRefused: 0,
  invocationErrors: 0,
  unhandledRejections: 0,
  /** postgres.js's own type query cut off with its connection (scripts/lib/known-upstream-errors.ts): not a violation. */
  knownUpstreamRejections: 0,
};
const zombieWrites: WorkerEvent[] = [];
/** What each frozen worker did in the seconds after SIGCONT. */
const thawed: { worker: string; resumedAt: number; fromEvent: number; w: WorkerProcess }[] = [];
const violations: Violation[] = [];
const workers: WorkerProcess[] = [];
let workerSeq = 0;
let frozen: WorkerProcess | null = null;
/** A worker just thawed is left alone for a while, so it gets to attempt its stale writes. */
const sparedUntil = new Map<WorkerProcess, number>();
const killedByDriver = new Set<WorkerProcess>();
let stoppingWorkers = false;

let pg: ChaosPostgres | undefined;
let sim: HubSpotSimulator | undefined;
let sql: Sql | undefined;
let exportDir = '';
let edge: LocalFunctions | undefined;
const edgeSecret = `wsk_chaos_${crypto.randomUUID().replaceAll('-', '')}`;

/** The worker function in the local edge runtime, with CPU limits small enough that its isolates are cut mid-work. */
async function startEdgeWorker(): Promise<LocalFunctions> {
  const keys = await createSigningKeys();
  return startLocalFunctions({
    names: ['worker'],
    jwks: keys.jwks,
    // Retire at 150 ms of CPU, beforeunload("cpu") at 50% of 500 ms, killed at 500 ms.
    limits: { cpuSoftLimitMs: 150, cpuHardLimitMs: 500, beforeunloadCpuPct: 50 },
    env: {
      SUPABASE_DB_URL: pg!.dbUrl,
      WORKER_SECRET: edgeSecret,
      EXPORT_DIR: exportDir,
      HUBSPOT_BASE_URL: sim!.url,
      HUBSPOT_TOKEN_KEYS: TEST_TOKEN_KEYS,
      WORKER_TIME_BUDGET_MS: '15000',
      WORKER_MIN_START_MS: '1500',
      HUBSPOT_REQUEST_TIMEOUT_MS: '15000',
    },
  });
}

/** Calls the edge worker as cron would, one invocation after another, until the workers stop. */
async function edgeLoop() {
  while (!stoppingWorkers) {
    try {
      const res = await fetch(edge!.functionUrl('worker'), {
        method: 'POST', headers: { Authorization: `Bearer ${edgeSecret}`, 'Content-Type': 'application/json' }, body: '{"source":"chaos"}',
      });
      await res.arrayBuffer();
      figures.edgeInvocations++;
      if (res.status !== 200) figures.edgeInvocationFailures++;
    } catch {
      figures.edgeInvocationFailures++;
    }
    await sleep(between(200, 800));
  }
}

async function killEdgeIsolates() {
  if (!edge || edge.isolates('worker').length === 0) return;
  await edge.killIsolates('worker', 'SIGKILL');
  figures.edgeIsolateKills++;
  say('SIGKILL the edge worker isolates');
}

function onWorkerEvent(e: WorkerEvent) {
  if (e.event === 'db_call' && e.ok === false && !e.error) {
    if (e.fn === 'heartbeat_job') figures.heartbeatsRefused++;
    else if (e.fn !== 'claim') {
      figures.zombieWritesRejected++;
      if (zombieWrites.length < 50) zombieWrites.push(e);
    }
  } else if (e.event === 'chaos_invocation_error') figures.invocationErrors++;
  else if (e.event === 'chaos_unhandled_rejection' && e.knownUpstream === true) figures.knownUpstreamRejections++;
  else if (e.event === 'chaos_unhandled_rejection') {
    figures.unhandledRejections++;
    violations.push({ check: 'no unhandled rejection in a worker', detail: `${e.worker}: ${String(e.error)}` });
  }
}

function startWorker(): WorkerProcess {
  const w = spawnWorkerProcess({
    dbUrl: pg!.dbUrl,
    hubspotUrl: sim!.url,
    workerId: `chaos-w${++workerSeq}`,
    exportDir,
    budgetMs: 15_000,
    minStartMs: 1_500,
    lanes: 2,
    poolMax: 3,
    idleMs: 300,
    requestTimeoutMs: 15_000,
    maxSleepMs: 1_000,
    onEvent: onWorkerEvent,
  });
  figures.workerProcesses++;
  workers.push(w);
  void w.exited.then(({ code, signal }) => {
    if (!killedByDriver.has(w) && !stoppingWorkers) {
      violations.push({ check: 'workers only die when killed', detail: `${w.workerId} exited by itself (code ${code}, signal ${signal}): ${w.otherLines.slice(-12).join(" | ")}` });
    }
  });
  return w;
}
const live = () => workers.filter((w) => w.isAlive());

// ---------- chaos actions ----------

async function trigger(kind: 'fetch' | 'export', p: PortalRef, types: ContentType[], maxAttempts: number) {
  figures.triggers++;
  try {
    const r = await createRun(sql!, { portalId: p.portalId, requestedBy: p.userId, kind, contentTypes: types, leaseSeconds: LEASE_SECONDS, maxAttempts });
    if (!r.runId) figures.triggersAllDuplicate++;
    figures.duplicateTypesRefused += r.duplicateTypes.length;
  } catch (e) {
    // Postgres may be restarting: a trigger that fails is simply not made.
    say(`trigger failed (${(e as Error).message})`);
  }
}

async function fireTriggers(portals: readonly PortalRef[]) {
  const p = pick(portals);
  const kind = rand() < 0.7 ? 'fetch' : 'export';
  const types = rand() < 0.4 ? [...CONTENT_TYPES] : subset(CONTENT_TYPES);
  const maxAttempts = rand() < 0.3 ? 3 : 8;
  // Sometimes the same trigger three times at once (a user hammering the button).
  const n = rand() < 0.3 ? 3 : 1;
  await Promise.all(Array.from({ length: n }, () => trigger(kind, p, types, maxAttempts)));
}

async function killOne() {
  const candidates = live().filter((w) => w !== frozen && (sparedUntil.get(w) ?? 0) < Date.now());
  if (candidates.length === 0) return;
  const victim = pick(candidates);
  killedByDriver.add(victim);
  await victim.kill();
  figures.kills++;
  startWorker();
  say(`SIGKILL ${victim.workerId}; started a replacement (${live().length} live)`);
}

async function freezeOne() {
  // Prefer a worker that holds a job right now.
  let holders: string[] = [];
  try {
    holders = (await sql!`select distinct split_part(worker_id, '/', 1) as w from public.jobs where status = 'running'`).map((r) => r.w as string);
  } catch {
    // Postgres may be restarting.
  }
  const candidates = live().filter((w) => holders.includes(w.workerId));
  const victim = candidates.length ? pick(candidates) : live()[0];
  if (!victim) return;
  frozen = victim;
  victim.freeze();
  figures.freezes++;
  const ms = LEASE_SECONDS * 1000 + 3000;
  say(`SIGSTOP ${victim.workerId} for ${ms} ms (holding ${holders.includes(victim.workerId) ? 'a job' : 'nothing'})`);
  await sleep(ms);
  sparedUntil.set(victim, Date.now() + 6_000);
  thawed.push({ worker: victim.workerId, resumedAt: Date.now(), fromEvent: victim.events.length, w: victim });
  victim.resume();
  frozen = null;
  say(`SIGCONT ${victim.workerId}`);
}

/** Between bursts HubSpot is merely slowish, so kills and freezes land mid-fetch. */
const BASELINE: FaultOptions = { slowMs: 300, slowRate: 1 };
const BURSTS: { name: string; faults: FaultOptions }[] = [
  { name: '5xx', faults: { ...BASELINE, errorRate: 0.9 } },
  { name: '429', faults: { ...BASELINE, forced429Rate: 0.6 } },
  { name: 'slow', faults: { slowMs: 2_500, slowRate: 0.7 } },
  { name: 'drops', faults: { ...BASELINE, dropRate: 0.5 } },
  { name: 'outage', faults: { errorRate: 1, errorStatuses: [500, 502, 503, 504] } },
  { name: 'mixed', faults: { errorRate: 0.2, forced429Rate: 0.15, dropRate: 0.1, slowMs: 800, slowRate: 0.3 } },
];

async function faultBurst(stop: () => boolean) {
  const burst = pick(BURSTS);
  sim!.setFaults({ ...burst.faults, seed: Math.floor(rand() * 1e6) });
  figures.faultBursts++;
  say(`HubSpot burst: ${burst.name}`);
  await sleepUnless(burst.name === 'outage' ? between(4000, 6000) : between(2000, 4000), stop);
  sim!.setFaults(BASELINE);
}

function mutateContent(portals: readonly PortalRef[]) {
  const p = pick(portals);
  const type = pick(CONTENT_TYPES.filter((t) => t !== 'hubdb_tables'));
  const r = rand();
  if (r < 0.4) figures.itemsAdded += sim!.addItems(p.hubspotPortalId, type, 1 + Math.floor(rand() * 8)).length;
  else if (r < 0.75) figures.itemsDeleted += sim!.deleteItems(p.hubspotPortalId, type, 1 + Math.floor(rand() * 5)).length;
  else figures.itemsTouched += sim!.touchItems(p.hubspotPortalId, type, 1 + Math.floor(rand() * 10)).length;
}

async function restartPostgres() {
  say('Postgres: stopping');
  await pg!.restart(1500);
  figures.pgRestarts++;
  say('Postgres: started again');
}

/** Sleeps `ms`, or less when `stop()` turns true. */
async function sleepUnless(ms: number, stop: () => boolean) {
  const end = Date.now() + ms;
  while (!stop() && Date.now() < end) await sleep(Math.min(250, end - Date.now()));
}

/** Runs `fn` every `lo..hi` ms until `until`; errors are reported, not thrown. */
async function every(lo: number, hi: number, until: () => boolean, fn: () => Promise<void> | void) {
  while (!until()) {
    await sleepUnless(between(lo, hi), until);
    if (until()) break;
    try {
      await fn();
    } catch (e) {
      say(`chaos action failed: ${(e as Error).message}`);
    }
  }
}

async function activeJobs(): Promise<number> {
  const [r] = await sql!`select count(*)::int as n from public.jobs where status in ('pending', 'running')`;
  return r!.n as number;
}

async function drain(what: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  for (;;) {
    let n: number;
    try {
      n = await activeJobs();
    } catch {
      n = -1;
    }
    if (n === 0) return;
    if (Date.now() > deadline) {
      violations.push({ check: 'queue drains', detail: `${what}: ${n} jobs still active after ${timeoutMs} ms` });
      return;
    }
    if (n !== last) say(`${what}: ${n} jobs active`);
    last = n;
    while (live().length < WORKERS) startWorker();
    await sleep(500);
  }
}

// ---------- the run ----------

async function main(): Promise<number> {
  say(`starting: ${durationMs / 1000} s of chaos, ${WORKERS} workers, ${PORTALS} portals, lease ${LEASE_SECONDS} s, seed ${SEED}`);
  [pg, sim] = await Promise.all([startChaosPostgres({ database: 'chaos' }), startHubSpotSimulator({ seed: SEED })]);
  exportDir = await mkdtemp(path.join(tmpdir(), 'queue-chaos-exports-'));
  sql = connectDatabase(pg.dbUrl, { max: 4, applicationName: 'chaos-driver' });
  await installAudit(sql);
  // Short backoff so retries happen within the run (these are the queue's named settings, kept in a table).
  await sql`update private.job_kinds set backoff_base_seconds = 1, backoff_max_seconds = 4`;

  const portals: PortalRef[] = [];
  for (let i = 0; i < PORTALS; i++) {
    const hubspotPortalId = 310_000 + i;
    const token = `pat-chaos-${hubspotPortalId}-${SEED}`;
    sim.addPortal({ portalId: hubspotPortalId, token, sizes: SIZES, seed: SEED + i });
    const [u] = await sql`insert into auth.users (id, email, aud, role) values (gen_random_uuid(), ${`chaos-${i}@example.test`}, 'authenticated', 'authenticated') returning id`;
    // Sealed, as the orchestrator stores it; the worker processes and the edge worker hold the same test keys.
    const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: u!.id as string, hubspotPortalId, name: `Chaos ${i}`, accessToken: token });
    portals.push({ portalId, userId: u!.id as string, hubspotPortalId });
  }
  for (let i = 0; i < WORKERS; i++) startWorker();
  await Promise.all(workers.map((w) => w.ready));
  say(`${WORKERS} workers ready`);
  let edgeLoops: Promise<void>[] = [];
  if (EDGE_LOOPS > 0) {
    edge = await startEdgeWorker();
    edgeLoops = Array.from({ length: EDGE_LOOPS }, () => edgeLoop());
    say(`edge worker up (${EDGE_LOOPS} cron loops, CPU limits 150/500 ms)`);
  }
  sim.setFaults(BASELINE);

  // Everything starts with a full fetch of every portal.
  for (const p of portals) await trigger('fetch', p, [...CONTENT_TYPES], 8);

  const chaosStart = Date.now();
  const over = () => Date.now() - chaosStart >= durationMs;
  const restartAt = durationMs * 0.5;
  const freezeEvery = Math.max(durationMs * 0.35, 30_000);
  let restarted = false;
  let nextFreeze = durationMs * 0.2;
  const status = async () => {
    const rows = await sql!`select status, count(*)::int as n from public.jobs group by status order by status`;
    say(`jobs ${rows.map((r) => `${r.status} ${r.n}`).join(', ')} | kills ${figures.kills}, zombie writes rejected ${figures.zombieWritesRejected}, live workers ${live().length}`);
  };
  await Promise.all([
    every(1_000, 2_500, over, () => fireTriggers(portals)),
    every(3_000, 6_000, over, killOne),
    ...(edge ? [every(5_000, 9_000, over, killEdgeIsolates)] : []),
    every(3_000, 6_000, over, () => faultBurst(over)),
    every(2_000, 5_000, over, () => mutateContent(portals)),
    every(5_000, 5_000, over, status),
    every(500, 500, over, async () => {
      const elapsed = Date.now() - chaosStart;
      if (!restarted && elapsed >= restartAt) {
        restarted = true;
        await restartPostgres();
      }
      if (elapsed >= nextFreeze && frozen === null && durationMs - elapsed > LEASE_SECONDS * 1000 + 4000) {
        nextFreeze += freezeEvery;
        await freezeOne();
      }
    }),
  ]);
  sim.clearFaults();
  if (frozen) (frozen as WorkerProcess).resume();
  say('chaos over: draining the queue');
  await drain('drain', 180_000);

  // A clean final fetch (content must now equal HubSpot's exactly), then a final export of it.
  say('final fetch of every portal');
  const [beforeFetch] = await sql`select now() as t`;
  for (const p of portals) await trigger('fetch', p, [...CONTENT_TYPES], 5);
  await drain('final fetch', 120_000);
  const [beforeExport] = await sql`select now() as t`;
  say('final export of every portal');
  for (const p of portals) await trigger('export', p, [...CONTENT_TYPES], 5);
  await drain('final export', 120_000);
  const finalExportRuns = new Set((await sql`select id from public.runs where kind = 'export' and created_at > ${beforeExport!.t as Date}`).map((r) => r.id as string));

  stoppingWorkers = true;
  await Promise.all([...workers.map((w) => w.stop()), ...edgeLoops]);
  const edgeStats = edge?.stats().worker;
  const edgeSummary = edge ? summarizeEdgeStats(edge.stats()) : [];
  // What the worker's isolates printed, for a shutdown the summary can only count (an uncaught exception, say).
  const edgeOutput = edge?.output.get('worker') ?? [];
  await edge?.stop();
  edge = undefined;
  say('workers stopped; checking');

  // ---------- checks ----------
  const queue = await checkQueue(sql);
  const content = await checkContent(sql, sim, portals);
  const exports = await checkExports(sql, { exportDir, exactRuns: finalExportRuns });
  const audit = await analyseAudit(sql);
  violations.push(...queue.violations, ...content.violations, ...exports.violations, ...audit.violations);
  const [creds] = await sql`select count(*)::int as n, count(*) filter (where access_token is not null or access_token_enc is null)::int as clear
                              from private.portal_credentials`;
  if (creds!.n !== PORTALS || creds!.clear !== 0) {
    violations.push({ check: 'tokens sealed at rest', detail: `${creds!.clear} of ${creds!.n} credentials rows not sealed (expected 0 of ${PORTALS})` });
  }
  const finalRuns = await sql`select kind, status, jobs_total from public.runs where created_at >= ${beforeFetch!.t as Date}`;
  const finalOk = finalRuns.filter((r) => r.status === 'completed' && r.jobs_total === CONTENT_TYPES.length).length;
  if (finalRuns.length !== 2 * PORTALS || finalOk !== finalRuns.length) {
    violations.push({ check: 'final clean fetch and export complete', detail: `${finalOk} of ${finalRuns.length} final runs completed with all types (expected ${2 * PORTALS})` });
  }
  const partials = (await listFiles(exportDir)).filter((f) => f.includes('.partial-')).length;
  const simStats = sim.stats();

  const result = {
    ok: violations.length === 0,
    startedAt: new Date(t0).toISOString(),
    durationSeconds: durationMs / 1000,
    wallSeconds: Math.round((Date.now() - t0) / 100) / 10,
    config: { workers: WORKERS, edgeLoops: EDGE_LOOPS, portals: PORTALS, leaseSeconds: LEASE_SECONDS, seed: SEED, sizesPerPortal: SIZES },
    figures: {
      runs: queue.runs,
      runsByStatus: queue.runsByStatus,
      jobs: queue.jobs,
      jobsByStatus: queue.jobsByStatus,
      notifications: queue.notifications,
      maxAttemptsSeen: queue.maxAttemptsSeen,
      kills: figures.kills,
      freezes: figures.freezes,
      pgRestarts: figures.pgRestarts,
      faultBursts: figures.faultBursts,
      workerProcesses: figures.workerProcesses,
      edgeInvocations: figures.edgeInvocations,
      edgeInvocationFailures: figures.edgeInvocationFailures,
      edgeIsolateKillsByDriver: figures.edgeIsolateKills,
      edgeIsolates: edgeStats?.isolatesStarted ?? 0,
      edgeShutdowns: edgeStats?.shutdowns ?? {},
      edgeBeforeunload: edgeStats?.beforeunload ?? {},
      edgeHardKillsByLimits: edgeStats?.hardKills ?? 0,
      edgeSummary: edgeSummary.join(' / '),
      triggers: figures.triggers,
      triggersAllDuplicate: figures.triggersAllDuplicate,
      duplicateTypesRefused: figures.duplicateTypesRefused,
      zombieWritesRejected: figures.zombieWritesRejected,
      heartbeatsRefused: figures.heartbeatsRefused,
      ...(audit.figures satisfies AuditFigures),
      invocationErrors: figures.invocationErrors,
      items: content.items,
      itemsAdded: figures.itemsAdded,
      itemsDeleted: figures.itemsDeleted,
      itemsTouched: figures.itemsTouched,
      deletedMarked: content.deletedMarked,
      lost: content.lost,
      duplicated: content.duplicated,
      staleLiveRows: content.extraLive,
      exportFiles: exports.files,
      exportRows: exports.rows,
      leftoverPartialExportFiles: partials,
      finalRunsCompleted: `${finalOk}/${2 * PORTALS}`,
      hubspotRequests: simStats.requests,
      hubspotFaultsInjected: simStats.errorsInjected,
      hubspotRateLimited: simStats.rateLimited,
      hubspotPeakPer10s: simStats.peakPer10s,
    },
    afterThaw: thawed.map((t) => ({
      worker: t.worker,
      events: t.w.events.slice(t.fromEvent).filter((e) => (e.event === 'db_call' && e.fn !== 'claim') || /^job_(lost|failed|completed|released)$/.test(e.event))
        .slice(0, 12).map((e) => (e.event === 'db_call' ? `${e.fn}(job ${e.job_id}) -> ${e.ok ? 'ok' : e.error ? `error: ${String(e.error)}` : 'refused'}` : `${e.event} job ${e.job_id} ${e.reason ?? e.error ?? ''}`.trim())),
    })),
    zombieWriteSamples: zombieWrites.slice(0, 10).map((e) => ({ worker: e.worker, fn: e.fn, job: e.job_id, token: e.fencing_token })),
    violations,
  };
  await mkdir(args.out!, { recursive: true });
  await writeFile(path.join(args.out!, 'chaos-latest.json'), `${JSON.stringify(result, null, 2)}\n`);
  await writeFile(path.join(args.out!, 'chaos-latest.md'), markdown(result));
  await writeFile(path.join(args.out!, 'chaos-edge-worker.log'), `${edgeOutput.join('\n')}\n`);
  printSummary(result);
  return result.ok ? 0 : 1;
}

type Result = { ok: boolean; figures: Record<string, unknown>; violations: Violation[]; durationSeconds: number; wallSeconds: number; config: Record<string, unknown>; startedAt: string };

function markdown(r: Result): string {
  const f = r.figures;
  const lines = [
    `# Chaos run: ${r.ok ? 'PASS' : 'FAIL'}`,
    '',
    `${r.startedAt}: ${r.durationSeconds} s of chaos (${r.wallSeconds} s wall), ${JSON.stringify(r.config)}`,
    '',
    '| figure | value |',
    '| --- | --- |',
    ...Object.entries(f).map(([k, v]) => `| ${k} | ${typeof v === 'object' ? JSON.stringify(v) : String(v)} |`),
    '',
    r.violations.length ? '## Violations' : '## Violations: none',
    '',
    ...r.violations.map((v) => `- **${v.check}**: ${v.detail}`),
    '',
  ];
  return lines.join('\n');
}

function printSummary(r: Result) {
  const f = r.figures;
  console.log('');
  console.log(`chaos ${r.ok ? 'PASSED' : 'FAILED'} after ${r.wallSeconds} s`);
  console.log(`  runs ${f.runs} ${JSON.stringify(f.runsByStatus)}, jobs ${f.jobs} ${JSON.stringify(f.jobsByStatus)}, notifications ${f.notifications}`);
  console.log(`  kills ${f.kills}, freezes ${f.freezes}, Postgres restarts ${f.pgRestarts}, HubSpot fault bursts ${f.faultBursts} (${f.hubspotFaultsInjected} faults injected)`);
  console.log(`  edge runtime: ${f.edgeInvocations} invocations (${f.edgeInvocationFailures} not 200), ${f.edgeIsolateKillsByDriver} isolate kills by the driver; ${f.edgeSummary}`);
  console.log(`  zombie writes rejected ${f.zombieWritesRejected} (+${f.heartbeatsRefused} heartbeats refused), reclaims ${f.reclaims}, retries ${f.retries}, releases ${f.releases}, lease-expiry failures ${f.leaseExpiredFailures}`);
  console.log(`  duplicate triggers: ${f.triggersAllDuplicate} of ${f.triggers} refused entirely, ${f.duplicateTypesRefused} duplicate types refused`);
  console.log(`  items ${f.items} (added ${f.itemsAdded}, deleted ${f.itemsDeleted}, ${f.deletedMarked} rows marked deleted), lost ${f.lost}, duplicated ${f.duplicated}, stale live rows ${f.staleLiveRows}`);
  console.log(`  export files ${f.exportFiles} (${f.exportRows} rows), checkpoint regressions ${f.checkpointRegressions}`);
  for (const v of r.violations) console.log(`  VIOLATION ${v.check}: ${v.detail}`);
  console.log(`  written: ${path.join(args.out!, 'chaos-latest.json')} and .md`);
}

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listFiles(p)));
    else out.push(p);
  }
  return out;
}

async function cleanup() {
  stoppingWorkers = true;
  await edge?.stop().catch(() => {});
  await Promise.all(workers.map((w) => w.kill().catch(() => {})));
  await sql?.end({ timeout: 2 }).catch(() => {});
  await sim?.close().catch(() => {});
  await pg?.destroy().catch(() => {});
  if (exportDir) await rm(exportDir, { recursive: true, force: true }).catch(() => {});
}

let code = 1;
try {
  code = await main();
} catch (e) {
  console.error('chaos: the run itself failed:', e);
  code = 2;
} finally {
  await cleanup();
}
process.exit(code);
