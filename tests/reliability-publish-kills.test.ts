// Worker processes SIGKILLed at random during a publish's apply: each a real OS
// process (scripts/chaos/worker-process.ts) running the worker's invocations
// against the file's database and the simulator. A killed worker's job waits
// out its (shortened) job lease and is reclaimed by another; whatever it had
// sent or only counted, every item must end applied, with its target, and
// written by HubSpot once (the simulator's per-item write counter).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ContentType } from '../shared/content-types.ts';
import { approvePublishPlan, createPublishPlan } from '../shared/sql/publish.ts';
import { sleep, waitFor } from '../scripts/chaos/checks.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { spawnWorkerProcess, type WorkerProcess } from '../scripts/chaos/worker-process.ts';
import { useTestDatabase } from './support/database.ts';
import { stopAllRuns } from './support/fetch-fixtures.ts';
import { editFirst, fieldsOf, hubspotNow, planItems, runToEnd, seedPortal } from './support/publish-worker-fixtures.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let exportDir: string;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  exportDir = await mkdtemp(path.join(tmpdir(), 'queue-publish-chaos-'));
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  sim.clearFaults();
  await stopAllRuns(db.sql);
});
afterAll(async () => {
  await sim?.close();
  if (exportDir) await rm(exportDir, { recursive: true, force: true });
});

const TYPES: readonly ContentType[] = ['site_pages', 'blog_posts', 'url_redirects'];
const EDITS = 200;

/** A small seeded generator (the kills are random, and the same on every run). */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('workers killed during an apply', () => {
  it('SIGKILLed at random: every item applied with its target, none lost, none written twice by HubSpot', async () => {
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const sizes = { site_pages: EDITS, blog_posts: EDITS, url_redirects: 30 };
    const p = await seedPortal(db.sql, sim, rt, { sizes }, TYPES);
    const targets = new Map<ContentType, Map<string, Record<string, unknown>>>();
    for (const type of TYPES) targets.set(type, await editFirst(db.sql, p, type, sizes[type as keyof typeof sizes]));
    const plan = await createPublishPlan(db.sql, { portalId: p.portalId, userId: p.userId });
    expect((await runToEnd(rt, db.sql, plan.runId)).status).toBe('completed');
    const run = await approvePublishPlan(db.sql, plan.planId, p.userId);
    // A killed worker's job is claimable again 2 s after its last heartbeat, however often that happens.
    await db.sql`update public.jobs set lease_seconds = 2, max_attempts = 100 where run_id = ${run}`;
    sim.setFaults({ slowMs: 300 }); // each request takes a while: kills land between re-reads, writes and records

    let n = 0;
    const spawn = () => {
      const w = spawnWorkerProcess({ dbUrl: db.url, hubspotUrl: sim.url, workerId: `publish-chaos-${n++}`, exportDir, budgetMs: 8_000, lanes: 2, requestTimeoutMs: 5_000 });
      workers.push(w);
      return w;
    };
    for (let i = 0; i < 3; i++) spawn();
    await Promise.all(workers.map((w) => w.ready));

    const random = seeded(57);
    let kills = 0;
    let killsWhileWriting = 0;
    const finished = async () => {
      const [r] = await db.sql`select finished_at is not null as done from public.runs where id = ${run}`;
      return r!.done === true;
    };
    // The holders of running jobs (a lane's claims carry `<worker>/<lane>`), those with a write counted and not yet recorded first.
    const holders = async () => {
      const rows = await db.sql`select j.worker_id, exists (select 1 from public.publish_items i
          where i.plan_id = ${plan.planId} and i.content_type = j.content_type and i.outcome = 'writing') as writing
        from public.jobs j where j.run_id = ${run} and j.status = 'running' and j.lease_expires_at > now()`;
      const of = (writing: boolean) => workers.filter((w) => w.isAlive()
        && rows.some((r) => r.writing === writing && String(r.worker_id).split('/')[0] === w.workerId));
      return { writing: of(true), other: of(false) };
    };
    while (kills < 6 && !(await finished())) {
      // Every other kill waits for a write in flight (counted by the re-read's prepare, its answer not yet recorded).
      const targeted = kills % 2 === 1;
      if (!targeted) await sleep(150 + Math.floor(random() * 400));
      else await sleep(20);
      const { writing, other } = await holders();
      const pool = targeted ? writing : [...writing, ...other];
      if (pool.length === 0) continue;
      await pool[Math.floor(random() * pool.length)]!.kill();
      kills++;
      if (targeted) killsWhileWriting++;
      spawn();
    }
    await waitFor(finished, { timeoutMs: 90_000, what: 'the publish run to finish' });
    sim.clearFaults();

    expect(kills, 'workers were killed mid-apply').toBe(6);
    expect(killsWhileWriting, 'killed with a write in flight').toBe(3);
    const [runRow] = await db.sql`select status from public.runs where id = ${run}`;
    expect(runRow!.status).toBe('completed');
    const reclaimed = await db.sql`select count(*)::int as n from public.jobs where run_id = ${run} and attempts > 1`;
    expect(reclaimed[0]!.n, 'some job was reclaimed after a kill').toBeGreaterThan(0);
    const items = [...(await planItems(db.sql, plan.planId)).values()];
    expect(items.filter((i) => i.outcome !== 'applied').map((i) => [i.content_type, i.hubspot_id, i.outcome])).toEqual([]);
    for (const type of TYPES) {
      const wanted = targets.get(type)!;
      const counts = sim.writeCounts(p.hubspotPortalId, type);
      const twice = Object.entries(counts).filter(([, c]) => c > 1);
      expect(twice, `${type}: written more than once`).toEqual([]);
      expect(Object.keys(counts).sort(), `${type}: every item written`).toEqual([...wanted.keys()].sort());
      const now = await hubspotNow(sim, p, type, [...wanted.keys()]);
      for (const [id, patch] of wanted) expect(fieldsOf(now.get(id)!, patch), `${type} ${id}`).toEqual(patch);
    }
  }, 150_000);
});
