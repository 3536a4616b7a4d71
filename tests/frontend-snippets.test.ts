// Runs the supabase-js snippets of the "Build a frontend" guide (docs/frontend.md,
// its one copy), in order, in one scope, against the local system (Postgres, the
// HubSpot simulator, both functions under Deno behind the local gateway), then
// checks what they got.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createClient, FunctionsHttpError } from '@supabase/supabase-js';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { runDetailResponse } from '../functions/orchestrator/schemas.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { parseCsv } from '../shared/csv-parse.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
let sys: LocalSystem;
let jwt: string;
const HUBSPOT_TOKEN = 'pat-snippets-demo';
/** The user the guide signs in as (through the local Auth behind the gateway). */
const EMAIL = 'snippets@example.test';
const PASSWORD = 'snippets-password';

/** The file that holds the guide. */
const GUIDE = 'docs/frontend.md';

/** The ```js blocks of a markdown text. */
function jsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** Runs the blocks as one async function body; imports of supabase-js become parameters. */
async function runSnippets(blocks: string[], vars: Record<string, unknown>): Promise<Record<string, any>> {
  const body = blocks.join('\n').replace(/^import \{[^}]+\} from '@supabase\/supabase-js'\n/gm, '');
  expect(body).not.toMatch(/^import /m);
  const names = [...body.matchAll(/^const (?:\{ data: )?(\{[^}]*\}|\w+)/gm)].flatMap((m) => m[1]!.replace(/[{}\s]/g, '').split(',')).filter(Boolean);
  const returned = `\nreturn { ${[...new Set([...names, 'exported'])].join(', ')} }`;
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...args: string[]) => (...a: unknown[]) => Promise<Record<string, any>>;
  const fn = new AsyncFunction(...Object.keys(vars), body + returned);
  return fn(...Object.values(vars));
}

beforeAll(async () => {
  sys = await startLocalSystem(db.url, { env: { WORKER_LANES: '1' }, realtime: { dbUrl: db.directUrl } });
  sys.sim.addPortal({ portalId: 31_000_001, token: HUBSPOT_TOKEN, sizes: { site_pages: 30, blog_posts: 20, hubdb_rows: 10 } });
  const userId = await sys.auth.createUser({ email: EMAIL, password: PASSWORD });
  jwt = await sys.keys.signUserToken(userId);
}, 120_000);
afterAll(async () => {
  await sys?.stop();
});

describe('"Build a frontend" snippets', () => {
  it(`${GUIDE}: every block runs, in order, and gets what the text says`, async () => {
    const guide = await readFile(path.join(PROJECT_ROOT, GUIDE), 'utf8');
    const blocks = jsBlocks(guide);
    expect(blocks.length).toBeGreaterThanOrEqual(7);
    const logs: string[] = [];
    const console_ = { log: (...a: unknown[]) => logs.push(a.map(String).join(' ')) };
    // HubSpot answers slowly, so the first run is still in flight when the snippets trigger again and stop it.
    sys.sim.setFaults({ slowMs: 1000 });
    // Node 20 has no global WebSocket (see the guide); a browser or Node 22 has one.
    const hadWebSocket = 'WebSocket' in globalThis;
    if (!hadWebSocket) (globalThis as Record<string, unknown>).WebSocket = WebSocket;
    let got: Record<string, any>;
    try {
      got = await runSnippets(blocks, {
        createClient, FunctionsHttpError, console: console_,
        SUPABASE_URL: sys.functions.url, SUPABASE_ANON_KEY: sys.keys.anonKey, EMAIL, PASSWORD, HUBSPOT_TOKEN,
      });
    } finally {
      sys.sim.clearFaults();
      if (!hadWebSocket) delete (globalThis as Record<string, unknown>).WebSocket;
    }
    expect(got.connected).toMatchObject({ hubspotPortalId: 31_000_001, name: 'My portal' });
    expect(got.portals).toHaveLength(1);
    expect(got.run.createdTypes).toHaveLength(8);
    expect(Object.values(got.again.duplicateRunIds)).toEqual(Array(8).fill(got.run.runId));
    expect(got.progress.run.id).toBe(got.run.runId);
    expect(got.progress.jobs).toHaveLength(8);
    expect(got.progress.jobs.every((j: { waitingReason: unknown }) => 'waitingReason' in j)).toBe(true);
    expect(typeof got.working).toBe('boolean');
    expect(got.waitingFor === null || typeof got.waitingFor === 'string').toBe(true);
    expect(got.page1.runs.map((r: { id: string }) => r.id)).toContain(got.run.runId);
    expect(got.page2).toBeNull();
    expect(got.stopped).toEqual({ runId: got.run.runId, stopped: true, status: 'stopped' });
    expect(got.exported.run.status).toBe('completed');
    expect(typeof got.csv).toBe('string'); // supabase-js reads text/csv as text
    expect(got.csv.split(/\r?\n/)[0]).toMatch(/^hubspot_id,hubspot_updated_at,/);
    // The plain link needs no token and gives the same file; the name comes from Content-Disposition.
    expect(got.viaLink).toBe(got.csv);
    expect(got.file.result.location).toMatch(/^exports\//);
    expect(got.file.result.location).not.toContain(sys.exportDir);
    expect(got.file.result.fromFetch).toMatchObject({ runId: got.run.runId, status: expect.stringMatching(/^(completed|stopped)$/) });
    expect(got.filename).toBe(`${got.file.contentType}-${got.exp.runId.slice(0, 8)}.csv`);
    expect(got.latest.exports.map((e: { jobId: string }) => e.jobId)).toContain(got.file.id);
    // The stored counts are the database's live items, per type.
    const live = await db.sql<{ content_type: string; n: number }[]>`select content_type, count(*)::int as n from public.hubspot_content
      where portal_id = ${got.portalId} and deleted_at is null group by content_type`;
    const liveOf = (t: string) => live.find((r) => r.content_type === t)?.n ?? 0;
    expect(got.stored.types).toEqual(CONTENT_TYPES.map((t) => ({ contentType: t, items: liveOf(t) })));
    // Publish: the uploaded edit planned, read, approved and written to HubSpot (the copy holds HubSpot's answer).
    expect(got.uploaded).toMatchObject({ contentType: 'site_pages', rows: 1, edits: 1, plan: { items: 1 } });
    expect(got.plan).toMatchObject({ id: got.uploaded.plan.planId, status: 'ready', approvable: true, counts: { total: 1, ready: 1 } });
    expect(got.items.map((i: { hubspotId: string; planStatus: string; after: unknown }) => [i.hubspotId, i.planStatus, i.after]))
      .toEqual([[got.page.hubspotId, 'ready', { name: got.renamed }]]);
    expect(got.published.run).toMatchObject({ id: got.approved.publishRunId, kind: 'publish', status: 'completed' });
    expect(runDetailResponse.safeParse(got.published).error?.issues ?? []).toEqual([]); // the worker's job results as openapi.json says
    const audit = parseCsv(got.audit);
    if (!audit.ok) throw new Error(JSON.stringify(audit.errors));
    const auditCell = (name: string) => audit.csv.rows[0]![audit.csv.header.indexOf(name)];
    expect([audit.csv.rows.length, auditCell('hubspot_id'), auditCell('outcome'), auditCell('approved_by')]).toEqual([1, got.page.hubspotId, 'applied', got.plan.createdBy]);
    const [copy] = await db.sql`select data->>'name' as name from public.hubspot_content
      where portal_id = ${got.portalId} and content_type = 'site_pages' and hubspot_id = ${got.page.hubspotId}`;
    expect(copy!.name).toBe(got.renamed);
    // The schedule, set and read back, then deleted; the change feed read to its end holds every item stored.
    expect(got.schedule).toMatchObject({ incrementalEveryMinutes: 15, fullEveryMinutes: 1440, paused: false });
    expect(got.syncStatus).toMatchObject({ portalId: got.portalId, schedule: { incrementalEveryMinutes: 15 }, nextSyncAt: expect.any(String) });
    expect((await db.sql`select count(*)::int as n from public.sync_schedules where portal_id = ${got.portalId}`)[0]!.n).toBe(0);
    const storedRows = await db.sql<{ hubspot_id: string; content_type: string }[]>`select hubspot_id, content_type from public.hubspot_content
      where portal_id = ${got.portalId}`;
    expect(got.changes.map((c: { contentType: string; hubspotId: string }) => `${c.contentType}/${c.hubspotId}`).sort())
      .toEqual(storedRows.map((r) => `${r.content_type}/${r.hubspot_id}`).sort());
    expect(got.changes.every((c: { change: string }) => c.change === 'inserted')).toBe(true); // read from the beginning: every item is new to it
    expect(got.disconnected).toMatchObject({ portalId: got.portalId, disconnectedReason: 'disconnected by its owner', failedFetchJobs: 0 });
    // Realtime (the gateway's stand-in): the channel went live before the stop, which it then reported.
    expect(got.live).toBe(true);
    expect(logs.filter((l) => l.startsWith('realtime unavailable'))).toEqual([]);
    await expect.poll(() => logs.some((l) => l.startsWith('run stopped ')), { timeout: 20_000, interval: 100 }).toBe(true);
    expect(logs.some((l) => /^job \w+ stopped \d+ \/ /.test(l))).toBe(true);
    await got.supabase.removeAllChannels();
    await got.supabase.auth.stopAutoRefresh();
  }, 120_000);

  it('on Node 20, createClient works when given ws as the realtime transport (and throws without one)', () => {
    const client = createClient(sys.functions.url, 'local-anon-key', { realtime: { transport: WebSocket as never }, accessToken: async () => jwt });
    expect(client.functions).toBeDefined();
    if (!('WebSocket' in globalThis)) expect(() => createClient(sys.functions.url, 'local-anon-key')).toThrow(/WebSocket/);
  });
});
