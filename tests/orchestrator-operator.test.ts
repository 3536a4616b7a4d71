// The operator endpoints and actions over HTTP (the handler called directly,
// real Postgres and the simulator): only operators get them (403 otherwise,
// nothing changed), jobs filtered with their portal and run, retry and stop a
// job, pause and resume a portal, request history; and the owner's requests
// chart endpoint, and POST /orchestrator with fetchMode.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { claimJobs, failJob } from '../shared/sql/jobs.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { orchestratorHarness, writeCounts, type OrchestratorHarness } from './support/orchestrator-harness.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let h: OrchestratorHarness;
let owner: string;
let ownerToken: string;
let operatorToken: string;
let portalId: string;

beforeAll(async () => {
  await db.sql`update private.job_kinds set portal_cap_max = null where kind = 'fetch'`;
  sim = await startHubSpotSimulator();
  sim.addPortal({ portalId: 5300, token: 'pat-operator-ok' });
  h = await orchestratorHarness(db.sql, sim.url);
  owner = await createUser(db.sql);
  const operator = await createUser(db.sql);
  await db.sql`update auth.users set raw_app_meta_data = '{"queue_operator": true}' where id = ${operator}`;
  ownerToken = await h.keys.signUserToken(owner);
  operatorToken = await h.keys.signUserToken(operator);
  portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: owner, hubspotPortalId: 5300, name: 'Ops portal', accessToken: 'pat-operator-ok' });
});
afterAll(async () => {
  await sim?.close();
});

async function call(token: string, method: string, opts: { body?: unknown; query?: string } = {}) {
  const res = await h.handler(h.request(method, { token, ...opts }));
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('operator endpoints', () => {
  it('are refused to a non-operator with 403 NOT_AN_OPERATOR, changing nothing', async () => {
    const before = await writeCounts(db.sql);
    for (const [method, opts] of [
      ['GET', { query: '/operator/jobs' }], ['GET', { query: '/operator/portals' }], ['GET', { query: `/operator/requests?portalId=${portalId}` }],
      ['POST', { body: { action: 'pause_portal', portalId } }], ['POST', { body: { action: 'retry_job', jobId: '1' } }],
      ['POST', { body: { action: 'stop_job', jobId: '1' } }], ['POST', { body: { action: 'resume_portal', portalId } }],
    ] as const) {
      const r = await call(ownerToken, method, opts);
      expect(r, JSON.stringify(r.body)).toMatchObject({ status: 403, body: { code: 'NOT_AN_OPERATOR' } });
    }
    expect(await writeCounts(db.sql)).toEqual(before);
    const [paused] = await db.sql`select count(*)::int as n from private.portal_pauses`;
    expect(paused!.n).toBe(0);
  });

  it('a fetch fails; the operator finds it by status and portal, retries it, and the run settles again', async () => {
    const created = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['blog_posts'] } });
    expect(created.status).toBe(201);
    const runId = created.body.runId as string;
    const [job] = await claimJobs(db.sql, 'w', 1);
    await db.sql`update public.jobs set attempts = max_attempts where id = ${job!.id}`;
    expect(await failJob(db.sql, job!, 'HubSpot kept failing', false)).toBe('failed');

    const listed = await call(operatorToken, 'GET', { query: `/operator/jobs?status=failed&portalId=${portalId}&kind=fetch` });
    expect(listed.status).toBe(200);
    const jobs = listed.body.jobs as Record<string, unknown>[];
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ id: job!.id, runId, portalId, portalName: 'Ops portal', hubspotPortalId: 5300, status: 'failed', lastError: 'HubSpot kept failing', trigger: 'user', fetchMode: 'full' });
    expect((await call(operatorToken, 'GET', { query: '/operator/jobs?status=bogus' })).body.code).toBe('INVALID_QUERY');

    const retried = await call(operatorToken, 'POST', { body: { action: 'retry_job', jobId: job!.id } });
    expect(retried).toMatchObject({ status: 200, body: { jobId: job!.id, outcome: 'retried' } });
    // The id as a Realtime row carries it (a number) is taken too.
    const again = await call(operatorToken, 'POST', { body: { action: 'retry_job', jobId: Number(job!.id) } });
    expect(again).toMatchObject({ status: 409, body: { code: 'JOB_NOT_FAILED' } });
    expect((await call(operatorToken, 'POST', { body: { action: 'retry_job', jobId: 2 ** 53 } })).body.code).toBe('INVALID_BODY');
    expect((await call(operatorToken, 'POST', { body: { action: 'retry_job', jobId: 1.5 } })).body.code).toBe('INVALID_BODY');
    const run = await call(ownerToken, 'GET', { query: `?runId=${runId}` });
    expect((run.body.run as Record<string, unknown>).finishedAt).toBeNull();

    const stopped = await call(operatorToken, 'POST', { body: { action: 'stop_job', jobId: job!.id } });
    expect(stopped).toMatchObject({ status: 200, body: { jobId: job!.id, outcome: 'stopped' } });
    expect((await call(operatorToken, 'POST', { body: { action: 'stop_job', jobId: Number(job!.id) } })).body).toEqual({ jobId: job!.id, outcome: 'already_ended' });
    expect((await call(operatorToken, 'POST', { body: { action: 'stop_job', jobId: '999999999' } })).body.code).toBe('JOB_NOT_FOUND');
  });

  it('pages jobs at the documented maximum (limit=200) and refuses 201 with 400', async () => {
    const page = await call(operatorToken, 'GET', { query: '/operator/jobs?limit=200' });
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(Array.isArray(page.body.jobs)).toBe(true);
    expect((await call(operatorToken, 'GET', { query: '/operator/jobs?limit=201' })).body.code).toBe('INVALID_QUERY');
  });

  it('pauses and resumes a portal; a paused portal is listed paused and its new run waits, saying why', async () => {
    const paused = await call(operatorToken, 'POST', { body: { action: 'pause_portal', portalId, reason: 'maintenance' } });
    expect(paused).toMatchObject({ status: 200, body: { portalId, paused: true, changed: true } });
    expect((await call(operatorToken, 'POST', { body: { action: 'pause_portal', portalId } })).body.changed).toBe(false);
    const portals = (await call(operatorToken, 'GET', { query: '/operator/portals' })).body.portals as Record<string, unknown>[];
    expect(portals.find((p) => p.portalId === portalId)).toMatchObject({ pauseReason: 'maintenance', name: 'Ops portal' });

    const created = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['blog_tags'] } });
    expect(created.status).toBe(201);
    expect(await claimJobs(db.sql, 'w', 5)).toEqual([]);
    const run = await call(ownerToken, 'GET', { query: `?runId=${created.body.runId}` });
    const [j] = run.body.jobs as Record<string, unknown>[];
    expect(j).toMatchObject({ status: 'pending', waitingReason: 'maintenance', waitingReasonCode: 'portal_paused', waitingUntil: null });

    expect((await call(operatorToken, 'POST', { body: { action: 'resume_portal', portalId } })).body).toMatchObject({ paused: false, changed: true });
    const claimed = await claimJobs(db.sql, 'w', 5);
    expect(claimed.map((c) => c.contentType)).toEqual(['blog_tags']);
    await db.sql`select public.stop_run(${created.body.runId as string})`;
  });

  it('the requests chart reads the budget\'s 10-s counts: owners for their portal, operators for any', async () => {
    const since = new Date(Date.now() - 60_000).toISOString();
    const before = (await call(ownerToken, 'GET', { query: `/requests?portalId=${portalId}&since=${since}` })).body;
    const sent = sim.stats().requests;
    // The run's totals (limit=1 counts) are real HubSpot requests: counted.
    const created = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['site_pages', 'url_redirects'] } });
    expect(created.status).toBe(201);
    const byHubSpot = sim.stats().requests - sent;
    const after = (await call(ownerToken, 'GET', { query: `/requests?portalId=${portalId}&since=${since}` })).body;
    const sum = (b: Record<string, unknown>) => (b.windows as { requests: number }[]).reduce((n, w) => n + w.requests, 0);
    expect(sum(after) - sum(before)).toBe(byHubSpot);
    expect(after).toMatchObject({ portalId, hubspotPortalId: 5300 });
    expect(typeof after.limitPer10s).toBe('number');
    const ops = await call(operatorToken, 'GET', { query: `/operator/requests?portalId=${portalId}&since=${since}` });
    expect(sum(ops.body)).toBe(sum(after));
    const stranger = await h.keys.signUserToken(await createUser(db.sql));
    expect((await call(stranger, 'GET', { query: `/requests?portalId=${portalId}` })).body.code).toBe('PORTAL_NOT_FOUND');
    await db.sql`select public.stop_run(${created.body.runId as string})`;
  });
});

describe('the requests chart of a HubSpot account two users connected', () => {
  it("starts at the viewer's own connection: the other user's earlier requests are not shown", async () => {
    const first = await createUser(db.sql);
    const firstPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: first, hubspotPortalId: 5300, name: 'First', accessToken: 'pat-operator-ok' });
    await db.sql`update public.portals set created_at = now() - interval '15 minutes' where id = ${firstPortal}`;
    // The first user's request, ten minutes ago (back-dated in the budget's own counts).
    await db.sql`insert into private.hubspot_request_counts (hubspot_portal_id, window_start, requests)
                 values (5300, date_bin('10 seconds', now() - interval '10 minutes', 'epoch'), 7)
                 on conflict (hubspot_portal_id, window_start) do update set requests = excluded.requests`;
    const later = await createUser(db.sql);
    const laterPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: later, hubspotPortalId: 5300, name: 'Later', accessToken: 'pat-operator-ok' });
    await db.sql`update public.portals set created_at = now() - interval '5 minutes' where id = ${laterPortal}`;
    const since = new Date(Date.now() - 20 * 60_000).toISOString();
    const sum = (b: Record<string, unknown>) => (b.windows as { requests: number }[]).reduce((n, w) => n + w.requests, 0);
    const seenByFirst = (await call(await h.keys.signUserToken(first), 'GET', { query: `/requests?portalId=${firstPortal}&since=${since}` })).body;
    const seenByLater = (await call(await h.keys.signUserToken(later), 'GET', { query: `/requests?portalId=${laterPortal}&since=${since}` })).body;
    expect(sum(seenByFirst)).toBeGreaterThanOrEqual(7);
    expect(sum(seenByLater)).toBe(sum(seenByFirst) - 7);
  });
});

describe('POST /orchestrator fetchMode', () => {
  it('an incremental fetch joins a sync in flight like any duplicate; Run carries trigger and fetchMode', async () => {
    const full = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['hubdb_tables'] } });
    expect(full.status).toBe(201);
    const changes = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['hubdb_tables'], fetchMode: 'incremental' } });
    expect(changes).toMatchObject({ status: 409, body: { code: 'ALL_DUPLICATE_JOBS' } });
    const run = (await call(ownerToken, 'GET', { query: `?runId=${full.body.runId}` })).body.run as Record<string, unknown>;
    expect(run).toMatchObject({ trigger: 'user', fetchMode: 'full' });
    await db.sql`select public.stop_run(${full.body.runId as string})`;
    const inc = await call(ownerToken, 'POST', { body: { portalId, contentTypes: ['hubdb_tables'], fetchMode: 'incremental' } });
    expect(inc.status).toBe(201);
    const listed = (await call(ownerToken, 'GET', { query: `/runs?portalId=${portalId}&limit=1` })).body.runs as Record<string, unknown>[];
    expect(listed[0]).toMatchObject({ id: inc.body.runId, fetchMode: 'incremental', trigger: 'user' });
    const bad = await call(ownerToken, 'POST', { body: { portalId, kind: 'export', fetchMode: 'incremental' } });
    expect(bad).toMatchObject({ status: 400, body: { code: 'INVALID_BODY' } });
    await db.sql`select public.stop_run(${inc.body.runId as string})`;
  });
});
