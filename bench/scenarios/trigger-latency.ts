// Scenario 3: trigger-to-start latency. A user POSTs a fetch run to the
// orchestrator (under Deno, via the gateway); the orchestrator wakes the worker
// at once; we measure request start → the run's first job claimed
// (jobs.started_at, set by the claim). One trigger at a time, each for its own
// portal, the previous run finished first (so nothing queues behind it).
import type { Checks } from '../lib/result.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchSystem } from '../lib/system.ts';

const S = '3';

export interface TriggerRep {
  /** Request start → first job claimed, per trigger (ms). */
  toStartMs: number[];
  /** Request start → HTTP response (ms). */
  responseMs: number[];
}

export async function triggerLatencyRep(bs: BenchSystem, triggers: number, checks: Checks): Promise<TriggerRep> {
  const portals = await bs.addPortals(triggers);
  const rep: TriggerRep = { toStartMs: [], responseMs: [] };
  let failed = 0;
  let unfinished = 0;
  for (const i of portals) {
    const r = await bs.trigger(i);
    if (r.status !== 201 || !r.runId) {
      failed++;
      continue;
    }
    rep.responseMs.push(r.latencyMs);
    const startedMs = await firstClaim(bs, r.runId, 30_000);
    if (startedMs === null) {
      failed++;
      continue;
    }
    rep.toStartMs.push(startedMs - r.startedAtMs);
    if ((await bs.waitForRuns([r.runId], 60_000)) !== 1) unfinished++;
  }
  checks.equal(S, 'every trigger created a run whose first job was claimed', failed, 0);
  checks.equal(S, 'every triggered run completed', unfinished, 0);
  return rep;
}

/** When (epoch ms, database clock) the run's first job was claimed; null on timeout. */
async function firstClaim(bs: BenchSystem, runId: string, timeoutMs: number): Promise<number | null> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const [row] = await bs.sql`select (extract(epoch from min(started_at)) * 1000)::float8 as ms from public.jobs where run_id = ${runId}`;
    if (row?.ms != null) return Number(row.ms);
    await sleep(5);
  }
  return null;
}
