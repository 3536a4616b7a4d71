// Builds a worker runtime for tests: real database, real simulator, a local export directory,
// and the test token keys (the fixtures store tokens sealed under them).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import type { WorkerRuntime, WorkerSettings } from '../../functions/worker/invocation.ts';
import type { Sql } from '../../shared/db.ts';
import { createHubSpotClient } from '../../shared/hubspot/client.ts';
import { createHubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import { silentLogger, type Logger } from '../../shared/log.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** A worker runtime against `sql` and the simulator at `hubspotUrl`. */
export async function testWorkerRuntime(sql: Sql, hubspotUrl: string, settings: Partial<WorkerSettings> = {}, log: Logger = silentLogger): Promise<WorkerRuntime & { exportDir: string }> {
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-exports-'));
  return {
    sql,
    log,
    exportDir,
    exportSink: localDirectorySink(exportDir),
    settings: {
      budgetMs: 60_000,
      lanes: 2,
      minStartMs: 1_000,
      hubspotBasePath: hubspotUrl,
      rateLimit: { maxPer10s: 190 },
      ...settings,
    },
    hubspot: (o) => createHubSpotClient({ ...o, sleep: (ms) => sleep(Math.min(ms, 50)) }),
    hubspotWrites: (o) => createHubSpotWriteClient({ ...o, sleep: (ms) => sleep(Math.min(ms, 50)) }),
    tokenKeys: testTokenKeys,
  };
}
