// Worker processes that die or freeze mid-fetch: a real OS process per worker,
// frozen with SIGSTOP past its lease (a zombie) or killed with SIGKILL. The
// fencing token must keep the zombie from writing anything once another worker
// has reclaimed the job, and a reclaimed job must resume from its checkpoint.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { createRun } from '../shared/sql/runs.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { sleep, waitFor } from '../scripts/chaos/checks.ts';
import { decodeCursor } from '../hubspot-sim/routes.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { databaseDigest, jobRow } from './support/queue-fixtures.ts';
import { dbCalls, spawnWorkerProcess, type WorkerProcess, type WorkerProcessOptions } from '../scripts/chaos/worker-process.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let exportDir: string;
const workers: WorkerProcess[] = [];
const SITE_PAGES = `GET ${LIST_PATHS.site_pages}`;
const PAGES = 8; // 800 site pages at 100 per request

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  exportDir = await mkdtemp(path.join(tmpdir(), 'queue-zombie-exports-'));
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  sim.clearFaults();
});
afterAll(async () => {
  await sim?.close();
  if (exportDir) await rm(exportDir, { recursive: true, force: true });
});

let nextPortal = 880_001;

/** A simulator portal with 800 site pages, connected for a new user, and a fetch run over site_pages with a short lease. */
async function seedFetch(leaseSeconds: number) {
  const hubspotPortalId = nextPortal++;
  const token = `pat-zombie-${hubspotPortalId}`;
  sim.addPortal({ portalId: hubspotPortalId, token, sizes: { site_pages: PAGES * 100 } });
  const userId = await createUser(db.sql);
  const portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: userId, hubspotPortalId, name: 'Zombie', accessToken: token });
  const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'], leaseSeconds, maxAttempts: 5 });
  const [job] = await db.sql`select id::text as id from public.jobs where run_id = ${run.runId}`;
  return { hubspotPortalId, portalId, runId: run.runId!, jobId: job!.id as string };
}

function worker(workerId: string, extra: Partial<WorkerProcessOptions> = {}): WorkerProcess {
  const w = spawnWorkerProcess({ dbUrl: db.url, hubspotUrl: sim.url, workerId, exportDir, budgetMs: 120_000, lanes: 1, requestTimeoutMs: 60_000, ...extra });
  workers.push(w);
  return w;
}

/** Content rows of the portal equal the simulator's site pages, one row each. */
async function expectExactContent(portalId: string, hubspotPortalId: number) {
  const rows = await db.sql`select hubspot_id, deleted_at from public.hubspot_content where portal_id = ${portalId} and content_type = 'site_pages'`;
  const expected = sim.items(hubspotPortalId, 'site_pages').map((i) => i.key).sort();
  expect(rows.length).toBe(expected.length);
  expect(rows.map((r) => r.hubspot_id as string).sort()).toEqual(expected);
  expect(rows.filter((r) => r.deleted_at !== null)).toEqual([]);
}

const leaseExpired = (jobId: string) => async () => {
  const [r] = await db.sql`select status = 'running' and lease_expires_at < now() as expired from public.jobs where id = ${jobId}`;
  return r?.expired === true;
};

describe('worker processes under SIGSTOP and SIGKILL', () => {
  it('a worker frozen past its lease is fenced off: the reclaimer finishes and the zombie writes nothing', async () => {
    const { hubspotPortalId, portalId, runId, jobId } = await seedFetch(3);
    sim.setFaults({ slowMs: 600 }); // every page takes a while: the zombie freezes mid-fetch

    const a = worker('zombie-A');
    await waitFor(async () => (await jobRow(db.sql, jobId)).progress_done as number >= 200, { timeoutMs: 60_000, what: 'worker A to save two pages' });
    a.freeze();
    const frozenAtEvent = a.events.length;
    const atFreeze = await jobRow(db.sql, jobId);
    expect(atFreeze).toMatchObject({ status: 'running', worker_id: 'zombie-A', attempts: 1 });

    await waitFor(leaseExpired(jobId), { timeoutMs: 30_000, what: "A's lease to expire" });
    const expiredAt = Date.now();
    const b = worker('zombie-B');
    await waitFor(async () => {
      const j = await jobRow(db.sql, jobId);
      return j.worker_id === 'zombie-B' && (j.progress_done as number) > (atFreeze.progress_done as number);
    }, { timeoutMs: 60_000, what: 'worker B to reclaim the job and save a page' });

    // The zombie wakes up while B is mid-job. Its heartbeat timer and its in-flight page race: if the
    // refused heartbeat came back first the zombie would just stop without trying a stale write.
    // Holding a lock on the jobs table for a moment makes the race deterministic: the zombie's
    // heartbeat waits, its page arrives, and it tries to save it with its old token (B waits too).
    await db.sql.begin(async (tx) => {
      await tx`lock table public.jobs in access exclusive mode`;
      a.resume();
      await waitFor(async () => {
        const [w] = await db.sql`select count(*)::int as n from pg_stat_activity
          where application_name = 'chaos-worker zombie-A' and wait_event_type = 'Lock' and query like '%save_fetched_page%'`;
        return w!.n > 0;
      }, { timeoutMs: 30_000, what: 'the zombie to try saving its stale page' });
    });
    const outcome = await a.waitForEvent((e) => e.job_id === jobId && /^job_(completed|lost|failed|released|retried)$/.test(e.event), 30_000);
    expect(outcome.event === 'job_lost' || (outcome.event === 'job_failed' && outcome.outcome === 'lost'), JSON.stringify(outcome)).toBe(true);

    await waitFor(async () => (await jobRow(db.sql, jobId)).status === 'completed', { timeoutMs: 60_000, what: 'worker B to finish the job' });
    const done = await jobRow(db.sql, jobId);
    const digest = await databaseDigest(db.sql, { budgets: false });
    await sleep(1500); // nothing writes after the end either
    expect(await databaseDigest(db.sql, { budgets: false })).toBe(digest);

    // The zombie tried to write, with its old token, and every call was refused by the fence
    // (not by some later error).
    // Calls sent before the lease expired were still A's to make: one in flight as the freeze came may be
    // answered, and its line written only after the resume (a CI run saw a page saved so, logged late).
    const zombieCalls = dbCalls(a, jobId, frozenAtEvent).filter((c) => c.fn !== 'claim' && Date.parse(String(c.sent_at)) >= expiredAt);
    expect(zombieCalls.map((c) => c.fn)).toContain('save_fetched_page_raw');
    expect(zombieCalls.filter((c) => c.ok || c.error), JSON.stringify(zombieCalls)).toEqual([]);
    expect(zombieCalls.filter((c) => c.fencing_token !== String(atFreeze.fencing_token)), JSON.stringify(zombieCalls)).toEqual([]);

    // The job is the reclaimer's: second attempt, its token, its completion; checkpoint at the end.
    const bClaim = b.events.find((e) => e.event === 'db_call' && e.fn === 'claim' && e.job_id === jobId);
    expect(bClaim).toBeDefined();
    expect(BigInt(bClaim!.fencing_token!)).toBeGreaterThan(BigInt(String(atFreeze.fencing_token)));
    expect(done).toMatchObject({ status: 'completed', worker_id: 'zombie-B', attempts: 2, fencing_token: bClaim!.fencing_token, checkpoint: { after: null, finished: true } });
    expect(dbCalls(b, jobId).filter((c) => c.fn === 'complete_fetch_job' && c.ok)).toHaveLength(1);
    // Every page was saved once: a stale page accepted from the zombie would count twice.
    expect(done.progress_done).toBe(PAGES * 100);
    expect(done.result).toMatchObject({ fetched: PAGES * 100, pages: PAGES, deleted: 0 });
    await expectExactContent(portalId, hubspotPortalId);
    const [run] = await db.sql`select status from public.runs where id = ${runId}`;
    expect(run!.status).toBe('completed');
    const notes = await db.sql`select kind from public.notifications where run_id = ${runId}`;
    expect(notes.map((n) => n.kind)).toEqual(['run_completed']);
  }, 150_000);

  it('a SIGKILLed worker: the next one resumes from the checkpoint, earlier pages are not fetched again, no duplicates', async () => {
    const { hubspotPortalId, portalId, runId, jobId } = await seedFetch(3);
    sim.setFaults({ slowMs: 300 });
    sim.resetStats();

    const a = worker('crash-A');
    await waitFor(async () => (await jobRow(db.sql, jobId)).progress_done as number >= 300, { timeoutMs: 60_000, what: 'worker A to save three pages' });
    await a.kill();
    const killedAt = Date.now();
    const atKill = await jobRow(db.sql, jobId);
    expect(atKill).toMatchObject({ status: 'running', worker_id: 'crash-A', attempts: 1 });
    const checkpoint = atKill.checkpoint as { after: string | null; finished: boolean };
    expect(checkpoint.finished).toBe(false);
    expect(checkpoint.after).not.toBeNull();
    const checkpointId = decodeCursor(checkpoint.after!)!;

    await waitFor(leaseExpired(jobId), { timeoutMs: 30_000, what: "the dead worker's lease to expire" });
    const b = worker('crash-B');
    await waitFor(async () => (await jobRow(db.sql, jobId)).status === 'completed', { timeoutMs: 60_000, what: 'worker B to finish the job' });
    await b.kill();

    const requests = sim.requestLog().filter((r) => r.portalId === hubspotPortalId && r.endpoint === SITE_PAGES && r.status === 200);
    const afterKill = requests.filter((r) => r.at > killedAt);
    // The first page was requested once, by A; B started at the saved cursor and only went forward.
    expect(requests.filter((r) => r.after === null)).toHaveLength(1);
    expect(afterKill.length).toBeGreaterThan(0);
    expect(afterKill[0]!.after).toBe(checkpoint.after);
    for (const r of afterKill) expect(decodeCursor(r.after ?? '') ?? -1).toBeGreaterThanOrEqual(checkpointId);
    // Pages A saved before the kill were not requested by B.
    expect(afterKill.length).toBeLessThanOrEqual(PAGES - (atKill.progress_done as number) / 100);

    const done = await jobRow(db.sql, jobId);
    expect(done).toMatchObject({ status: 'completed', worker_id: 'crash-B', attempts: 2, progress_done: PAGES * 100 });
    expect(done.result).toMatchObject({ fetched: PAGES * 100, pages: PAGES, deleted: 0 });
    await expectExactContent(portalId, hubspotPortalId);
    const notes = await db.sql`select kind from public.notifications where run_id = ${runId}`;
    expect(notes.map((n) => n.kind)).toEqual(['run_completed']);
  }, 150_000);
});
