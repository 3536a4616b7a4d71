// Postgres restarts while workers run. This file has its own embedded Postgres
// (the suite's shared one must never restart). Workers are in-process loops of
// runWorkerInvocation that log and retry when the database is unreachable.
// No job may be lost: every job ends completed, runs settle once, and the jobs
// in flight at the restart are recovered through their (short) leases.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { runWorkerInvocation, type WorkerRuntime } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { createHubSpotClient } from '../shared/hubspot/client.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { createLogger } from '../shared/log.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { createRun } from '../shared/sql/runs.ts';
import { checkContent, checkQueue, sleep, waitFor } from '../scripts/chaos/checks.ts';
import { startChaosPostgres, type ChaosPostgres } from '../scripts/chaos/postgres.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';

let pg: ChaosPostgres;
let sim: HubSpotSimulator;
let sql: Sql;
const pools: Sql[] = [];

beforeAll(async () => {
  [pg, sim] = await Promise.all([startChaosPostgres({ database: 'restart' }), startHubSpotSimulator()]);
  sql = connectDatabase(pg.dbUrl, { max: 2 });
  pools.push(sql);
}, 120_000);
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end({ timeout: 2 }).catch(() => {})));
  await sim?.close();
  await pg?.destroy();
});

const WORKERS = 4;
const PORTALS = [661_001, 661_002, 661_003];

describe('a Postgres restart in the middle of a run', () => {
  it('loses no job: in-flight jobs are reclaimed after their leases, every run settles once', async () => {
    const portals: { portalId: string; hubspotPortalId: number }[] = [];
    for (const hubspotPortalId of PORTALS) {
      const token = `pat-restart-${hubspotPortalId}`;
      sim.addPortal({ portalId: hubspotPortalId, token });
      const [user] = await sql`insert into auth.users (id, email, aud, role)
        values (gen_random_uuid(), ${`restart-${hubspotPortalId}@example.test`}, 'authenticated', 'authenticated') returning id`;
      const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: user!.id as string, hubspotPortalId, name: 'Restart', accessToken: token });
      await createRun(sql, { portalId, requestedBy: user!.id as string, kind: 'fetch', contentTypes: CONTENT_TYPES, leaseSeconds: 3, maxAttempts: 10 });
      portals.push({ portalId, hubspotPortalId });
    }
    sim.setFaults({ slowMs: 250 });

    // The workers: each loop has its own pool and keeps going through errors.
    let running = true;
    const errors: string[] = [];
    const warnings: string[] = [];
    const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-restart-exports-'));
    const loops = Array.from({ length: WORKERS }, async (_, i) => {
      const pool = connectDatabase(pg.dbUrl, { max: 3, applicationName: `restart-worker-${i}` });
      pools.push(pool);
      const rt: WorkerRuntime = {
        sql: pool,
        log: createLogger({ write: (line) => (line.includes('"level":"info"') ? undefined : warnings.push(line)) }),
        exportSink: localDirectorySink(exportDir),
        settings: { budgetMs: 10_000, lanes: 2, minStartMs: 1_000, hubspotBasePath: sim.url, rateLimit: { maxPer10s: 190 }, hubspotRequestTimeoutMs: 10_000 },
        hubspot: (o) => createHubSpotClient({ ...o, sleep: (ms) => sleep(Math.min(ms, 200)) }),
        tokenKeys: testTokenKeys,
      };
      while (running) {
        try {
          const s = await runWorkerInvocation(rt, `restart-worker-${i}`);
          if (s.claimed === 0) await sleep(200);
        } catch (e) {
          errors.push(e instanceof Error ? e.message : String(e));
          await sleep(300);
        }
      }
    });

    try {
      // Mid-run: some jobs done, several mid-fetch.
      await waitFor(async () => {
        const [c] = await sql`select (count(*) filter (where status = 'completed'))::int as done,
            (count(*) filter (where status = 'running' and progress_done > 0))::int as busy from public.jobs`;
        return c!.done >= 3 && c!.busy >= 2;
      }, { timeoutMs: 60_000, what: 'the run to be under way' });
      sim.setFaults({ slowMs: 1500 }); // every worker is now waiting on HubSpot: the restart hits them mid-fetch
      await sleep(300);
      const inFlight = await sql`select id::text, fencing_token::text, attempts from public.jobs where status = 'running'`;
      expect(inFlight.length).toBeGreaterThan(0);
      const [{ now: stoppedAt }] = (await sql`select now()`) as unknown as [{ now: Date }];

      await pg.stopServer();
      await sleep(3500); // longer than the lease: every lease held at the stop has expired by the restart
      await pg.startServer();
      sim.setFaults({ slowMs: 100 });

      await waitFor(async () => {
        const [c] = await sql`select count(*)::int as active from public.jobs where status in ('pending', 'running')`;
        return c!.active === 0;
      }, { timeoutMs: 120_000, intervalMs: 250, what: 'every job to finish after the restart' });
      running = false;
      await Promise.all(loops);

      // The workers did see the outage...
      expect(errors.length).toBeGreaterThan(0);
      // ...and lost nothing: every job completed (none failed), runs settled once, content exact.
      const report = await checkQueue(sql);
      expect(report.violations).toEqual([]);
      expect(report.jobsByStatus).toEqual({ completed: PORTALS.length * CONTENT_TYPES.length });
      expect(report.runsByStatus).toEqual({ completed: PORTALS.length });
      expect(report.notifications).toBe(PORTALS.length);
      const content = await checkContent(sql, sim, portals);
      expect(content.violations).toEqual([]);
      expect(content.lost).toBe(0);

      // The jobs in flight at the stop were taken over under new fencing tokens (their leases expired).
      const after = await sql`select id::text, fencing_token::text, attempts, status, finished_at from public.jobs where id = any(${inFlight.map((j) => j.id)}::bigint[])`;
      for (const j of after) {
        const before = inFlight.find((b) => b.id === j.id)!;
        expect(j.status).toBe('completed');
        // (unless it happened to finish in the few milliseconds before the stop)
        if ((j.finished_at as Date) > stoppedAt) expect(j.fencing_token, `job ${j.id}`).not.toBe(before.fencing_token);
      }
      expect(after.some((j) => (j.attempts as number) >= 2)).toBe(true);
      console.log(`restart: ${inFlight.length} jobs in flight at the stop, ${errors.length} invocation errors, ` +
        `${warnings.length} warning lines; max attempts ${report.maxAttemptsSeen}`);
    } finally {
      running = false;
      await Promise.race([Promise.all(loops), sleep(15_000)]);
      await rm(exportDir, { recursive: true, force: true });
    }
  }, 200_000);
});
