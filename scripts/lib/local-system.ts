// The whole system on loopback for end-to-end tests: simulator, signing keys,
// both functions under real Deno, in a local edge runtime that enforces hosted
// Supabase's limits per isolate, behind the /functions/v1 gateway.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSigningKeys, startLocalFunctions, type LimitOptions, type LocalFunctions, type SigningKeys } from './local-supabase.ts';
import { startHubSpotSimulator, type HubSpotSimulator, type SimulatorOptions } from '../hubspot-sim/server.ts';

export interface LocalSystem {
  sim: HubSpotSimulator;
  keys: SigningKeys;
  functions: LocalFunctions;
  workerSecret: string;
  exportDir: string;
  /** POSTs to the worker function with the worker secret; returns its JSON summary. */
  invokeWorker(): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Starts simulator + functions against the database at `dbUrl`. */
export async function startLocalSystem(
  dbUrl: string,
  /** limits: per-isolate edge limits (hosted free plan by default); read what they did with functions.stats(). */
  opts: { sim?: SimulatorOptions; env?: Record<string, string>; limits?: LimitOptions } = {},
): Promise<LocalSystem> {
  const sim = await startHubSpotSimulator(opts.sim);
  const keys = await createSigningKeys();
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-e2e-exports-'));
  const workerSecret = `wsk_${crypto.randomUUID().replaceAll('-', '')}`;
  const functions = await startLocalFunctions({
    names: ['orchestrator', 'worker'],
    jwks: keys.jwks,
    limits: opts.limits,
    env: {
      SUPABASE_DB_URL: dbUrl,
      WORKER_SECRET: workerSecret,
      EXPORT_DIR: exportDir,
      HUBSPOT_BASE_URL: sim.url,
      WORKER_TIME_BUDGET_MS: '30000',
      WORKER_MIN_START_MS: '1000',
      ...opts.env,
    },
  });
  return {
    sim,
    keys,
    functions,
    workerSecret,
    exportDir,
    async invokeWorker() {
      const res = await fetch(functions.functionUrl('worker'), { method: 'POST', headers: { Authorization: `Bearer ${workerSecret}` }, body: '{}' });
      return (await res.json()) as Record<string, unknown>;
    },
    async stop() {
      await functions.stop();
      await sim.close();
    },
  };
}
