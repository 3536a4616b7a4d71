// 200 worker invocations at once against 10,000 queued jobs: every job is
// claimed exactly once and completed, nothing errors, and the database sees a
// bounded number of connections (each invocation has a pool of one).
//
// The jobs are export jobs over portals with no content: each is a real
// worker job (claim, read content, write a CSV with its header, commit,
// complete and settle the run) that does not need HubSpot.
import { afterAll, describe, expect, it } from 'vitest';
import type { ExportSink } from '../functions/worker/export-sink.ts';
import { runWorkerInvocation, type InvocationSummary, type WorkerRuntime } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import type { LogFields, Logger } from '../shared/log.ts';
import { checkQueue } from '../scripts/chaos/checks.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { useTestDatabase } from './support/database.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const db = useTestDatabase();
const INVOCATIONS = 200;
const PORTALS = 1250; // x 8 content types = 10,000 jobs
const JOBS = PORTALS * CONTENT_TYPES.length;
const pools: Sql[] = [];

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
});

/** Counts what the workers log: job starts per job id, and anything at warn/error level. */
function countingLogger() {
  const started = new Map<string, number>();
  const problems: { level: string; event: string; fields: LogFields }[] = [];
  const make = (base: LogFields): Logger => {
    const emit = (level: string) => (event: string, fields: LogFields = {}) => {
      if (event === 'job_started') started.set(String(base.job_id), (started.get(String(base.job_id)) ?? 0) + 1);
      if (level !== 'info') problems.push({ level, event, fields: { ...base, ...fields } });
    };
    return { info: emit('info'), warn: emit('warn'), error: emit('error'), child: (f) => make({ ...base, ...f }) };
  };
  return { started, problems, log: make({}) };
}

/** An export sink in memory: counts how many times each file was published. */
function memorySink() {
  const published = new Map<string, number>();
  const sink: ExportSink = {
    async open(objectPath) {
      let bytes = 0;
      return {
        async write(chunk) {
          bytes += Buffer.byteLength(chunk);
        },
        async commit() {
          published.set(objectPath, (published.get(objectPath) ?? 0) + 1);
          return { location: `memory:${objectPath}`, bytes };
        },
        async abort() {},
      };
    },
  };
  return { sink, published };
}

describe('200 concurrent worker invocations', () => {
  it('drain 10,000 jobs: each claimed once, no errors, bounded connections', async () => {
    const users = await db.sql`
      insert into auth.users (id, email, aud, role)
      select gen_random_uuid(), 'conc-' || g || '@example.test', 'authenticated', 'authenticated'
        from generate_series(1, ${PORTALS}) g
      returning id`;
    // Connected as the orchestrator connects them (tokens sealed), over the pool's connections at once.
    await Promise.all(users.map((u, i) => connectPrivateAppPortal(db.sql, testTokenKeys, {
      ownerId: u.id as string, hubspotPortalId: 7_000_001 + i, name: 'Concurrency', accessToken: `tok-${u.id as string}`,
    })));
    const [created] = await db.sql`
      select count(*)::int as runs, sum(cardinality(r.created_types))::int as jobs
        from public.portals p, lateral public.create_run(p.id, p.owner_id, 'export', ${CONTENT_TYPES as unknown as string[]}) r
       where p.name = 'Concurrency'`;
    expect(created).toEqual({ runs: PORTALS, jobs: JOBS });

    // Sample connections while the workers run.
    const sampler = connectDatabase(db.url, { max: 1 });
    pools.push(sampler);
    let peakDb = 0;
    let peakServer = 0;
    let sampling = true;
    const sampling$ = (async () => {
      while (sampling) {
        const [s] = await sampler`select count(*) filter (where datname = current_database())::int as db,
            count(*) filter (where backend_type = 'client backend')::int as server from pg_stat_activity`;
        peakDb = Math.max(peakDb, s!.db as number);
        peakServer = Math.max(peakServer, s!.server as number);
        await sleep(50);
      }
    })();

    const { started, problems, log } = countingLogger();
    const { sink, published } = memorySink();
    const t0 = Date.now();
    const results = await Promise.allSettled(
      Array.from({ length: INVOCATIONS }, (_, i) => {
        const sql = connectDatabase(db.url, { max: 1, applicationName: `conc-${i}` });
        pools.push(sql);
        const rt: WorkerRuntime = {
          sql,
          log,
          exportSink: sink,
          settings: { budgetMs: 150_000, lanes: 1, minStartMs: 0, rateLimit: { maxPer10s: 190 } },
        };
        return runWorkerInvocation(rt, `conc-worker-${i}`);
      }),
    );
    const elapsedMs = Date.now() - t0;
    sampling = false;
    await sampling$;

    const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
    expect(failures).toEqual([]);
    const summaries = results.map((r) => (r as PromiseFulfilledResult<InvocationSummary>).value);
    const sum = (k: keyof InvocationSummary) => summaries.reduce((s, x) => s + (x[k] as number), 0);
    const busyWorkers = summaries.filter((s) => s.claimed > 0).length;
    console.log(`200 invocations drained ${JOBS} jobs in ${elapsedMs} ms; ${busyWorkers} invocations claimed work; ` +
      `peak connections: ${peakDb} on the test database, ${peakServer} on the server`);

    expect(problems).toEqual([]);
    expect({ claimed: sum('claimed'), completed: sum('completed'), failed: sum('failed'), retried: sum('retried'), released: sum('released'), lost: sum('lost') })
      .toEqual({ claimed: JOBS, completed: JOBS, failed: 0, retried: 0, released: 0, lost: 0 });
    // Each job was started exactly once, and each export file published once.
    expect(started.size).toBe(JOBS);
    expect([...started.values()].filter((n) => n !== 1)).toEqual([]);
    expect(published.size).toBe(JOBS);
    expect([...published.values()].filter((n) => n !== 1)).toEqual([]);

    const [jobs] = await db.sql`select count(*)::int as n,
        (count(*) filter (where status = 'completed' and attempts = 1))::int as once,
        count(distinct fencing_token)::int as tokens,
        count(distinct worker_id)::int as workers
        from public.jobs`;
    expect(jobs).toMatchObject({ n: JOBS, once: JOBS, tokens: JOBS });
    expect(jobs!.workers).toBe(busyWorkers);
    const report = await checkQueue(db.sql);
    expect(report.violations).toEqual([]);
    expect(report.runsByStatus).toEqual({ completed: PORTALS });
    expect(report.notifications).toBe(PORTALS);

    // Bounded: one connection per invocation plus the test's own pools, and far below max_connections.
    expect(peakDb).toBeLessThanOrEqual(INVOCATIONS + 10);
    expect(busyWorkers).toBeGreaterThan(INVOCATIONS / 2); // they really ran side by side
  }, 240_000);
});
