// The worker handler: only the worker secret (or service key) runs it; a run
// returns its summary; an unknown job kind fails permanently.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHandler } from '../functions/worker/handler.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
beforeAll(async () => {
  sim = await startHubSpotSimulator();
});
afterAll(async () => {
  await sim?.close();
});

const SECRET = 'worker-secret-for-tests-0123456789';
const post = (headers: Record<string, string> = {}) => new Request('http://127.0.0.1/functions/v1/worker', { method: 'POST', headers, body: '{}' });

describe('worker handler', () => {
  it('401 for a missing or wrong secret, and nothing is claimed; 405 for GET', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['blog_tags'] });
    const handler = createWorkerHandler({ ...(await testWorkerRuntime(db.sql, sim.url)), acceptedSecrets: [SECRET, 'service-role-key-0123456789'] });
    const attempts: Record<string, string>[] = [{}, { Authorization: 'Bearer wrong' }, { Authorization: `Bearer ${SECRET}x` }, { apikey: 'nope' }, { Authorization: SECRET }];
    for (const headers of attempts) {
      const res = await handler(post(headers));
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('UNAUTHENTICATED');
    }
    expect((await handler(new Request('http://127.0.0.1/', { method: 'GET' }))).status).toBe(405);
    const [row] = await db.sql`select count(*)::int as n from public.jobs where status <> 'pending'`;
    expect(row!.n).toBe(0);

    const ok = await handler(post({ Authorization: 'Bearer service-role-key-0123456789' }));
    expect(ok.status).toBe(200);
    const summary = (await ok.json()) as Record<string, number>;
    expect(summary).toMatchObject({ claimed: 1, completed: 1, failed: 0 });
    expect(typeof summary.durationMs).toBe('number');
  });

  it('fails a job of a kind without a handler permanently, with a clear error', async () => {
    await db.sql`insert into private.job_kinds (kind, lease_seconds, default_max_attempts, backoff_base_seconds, backoff_max_seconds)
                 values ('reindex', 60, 3, 1, 10) on conflict do nothing`;
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'reindex' as never, contentTypes: ['blog_tags'] });
    const handler = createWorkerHandler({ ...(await testWorkerRuntime(db.sql, sim.url)), acceptedSecrets: [SECRET] });
    const res = await handler(post({ Authorization: `Bearer ${SECRET}` }));
    expect(((await res.json()) as { failed: number }).failed).toBe(1);
    const [job] = await db.sql`select status, attempts, last_error from public.jobs where run_id = ${run.runId}`;
    expect(job!.status).toBe('failed');
    expect(job!.attempts).toBe(1);
    expect(job!.last_error).toMatch(/No handler for job kind "reindex"/);
  });
});
