// Scenario 6: the orchestrator under load: N concurrent POSTs (fetch runs for N
// distinct portals, N users) through the gateway to the Deno function. Latency
// per request, errors (anything but 201), then every run must complete.
import type { Checks } from '../lib/result.ts';
import type { BenchSystem } from '../lib/system.ts';

const S = '6';

export interface LoadRep {
  latenciesMs: number[];
  errors: number;
  errorKinds: Record<string, number>;
  wallMs: number;
}

export async function orchestratorLoadRep(bs: BenchSystem, concurrent: number, checks: Checks): Promise<LoadRep> {
  const portals = await bs.addPortals(concurrent);
  const t0 = performance.now();
  const results = await Promise.all(portals.map((i) => bs.trigger(i)));
  const wallMs = performance.now() - t0;
  const errorKinds: Record<string, number> = {};
  for (const r of results) if (r.status !== 201) errorKinds[r.error ?? `HTTP ${r.status}`] = (errorKinds[r.error ?? `HTTP ${r.status}`] ?? 0) + 1;
  const runIds = results.flatMap((r) => (r.runId ? [r.runId] : []));
  const completed = await bs.waitForRuns(runIds, 180_000);
  checks.equal(S, `every run created by the ${concurrent} concurrent POSTs completed`, completed, runIds.length);
  const [row] = await bs.sql`select count(*)::int as n from public.jobs where run_id = any(${runIds}::uuid[])`;
  checks.equal(S, 'eight jobs per created run', row?.n, runIds.length * 8);
  return { latenciesMs: results.map((r) => r.latencyMs), errors: results.filter((r) => r.status !== 201).length, errorKinds, wallMs };
}
