// Scenarios 3 and 6 share one running system (simulator + both functions under
// Deno): their repetitions are interleaved (3, 6, 3, 6, ...).
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { dropDatabase, migratedDatabase } from '../lib/pg.ts';
import { atMost, figure } from '../lib/report.ts';
import { percentile } from '../lib/stats.ts';
import { startBenchSystem } from '../lib/system.ts';
import { orchestratorLoadRep, type LoadRep } from './orchestrator-load.ts';
import { triggerLatencyRep, type TriggerRep } from './trigger-latency.ts';

export async function httpScenarios(ctx: BenchContext): Promise<ScenarioResult> {
  const triggers = ctx.quick ? 5 : 50;
  const concurrent = ctx.quick ? 10 : 50;
  const url = await migratedDatabase(ctx.pg, 's36');
  const t = performance.now();
  const bs = await startBenchSystem(url, 1);
  ctx.log(`[3,6] simulator + functions under Deno up in ${Math.round(performance.now() - t)} ms`);
  const trig: TriggerRep[] = [];
  const load: LoadRep[] = [];
  try {
    // Warm-up (not measured): JIT, the JWKS fetch, both database pools.
    const warm = await bs.addPortals(2);
    for (const i of warm) {
      const r = await bs.trigger(i);
      if (r.runId) await bs.waitForRuns([r.runId], 60_000);
    }
    for (let rep = 0; rep < ctx.reps; rep++) {
      const tr = await triggerLatencyRep(bs, triggers, ctx.checks);
      trig.push(tr);
      ctx.log(`[3] rep ${rep + 1}/${ctx.reps}: trigger→start p50 ${percentile(tr.toStartMs, 50).toFixed(0)} ms, p95 ${percentile(tr.toStartMs, 95).toFixed(0)} ms`);
      const lr = await orchestratorLoadRep(bs, concurrent, ctx.checks);
      load.push(lr);
      ctx.log(`[6] rep ${rep + 1}/${ctx.reps}: ${concurrent} concurrent POSTs p50 ${percentile(lr.latenciesMs, 50).toFixed(0)} ms, p99 ${percentile(lr.latenciesMs, 99).toFixed(0)} ms, errors ${lr.errors}`);
    }
    const sim = bs.sys.sim.stats();
    ctx.checks.equal('3', 'no HubSpot 429 during scenarios 3 and 6', sim.rateLimited, 0);
  } finally {
    await bs.stop();
    await dropDatabase(ctx.pg, url);
  }
  const full = !ctx.quick;
  ctx.note(`Scenario 3: ${triggers} sequential triggers per repetition, each a new user and portal (8 content types, one item each in the simulator), ` +
    `POST /functions/v1/orchestrator with a user JWT (ES256, JWKS from the gateway); latency = request start → min(jobs.started_at) of the run ` +
    `(same machine clock); the next trigger waits until the run has finished. Two unmeasured warm-up triggers first. ` +
    `The orchestrator counts each type's total in HubSpot (8 simulator requests) before creating the run, so that is inside the figure.`);
  ctx.note(`Scenario 6: ${concurrent} concurrent POSTs per repetition, distinct users and portals; errors = any status but 201; ` +
    `the woken worker invocations run the created jobs at the same time (same 2 cores), and every run must complete.`);
  return {
    figures: [
      figure('3', `trigger → first job claimed, p50 (${triggers} triggers)`, 'ms', trig.map((r) => percentile(r.toStartMs, 50))),
      figure('3', `trigger → first job claimed, p95 (${triggers} triggers)`, 'ms', trig.map((r) => percentile(r.toStartMs, 95)),
        { goal: full ? atMost(1000, '< 1 s') : undefined }),
      figure('3', 'orchestrator POST response time, p50', 'ms', trig.map((r) => percentile(r.responseMs, 50))),
      figure('6', `${concurrent} concurrent POSTs, p50 latency`, 'ms', load.map((r) => percentile(r.latenciesMs, 50))),
      figure('6', `${concurrent} concurrent POSTs, p99 latency`, 'ms', load.map((r) => percentile(r.latenciesMs, 99))),
      figure('6', `${concurrent} concurrent POSTs, errors`, 'count', load.map((r) => r.errors), { goal: atMost(0, '0') }),
      figure('6', `${concurrent} concurrent POSTs, wall time for all`, 'ms', load.map((r) => r.wallMs)),
    ],
    details: { triggers, concurrent, triggerReps: trig, loadReps: load },
  };
}
