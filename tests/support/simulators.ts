// Simulators a test file starts, closed (and every run stopped) after each test.
import { afterEach } from 'vitest';
import type { Sql } from '../../shared/db.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../../hubspot-sim/server.ts';
import { stopAllRuns } from './fetch-fixtures.ts';

/** Registers the cleanup; returns the function that starts a simulator. */
export function useSimulators(db: { sql: Sql }): () => Promise<HubSpotSimulator> {
  const sims: HubSpotSimulator[] = [];
  afterEach(async () => {
    await stopAllRuns(db.sql);
    await Promise.all(sims.splice(0).map((s) => s.close()));
  });
  return async () => {
    const sim = await startHubSpotSimulator();
    sims.push(sim);
    return sim;
  };
}
