// A whole fetch then export of a small portal through the worker invocation.
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { createRun } from '../shared/sql/runs.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { exportHeader } from '../functions/worker/export-columns.ts';
import { parseCsv } from '../scripts/chaos/checks.ts';
import { localExportPath } from '../shared/export-location.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;

beforeAll(async () => {
  sim = await startHubSpotSimulator();
});
afterAll(async () => {
  await sim?.close();
});

describe('fetch and export through the worker', () => {
  it('fetches every item of all eight types exactly once, then exports them', async () => {
    const token = 'pat-smoke-token';
    sim.addPortal({ portalId: 4242, token });
    const userId = await createUser(db.sql);
    const portalId = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: userId, hubspotPortalId: 4242, name: 'Smoke', accessToken: token });
    const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: CONTENT_TYPES });
    const rt = await testWorkerRuntime(db.sql, sim.url);
    const summary = await runWorkerInvocation(rt, 'smoke-worker');
    expect(summary.completed).toBe(8);
    for (const type of CONTENT_TYPES) {
      const expected = sim.items(4242, type).map((i) => i.id).sort();
      const rows = await db.sql`select hubspot_id from public.hubspot_content where portal_id = ${portalId} and content_type = ${type} and deleted_at is null`;
      const got = rows.map((r) => (type === 'hubdb_rows' ? String(r.hubspot_id).split(':')[1] : r.hubspot_id)).sort();
      expect(got.length, type).toBe(expected.length);
      expect(new Set(got).size, type).toBe(expected.length);
    }
    const [r] = await db.sql`select status from public.runs where id = ${run.runId}`;
    expect(r!.status).toBe('completed');

    const exp = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['blog_posts'] });
    const s2 = await runWorkerInvocation(rt, 'smoke-worker-2');
    expect(s2.completed).toBe(1);
    const [job] = await db.sql`select result from public.jobs where run_id = ${exp.runId}`;
    const records = parseCsv(await readFile(localExportPath(rt.exportDir, (job!.result as { location: string }).location), 'utf8'));
    const header = records[0]!;
    expect(header).toEqual(exportHeader('blog_posts'));
    expect(records.length - 1).toBe(sim.items(4242, 'blog_posts').length);
    // Every cell sits under its column: compare one row with the stored item.
    const row = records[1]!;
    const [stored] = await db.sql`select data from public.hubspot_content where portal_id = ${portalId} and content_type = 'blog_posts' and hubspot_id = ${row[0]!}`;
    const data = stored!.data as Record<string, unknown>;
    expect(row[header.indexOf('slug')]).toBe(String(data.slug ?? ''));
    expect(row[header.indexOf('name')]!.replace(/^'/, '')).toBe(String(data.name ?? ''));
  });
});
