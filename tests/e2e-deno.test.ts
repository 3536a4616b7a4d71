// End to end over HTTP, as on Supabase: both functions under real Deno, a user
// JWT signed by a key served as JWKS, supabase-js functions.invoke.
import { readFile } from 'node:fs/promises';
import { createClient } from '@supabase/supabase-js';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser, useTestDatabase } from './support/database.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { tokenHash } from '../hubspot-sim/server.ts';
import { localExportPath } from '../shared/export-location.ts';

const db = useTestDatabase();
let sys: LocalSystem;

beforeAll(async () => {
  sys = await startLocalSystem(db.url);
}, 120_000);
afterAll(async () => {
  await sys?.stop();
});

async function invokeAs(userId: string, body: unknown) {
  const token = await sys.keys.signUserToken(userId);
  const supabase = createClient(sys.functions.url, 'local-anon-key', {
    auth: { persistSession: false, autoRefreshToken: false },
    // Node 20 has no native WebSocket; realtime is unused here but supabase-js constructs it.
    realtime: { transport: WebSocket as never },
  });
  const { data, error, response } = await supabase.functions.invoke('orchestrator', { body: body as Record<string, unknown>, headers: { Authorization: `Bearer ${token}` } });
  const status = response?.status ?? 0;
  const payload = error ? await (error as { context?: Response }).context?.json?.() : data;
  return { status, body: payload as Record<string, any> };
}

async function untilRunFinished(userId: string, runId: string) {
  const token = await sys.keys.signUserToken(userId);
  for (let i = 0; i < 60; i++) {
    await sys.invokeWorker();
    const res = await fetch(`${sys.functions.functionUrl('orchestrator')}?runId=${runId}`, { headers: { Authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { run: { status: string; finishedAt: string | null } };
    if (body.run.finishedAt) return body;
  }
  throw new Error('run did not finish');
}

describe('orchestrator and worker under Deno', () => {
  it('connects a portal, fetches it, exports it, and notifies the owner', async () => {
    sys.sim.addPortal({ portalId: 777001, token: 'pat-e2e-a' });
    const userId = await createUser(db.sql);
    const connected = await invokeAs(userId, { action: 'connect_portal', name: 'Acme', accessToken: 'pat-e2e-a' });
    expect(connected.status).toBe(201);
    expect(JSON.stringify(connected.body)).not.toContain('pat-e2e-a');
    const portalId = connected.body.portalId as string;

    const created = await invokeAs(userId, { portalId });
    expect(created.status).toBe(201);
    expect(created.body.createdTypes).toHaveLength(8);
    const done = await untilRunFinished(userId, created.body.runId);
    expect(done.run.status).toBe('completed');
    const [{ n }] = (await db.sql`select count(*)::int as n from public.hubspot_content where portal_id = ${portalId}`) as unknown as [{ n: number }];
    const expected = (['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects'] as const)
      .reduce((sum, t) => sum + sys.sim.items(777001, t).length, 0);
    expect(n).toBe(expected);

    const exported = await invokeAs(userId, { portalId, kind: 'export', contentTypes: ['site_pages', 'blog_posts'] });
    expect(exported.status).toBe(201);
    const exportDone = await untilRunFinished(userId, exported.body.runId);
    expect(exportDone.run.status).toBe('completed');
    const [job] = await db.sql`select result from public.jobs where run_id = ${exported.body.runId} and content_type = 'site_pages'`;
    const csv = await readFile(localExportPath(sys.exportDir, (job!.result as { location: string }).location), 'utf8');
    expect(csv.startsWith('hubspot_id,hubspot_updated_at,name,')).toBe(true);
    expect((job!.result as { rows: number }).rows).toBe(sys.sim.items(777001, 'site_pages').length);

    const notes = await db.sql`select kind from public.notifications where user_id = ${userId} order by id`;
    expect(notes.map((r) => r.kind)).toEqual(['run_completed', 'run_completed']);
  });

  it('50 concurrent identical POSTs create one set of jobs; the rest get 409', async () => {
    sys.sim.addPortal({ portalId: 777002, token: 'pat-e2e-b' });
    const userId = await createUser(db.sql);
    const { body } = await invokeAs(userId, { action: 'connect_portal', name: 'Busy', accessToken: 'pat-e2e-b' });
    const results = await Promise.all(Array.from({ length: 50 }, () => invokeAs(userId, { portalId: body.portalId })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
    expect(results.filter((r) => r.status === 409).every((r) => r.body.code === 'ALL_DUPLICATE_JOBS')).toBe(true);
    const createdTypes = results.filter((r) => r.status === 201).flatMap((r) => r.body.createdTypes as string[]);
    expect(new Set(createdTypes).size).toBe(8);
    // Concurrent identical POSTs share one set of limit=1 counts (not a set each): what one lone
    // POST costs on a portal of the same sizes (HubDB rows are counted per table), per run created.
    sys.sim.addPortal({ portalId: 777009, token: 'pat-e2e-lone' });
    const { body: lone } = await invokeAs(userId, { action: 'connect_portal', name: 'Lone', accessToken: 'pat-e2e-lone' });
    expect((await invokeAs(userId, { portalId: lone.portalId })).status).toBe(201);
    const countsOf = (token: string) => sys.sim.requestLog().filter((e) => e.limit === '1' && e.tokenHash === tokenHash(token)).length;
    const oneSet = countsOf('pat-e2e-lone');
    expect(oneSet).toBeGreaterThan(0);
    expect(countsOf('pat-e2e-b')).toBeLessThanOrEqual(oneSet * results.filter((r) => r.status === 201).length);
    // The orchestrator wakes the worker at once, so a small type may finish during
    // the burst (a later POST then joins its run while the run goes on; once it has
    // finished, a POST rightly fetches again). What must hold: the jobs of one type
    // never overlap in time (one active job per type at most).
    const jobs = await db.sql`select content_type, created_at, finished_at from public.jobs
      where portal_id = ${body.portalId} order by content_type, created_at, id`;
    expect(jobs.length).toBe(createdTypes.length);
    for (let i = 1; i < jobs.length; i++) {
      if (jobs[i]!.content_type !== jobs[i - 1]!.content_type) continue;
      expect(jobs[i - 1]!.finished_at, `${jobs[i]!.content_type} overlaps`).not.toBeNull();
      // created_at is its transaction's start, which may precede the moment the
      // insert got past the unique index (it waits for the finishing job): allow 1 s.
      expect(jobs[i]!.created_at.getTime()).toBeGreaterThanOrEqual(jobs[i - 1]!.finished_at.getTime() - 1000);
    }
  });

  it("user B can neither read nor stop user A's run (404, nothing changes)", async () => {
    sys.sim.addPortal({ portalId: 777003, token: 'pat-e2e-c' });
    const a = await createUser(db.sql);
    const b = await createUser(db.sql);
    const { body } = await invokeAs(a, { action: 'connect_portal', name: 'A', accessToken: 'pat-e2e-c' });
    const run = await invokeAs(a, { portalId: body.portalId, contentTypes: ['blog_tags'] });
    expect(run.status).toBe(201);
    const stop = await invokeAs(b, { action: 'stop', runId: run.body.runId });
    expect(stop.status).toBe(404);
    expect(stop.body.code).toBe('RUN_NOT_FOUND');
    const tokenB = await sys.keys.signUserToken(b);
    const read = await fetch(`${sys.functions.functionUrl('orchestrator')}?runId=${run.body.runId}`, { headers: { Authorization: `Bearer ${tokenB}` } });
    expect(read.status).toBe(404);
    const other = await invokeAs(b, { portalId: body.portalId });
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('PORTAL_NOT_FOUND');
    // The run goes on (the woken worker may even finish it), but it was not stopped.
    const [after] = await db.sql`select status from public.runs where id = ${run.body.runId}`;
    expect(after!.status).not.toBe('stopped');
    expect(await db.sql`select id from public.jobs where run_id = ${run.body.runId} and status = 'stopped'`).toHaveLength(0);
  });
});
