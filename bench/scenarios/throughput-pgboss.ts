// Scenario 1 (e): pg-boss 12 draining no-op jobs in its own database with batch
// fetch: work({ batchSize, localConcurrency: 8, burstWhenBatchFull: true }),
// pool max 8; the handler gets a batch and its resolution completes the batch.
// Cron scheduling and the maintenance supervisor are off (not part of draining).
import { PgBoss } from 'pg-boss';
import { cpuMeter, pool } from '../lib/pg.ts';
import { ExactlyOnce, queueRunResult, type Checks, type QueueRunResult } from '../lib/result.ts';
import { waitFor, withTimeout } from '../lib/stats.ts';

const SCHEMA = 'pgboss';
const QUEUE = 'noop';

export const PGBOSS_SETTINGS = { max: 8, localConcurrency: 8, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true } as const;

function boss(url: string, max: number): PgBoss {
  const b = new PgBoss({ connectionString: url, schema: SCHEMA, max, supervise: false, schedule: false });
  b.on('error', (e) => console.error(`pg-boss error: ${e instanceof Error ? e.message : String(e)}`));
  return b;
}

/** Installs pg-boss, creates the queue and inserts `jobs` no-op jobs (insert(), in batches). */
export async function seedPgBoss(url: string, jobs: number): Promise<void> {
  const b = boss(url, 2);
  await b.start();
  try {
    await b.createQueue(QUEUE);
    for (let i = 0; i < jobs; i += 5000) {
      await b.insert(QUEUE, Array.from({ length: Math.min(5000, jobs - i) }, (_, k) => ({ data: { i: i + k } })));
    }
  } finally {
    await b.stop({ graceful: false });
  }
}

export async function runPgBoss(o: {
  url: string; jobs: number; batchSize: number; pgPid: number | null; checks: Checks; scenario: string; timeoutMs: number;
}): Promise<QueueRunResult> {
  const b = boss(o.url, PGBOSS_SETTINGS.max);
  await b.start();
  const watcher = pool(o.url, 1);
  const once = new ExactlyOnce();
  let handled = 0;
  let allHandled!: () => void;
  const done = new Promise<void>((r) => (allHandled = r));
  try {
    const meter = await cpuMeter(o.pgPid);
    await b.work<{ i: number }>(QUEUE, {
      batchSize: o.batchSize,
      localConcurrency: PGBOSS_SETTINGS.localConcurrency,
      pollingIntervalSeconds: PGBOSS_SETTINGS.pollingIntervalSeconds,
      burstWhenBatchFull: PGBOSS_SETTINGS.burstWhenBatchFull,
    }, async (jobs) => {
      for (const j of jobs) once.record(j.data.i);
      handled += jobs.length;
      if (handled >= o.jobs) allHandled();
    });
    await withTimeout('pg-boss to run every job', done, o.timeoutMs);
    await waitFor('pg-boss completions', async () =>
      (await watcher`select count(*)::int as n from pgboss.job where name = ${QUEUE} and state <> 'completed'`)[0]?.n === 0, 30_000);
    const elapsed = performance.now() - (once.firstAt ?? 0);
    const cpu = await meter();
    once.check(o.checks, o.scenario, `pg-boss (batch ${o.batchSize})`, o.jobs);
    const [row] = await watcher`select count(*)::int as n from pgboss.job where name = ${QUEUE} and state = 'completed'`;
    o.checks.equal(o.scenario, `pg-boss (batch ${o.batchSize}): jobs completed in the database`, row?.n, o.jobs);
    return queueRunResult(once.total, elapsed, cpu);
  } finally {
    await b.offWork(QUEUE).catch(() => {});
    await b.stop({ graceful: false, timeout: 5000 }).catch(() => {});
    await watcher.end({ timeout: 5 });
  }
}
