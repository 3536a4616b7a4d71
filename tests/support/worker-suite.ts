// The setup the worker suites share: the file's own database and a HubSpot
// simulator for the file; after each test its faults cleared and every run
// stopped (and, with `resetInvocations`, the invocation cap and leases reset).
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startHubSpotSimulator, type HubSpotSimulator } from '../../hubspot-sim/server.ts';
import { useTestDatabase, type TestDatabase } from './database.ts';
import { stopAllRuns } from './fetch-fixtures.ts';

export interface WorkerSuite {
  db: TestDatabase;
  /** The simulator (started before the file's first test). */
  readonly sim: HubSpotSimulator;
}

export function useWorkerSuite(opts: { resetInvocations?: boolean } = {}): WorkerSuite {
  const db = useTestDatabase();
  let sim: HubSpotSimulator | undefined;
  beforeAll(async () => {
    sim = await startHubSpotSimulator();
  });
  afterEach(async () => {
    sim?.clearFaults();
    await stopAllRuns(db.sql);
    if (opts.resetInvocations) {
      await db.sql`update private.worker_settings set max_concurrent_invocations = 4`;
      await db.sql`delete from private.worker_invocations`;
    }
  });
  afterAll(async () => {
    await sim?.close();
  });
  return {
    db,
    get sim() {
      if (!sim) throw new Error('the simulator starts in beforeAll');
      return sim;
    },
  };
}
