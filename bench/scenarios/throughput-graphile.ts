// Scenario 1 (d): graphile-worker 0.18 draining no-op jobs in its own database,
// with the settings of its perfTest/graphile.config.js and performance docs:
//   localQueue { size: 500, refetchDelay { durationMs: 10 } }, completeJobBatchDelay 0,
//   failJobBatchDelay 0, preparedStatements true (its default).
// Concurrency 8 and maxPoolSize 8 (8 connections, like ours).
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import { cpuMeter, pool } from '../lib/pg.ts';
import { ExactlyOnce, queueRunResult, type Checks, type QueueRunResult } from '../lib/result.ts';
import { waitFor, withTimeout } from '../lib/stats.ts';

const SCHEMA = 'graphile_worker';
const quiet = new Logger(() => () => {});

export const GRAPHILE_SETTINGS = {
  concurrency: 8,
  maxPoolSize: 8,
  localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
  preparedStatements: true,
} as const;

/** Installs graphile-worker's schema and queues `jobs` no-op jobs (add_jobs, in batches). */
export async function seedGraphile(url: string, jobs: number): Promise<void> {
  await runMigrations({ connectionString: url, schema: SCHEMA, logger: quiet });
  const utils = await makeWorkerUtils({ connectionString: url, schema: SCHEMA, logger: quiet });
  try {
    for (let i = 0; i < jobs; i += 5000) {
      const specs = Array.from({ length: Math.min(5000, jobs - i) }, (_, k) => ({ identifier: 'noop', payload: { i: i + k } }));
      await utils.addJobs(specs);
    }
  } finally {
    await utils.release();
  }
}

export async function runGraphile(o: { url: string; jobs: number; pgPid: number | null; checks: Checks; scenario: string; timeoutMs: number }): Promise<QueueRunResult> {
  const once = new ExactlyOnce();
  let handled = 0;
  let allHandled!: () => void;
  const done = new Promise<void>((r) => (allHandled = r));
  const meter = await cpuMeter(o.pgPid);
  const runner = await run({
    connectionString: o.url,
    schema: SCHEMA,
    concurrency: GRAPHILE_SETTINGS.concurrency,
    maxPoolSize: GRAPHILE_SETTINGS.maxPoolSize,
    noHandleSignals: true,
    logger: quiet,
    crontab: '',
    preset: {
      worker: {
        localQueue: { ...GRAPHILE_SETTINGS.localQueue, refetchDelay: { ...GRAPHILE_SETTINGS.localQueue.refetchDelay } },
        completeJobBatchDelay: GRAPHILE_SETTINGS.completeJobBatchDelay,
        failJobBatchDelay: GRAPHILE_SETTINGS.failJobBatchDelay,
        preparedStatements: GRAPHILE_SETTINGS.preparedStatements,
      },
    },
    taskList: {
      noop: async (payload) => {
        once.record((payload as { i: number }).i);
        if (++handled === o.jobs) allHandled();
      },
    },
  });
  const watcher = pool(o.url, 1);
  try {
    const stoppedEarly = runner.promise.then(() => { throw new Error('graphile-worker stopped early'); });
    await withTimeout('graphile-worker to run every job', Promise.race([done, stoppedEarly]), o.timeoutMs);
    // Completions are batched: the run ends when the last one is in the database.
    await waitFor('graphile-worker completions', async () => (await watcher`select count(*)::int as n from graphile_worker._private_jobs`)[0]?.n === 0, 30_000);
    const elapsed = performance.now() - (once.firstAt ?? 0);
    const cpu = await meter();
    once.check(o.checks, o.scenario, 'graphile-worker', o.jobs);
    return queueRunResult(once.total, elapsed, cpu);
  } finally {
    await runner.stop();
    await watcher.end({ timeout: 5 });
  }
}
