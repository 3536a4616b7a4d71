// Scenario 1: queue throughput with no-op jobs, 8 workers on 8 connections,
// ours (a, b, c) vs graphile-worker vs pg-boss vs the single-UPDATE ceiling,
// with one job per run (every completion settles a run: the worst case) and,
// for (a) and the batch of 50, runs of 8 jobs (the realistic shape). Every
// variant starts from a file copy of its own seeded template, and the variants
// are interleaved (rotated) within each repetition. Diagnostics (not figures'
// runs): Postgres time per job by statement and plans per call
// (pg_stat_statements), function self times, and a check that the
// completions' generic plans reach the held jobs by primary key (auto_explain).
import { atLeast, atMost, figure, type Figure } from '../lib/report.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, emptyDatabase, migratedDatabase, pool } from '../lib/pg.ts';
import type { QueueRunResult } from '../lib/result.ts';
import { seedPendingJobs, seedPendingRunsOf8, seedUsersAndPortals } from '../lib/seed.ts';
import { runCeiling, runFloor, seedCeiling, seedFloor } from './throughput-ceiling.ts';
import { GRAPHILE_SETTINGS, runGraphile, seedGraphile } from './throughput-graphile.ts';
import { PGBOSS_SETTINGS, runPgBoss, seedPgBoss } from './throughput-pgboss.ts';
import { oursLabel, runOurs, type OursMode } from './throughput-ours.ts';
import { profileSingleClaim, type ProfileResult } from './throughput-profile.ts';
import { holderPlans, statementCosts, type HolderPlans, type StatementsResult } from './throughput-statements.ts';

const S = '1';
const WORKERS = 8;
const BATCHES = [10, 50, 100] as const;
const PGBOSS_BATCH = 100; // our largest batch size: like for like (pg-boss gets faster with bigger batches)

interface Variant {
  key: string;
  label: string;
  run(url: string): Promise<QueueRunResult>;
  template: 'ours' | 'ours8' | 'graphile' | 'pgboss';
}

export async function queueThroughput(ctx: BenchContext): Promise<ScenarioResult> {
  const portals = ctx.quick ? 125 : 2500;
  const jobs = portals * 8;
  const timeoutMs = ctx.quick ? 30_000 : 180_000;
  ctx.log(`[1] seeding templates: ${jobs} jobs (${portals} portals × 8 types, one job per run)`);
  const oursTpl = await migratedDatabase(ctx.pg, 's1_ours_tpl');
  const seedSql = pool(oursTpl, 1);
  try {
    await seedUsersAndPortals(seedSql, 1, portals);
    const n = await seedPendingJobs(seedSql, 1, portals);
    ctx.checks.equal(S, 'seeded jobs', n, jobs);
    await seedCeiling(seedSql, jobs);
    await seedFloor(seedSql, jobs);
    await seedSql.unsafe('vacuum analyze');
  } finally {
    await seedSql.end({ timeout: 5 });
  }
  ctx.log('[1] ours template ready (one job per run)');
  const ours8Tpl = await migratedDatabase(ctx.pg, 's1_ours8_tpl');
  const seed8 = pool(ours8Tpl, 1);
  try {
    await seedUsersAndPortals(seed8, 1, portals);
    ctx.checks.equal(S, 'seeded jobs in runs of 8', await seedPendingRunsOf8(seed8, 1, portals), jobs);
    await seed8.unsafe('vacuum analyze');
  } finally {
    await seed8.end({ timeout: 5 });
  }
  ctx.log('[1] ours template ready (runs of 8)');
  const gwTpl = await emptyDatabase(ctx.pg, 's1_graphile_tpl');
  await seedGraphile(gwTpl, jobs);
  ctx.log('[1] graphile-worker template ready');
  const bossTpl = await emptyDatabase(ctx.pg, 's1_pgboss_tpl');
  await seedPgBoss(bossTpl, jobs);
  ctx.log('[1] pg-boss template ready');
  for (const tpl of [gwTpl, bossTpl]) {
    const s = pool(tpl, 1);
    await s.unsafe('vacuum analyze').finally(() => s.end({ timeout: 5 }));
  }

  const pgPid = ctx.pg.pid;
  const common = { expectedJobs: jobs, workers: WORKERS, pgPid, checks: ctx.checks, scenario: S };
  const ours = (key: string, mode: OursMode): Variant => ({
    key, label: oursLabel(mode), template: 'ours',
    run: (url) => runOurs({ ...common, url, mode, label: oursLabel(mode) }),
  });
  const ours8 = (key: string, mode: OursMode): Variant => ({
    key, label: `${oursLabel(mode)}, runs of 8`, template: 'ours8',
    run: (url) => runOurs({ ...common, url, mode, label: `${oursLabel(mode)}, runs of 8`, expectedRuns: portals }),
  });
  const variants: Variant[] = [
    ours('a', { kind: 'single' }),
    ours('b', { kind: 'chained' }),
    ...BATCHES.map((size) => ours(`c${size}`, { kind: 'batch', size })),
    ours8('a8', { kind: 'single' }),
    ours8('c50x8', { kind: 'batch', size: 50 }),
    { key: 'graphile', label: 'graphile-worker 0.18', template: 'graphile', run: (url) => runGraphile({ url, jobs, pgPid, checks: ctx.checks, scenario: S, timeoutMs }) },
    { key: 'pgboss', label: `pg-boss 12 (batchSize ${PGBOSS_BATCH})`, template: 'pgboss', run: (url) => runPgBoss({ url, jobs, batchSize: PGBOSS_BATCH, pgPid, checks: ctx.checks, scenario: S, timeoutMs }) },
    { key: 'ceiling', label: 'ceiling: 1-row UPDATE by pk', template: 'ours', run: (url) => runCeiling({ url, workers: WORKERS, rows: jobs, pgPid, checks: ctx.checks, scenario: S }) },
    { key: 'floor', label: 'reference: bare SKIP LOCKED queue, claim + complete', template: 'ours', run: (url) => runFloor({ url, workers: WORKERS, rows: jobs, pgPid, checks: ctx.checks, scenario: S }) },
  ];
  const templates = { ours: oursTpl, ours8: ours8Tpl, graphile: gwTpl, pgboss: bossTpl };
  const results = new Map<string, QueueRunResult[]>(variants.map((v) => [v.key, []]));
  for (let rep = 0; rep < ctx.reps; rep++) {
    const order = variants.map((_, i) => variants[(i + rep * 3) % variants.length]!);
    for (const v of order) {
      const url = await cloneDatabase(ctx.pg, templates[v.template], `s1_run`);
      try {
        const r = await v.run(url);
        results.get(v.key)!.push(r);
        ctx.log(`[1] rep ${rep + 1}/${ctx.reps} ${v.label}: ${Math.round(r.jobsPerSec)} jobs/s (${Math.round(r.elapsedMs)} ms)`);
      } finally {
        await dropDatabase(ctx.pg, url);
      }
    }
  }
  const profile = await profileRun(ctx, oursTpl, ctx.quick ? 200 : 2000);
  const statements = ctx.pg.statStatements
    ? { oneJobPerRun: await statementsRun(ctx, oursTpl, ctx.quick ? 200 : 2000, 'one job per run'),
        runsOf8: await statementsRun(ctx, ours8Tpl, ctx.quick ? 200 : 2000, 'runs of 8') }
    : null;
  if (!statements) ctx.note('Scenario 1: pg_stat_statements is not preloaded on this server: no per-statement diagnostic.');
  const plans = await holderPlansRun(ctx, oursTpl);
  return {
    figures: [...figures(ctx, variants, results), ...statementFigures(statements)],
    details: { ...details(variants, results, jobs), profile, statements, holderPlans: plans },
  };
}

/** Check: the completions' generic plans reach the held job by primary key (auto_explain on one session). */
async function holderPlansRun(ctx: BenchContext, template: string): Promise<HolderPlans | null> {
  const url = await cloneDatabase(ctx.pg, template, 's1_plans');
  try {
    const plans = await holderPlans(url);
    if (!plans) {
      ctx.note('Scenario 1: auto_explain could not be loaded: the completions\' plans were not checked.');
      return null;
    }
    ctx.note(`Scenario 1 plans (auto_explain, generic plans): the jobs UPDATE in complete_job reads ${plans.completeJob ?? '?'}, ` +
      `in complete_jobs ${plans.completeJobs ?? '?'} (a partial index of running jobs there would cost every completion a read of every running job).`);
    if (!ctx.quick) { // (--quick's 1,000-job table is small enough for a sequential scan to be the cheaper plan)
      ctx.checks.equal(S, 'complete_job reaches the held job by primary key (its generic plan)', plans.completeJob, 'jobs_pkey');
      ctx.checks.equal(S, 'complete_jobs reaches the held jobs by primary key (its generic plan)', plans.completeJobs, 'jobs_pkey');
    }
    return plans;
  } finally {
    await dropDatabase(ctx.pg, url);
  }
}

/** Diagnostic: Postgres time per job by statement and plans per call, one worker, mode (a). */
async function statementsRun(ctx: BenchContext, template: string, jobs: number, shape: string): Promise<StatementsResult> {
  const url = await cloneDatabase(ctx.pg, template, 's1_statements');
  try {
    const r = await statementCosts(url, jobs, ctx.checks, S, `statements diagnostic (${shape})`);
    const top = r.statements.filter((x) => !x.toplevel).slice(0, 6)
      .map((x) => `${(x.execUsPerJob + x.planUsPerJob).toFixed(0)} µs ${x.callsPerJob.toFixed(2)}×/job "${x.query.slice(0, 70)}…"`).join('; ');
    ctx.note(`Scenario 1 statements (${shape}; one worker, ${r.jobs} jobs, pg_stat_statements track = all with planning, not in the figures' runs): ` +
      `claim + complete ${r.totalUsPerJob.toFixed(0)} µs of Postgres time per job; plans per call ${r.nestedPlansPerCall.toFixed(4)} inside the functions, ` +
      `${r.toplevelPlansPerCall.toFixed(2)} for the two top-level calls (unnamed statements: no prepared statements through the pooler). ` +
      `Top nested statements per job: ${top}. Full list in latest.json (details.1.statements).`);
    return r;
  } finally {
    await dropDatabase(ctx.pg, url);
  }
}

function statementFigures(s: { oneJobPerRun: StatementsResult; runsOf8: StatementsResult } | null): Figure[] {
  if (!s) return [];
  return [
    figure(S, 'diagnostic: Postgres time per job, claim + complete, one worker, one job per run (pg_stat_statements)', 'µs/job', [s.oneJobPerRun.totalUsPerJob]),
    figure(S, 'diagnostic: Postgres time per job, claim + complete, one worker, runs of 8 (pg_stat_statements)', 'µs/job', [s.runsOf8.totalUsPerJob]),
    figure(S, 'diagnostic: plans per call of the statements inside the claim and complete functions', 'ratio', [s.oneJobPerRun.nestedPlansPerCall]),
  ];
}

/** Diagnostic: where one worker's job time goes in mode (a) (pg_stat_user_functions). */
async function profileRun(ctx: BenchContext, template: string, jobs: number): Promise<ProfileResult> {
  const url = await cloneDatabase(ctx.pg, template, 's1_profile');
  try {
    const p = await profileSingleClaim(url, jobs, ctx.checks);
    const top = p.functions.slice(0, 6).map((f) => `${f.function} ${f.selfMsPerJob.toFixed(3)}`).join(', ');
    ctx.note(`Scenario 1 diagnostic (one worker, ${p.jobs} jobs, track_functions = all, not in the figures): claim_next_job ` +
      `${p.claimMsPerJob.toFixed(2)} ms and complete_job ${p.completeMsPerJob.toFixed(2)} ms per job, wall, client side; ` +
      (p.functionsUnavailable ?? `function self time per job (ms), top 6: ${top}. Full list in latest.json (details.1.profile).`));
    return p;
  } finally {
    await dropDatabase(ctx.pg, url);
  }
}

function figures(ctx: BenchContext, variants: Variant[], results: Map<string, QueueRunResult[]>): Figure[] {
  const rate = (key: string) => results.get(key)!.map((r) => r.jobsPerSec);
  const out: Figure[] = variants.map((v) => figure(S, `${v.label}`, 'jobs/s', rate(v.key)));
  const med = (key: string) => out[variants.findIndex((v) => v.key === key)]!.summary.median;
  const bestBatch = BATCHES.reduce((best, b) => (med(`c${b}`) > med(`c${best}`) ? b : best), BATCHES[0] as number);
  const perRep = (f: (i: number) => number) => results.get('a')!.map((_, i) => f(i));
  const r = (key: string, i: number) => results.get(key)![i]!.jobsPerSec;
  const goals = !ctx.quick;
  out.push(
    figure(S, 'ours (a) ÷ (ceiling ÷ 2)', 'ratio', perRep((i) => r('a', i) / (r('ceiling', i) / 2)),
      { goal: goals ? atLeast(0.6, '≥ 0.6') : undefined }),
    figure(S, 'ours (a), runs of 8 ÷ (ceiling ÷ 2)', 'ratio', perRep((i) => r('a8', i) / (r('ceiling', i) / 2))),
    figure(S, `ours best batch (${bestBatch}) ÷ graphile-worker`, 'ratio', perRep((i) => r(`c${bestBatch}`, i) / r('graphile', i)),
      { goal: goals ? atLeast(0.5, '≥ 0.5') : undefined }),
    figure(S, `ours best batch (${bestBatch}) ÷ pg-boss`, 'ratio', perRep((i) => r(`c${bestBatch}`, i) / r('pgboss', i))),
    figure(S, 'ours (a) ÷ graphile-worker', 'ratio', perRep((i) => r('a', i) / r('graphile', i))),
    figure(S, 'ours (a) ÷ pg-boss', 'ratio', perRep((i) => r('a', i) / r('pgboss', i))),
    figure(S, 'ours (b) ÷ (ceiling ÷ 2)', 'ratio', perRep((i) => r('b', i) / (r('ceiling', i) / 2))),
    figure(S, 'reference: bare SKIP LOCKED queue ÷ (ceiling ÷ 2)', 'ratio', perRep((i) => r('floor', i) / (r('ceiling', i) / 2)),
      { note: 'five columns, one partial index, no fairness, runs or notifications: what any queue driven like (a) starts from' }),
    figure(S, 'ours (a) ÷ bare SKIP LOCKED queue', 'ratio', perRep((i) => r('a', i) / r('floor', i))),
  );
  for (const v of variants) {
    const rs = results.get(v.key)!;
    out.push(figure(S, `CPU per job, client (Node), ${v.label}`, 'µs/job', rs.map((x) => (x.clientCpuMs * 1000) / x.jobs)));
    if (rs.every((x) => x.serverCpuMs !== null)) {
      out.push(figure(S, `CPU per job, Postgres, ${v.label}`, 'µs/job', rs.map((x) => ((x.serverCpuMs ?? 0) * 1000) / x.jobs),
        { goal: goals && v.key === 'a' ? atMost(600, '≤ 600') : undefined }));
    }
  }
  ctx.note(`Scenario 1: ${WORKERS} workers on ${WORKERS} connections, no-op jobs; ratios are per repetition (same conditions), then the median. ` +
    `Seeded with SQL: one job per run (2,500 portals × 8 content types in full mode, every completion settles a run), and runs of 8 (one run of the 8 types per portal, as create_run leaves them). ` +
    `graphile-worker settings: concurrency ${GRAPHILE_SETTINGS.concurrency}, maxPoolSize ${GRAPHILE_SETTINGS.maxPoolSize}, ` +
    `localQueue ${JSON.stringify(GRAPHILE_SETTINGS.localQueue)}, completeJobBatchDelay ${GRAPHILE_SETTINGS.completeJobBatchDelay}, ` +
    `failJobBatchDelay ${GRAPHILE_SETTINGS.failJobBatchDelay}, preparedStatements ${GRAPHILE_SETTINGS.preparedStatements} (perfTest/graphile.config.js). ` +
    `pg-boss: work({ batchSize ${PGBOSS_BATCH}, localConcurrency ${PGBOSS_SETTINGS.localConcurrency}, burstWhenBatchFull }), pool max ${PGBOSS_SETTINGS.max}, supervise/schedule off. ` +
    `Elapsed time runs from the first job in hand to the last completion in the database (batched completions included). ` +
    `Client CPU is this Node process (it runs every library in-process); Postgres CPU is the postmaster and all backends (/proc utime+stime).`);
  return out;
}

function details(variants: Variant[], results: Map<string, QueueRunResult[]>, jobs: number): Record<string, unknown> {
  return {
    jobs,
    workers: WORKERS,
    graphileSettings: GRAPHILE_SETTINGS,
    pgBossSettings: { ...PGBOSS_SETTINGS, batchSize: PGBOSS_BATCH },
    variants: variants.map((v) => ({ key: v.key, label: v.label, runs: results.get(v.key) })),
  };
}
