// The content-type registry is the only list of content types: a ninth type
// added the documented way — one migration row (applied by the Supabase CLI to
// a throwaway database), one record in shared/content-types.ts and its list
// path in shared/hubspot/api-paths.ts (in a copy of the code) — works end to
// end: SQL alone (create_run, claim, save a page, complete, export run), then
// the copied worker fetching the new type from a HubSpot stand-in and
// exporting it with the record's columns. The copy still typechecks, so no
// other file had to change. The real database refuses the type.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cp, copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cloneDatabase, dropDatabase, PROJECT_ROOT } from '../local/postgres.ts';
import { TEST_TOKEN_KEYS } from '../local/test-token-keys.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { completeFetchJob } from '../shared/sql/fetch.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { saveFetchedPage } from '../scripts/lib/queue-test-helpers.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { pgError } from './support/queue-fixtures.ts';

const run = promisify(execFile);
const db = useTestDatabase();
const NEW_TYPE = 'cms_domains';
// The documented way to add a content type: one row in a new migration...
const MIGRATION = `insert into private.content_types (content_type) values ('${NEW_TYPE}');\n`;
// ...one record in the TypeScript registry...
const RECORD = `  ${NEW_TYPE}: { pageSize: 100, scope: 'content', exportColumns: ['domain', 'isResolving', 'created', 'updated'] },\n`;
const REGISTRY_END = '} as const satisfies Readonly<Record<string, ContentTypeRecord>>;';
// ...and its list path in the table of HubSpot paths: HubSpot's CMS domains list, a new area at 2026-03.
const AREA = `  domains: { version: '2026-03', cms: true, api: 'domains' },\n`;
const AREAS_START = 'export const API_AREAS = {\n';
const LIST = `  ${NEW_TYPE}: { area: 'domains', path: '' },\n`;
const LISTS_START = 'const LISTS: Readonly<Record<ListedContentType, { area: ApiArea; path: string }>> = {\n';
const DOMAINS_PATH = '/cms/domains/2026-03';

let workdir: string;
let throwaway: { name: string; url: string; sql: Sql };

/** A Supabase project directory with this project's migrations plus the new one. */
async function projectWithNewType(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'content-registry-'));
  await mkdir(path.join(dir, 'supabase/migrations'), { recursive: true });
  await copyFile(path.join(PROJECT_ROOT, 'supabase/config.toml'), path.join(dir, 'supabase/config.toml'));
  for (const f of await readdir(path.join(PROJECT_ROOT, 'supabase/migrations'))) {
    if (f.endsWith('.sql')) await copyFile(path.join(PROJECT_ROOT, 'supabase/migrations', f), path.join(dir, 'supabase/migrations', f));
  }
  await writeFile(path.join(dir, 'supabase/migrations/20991231000000_content_type_cms_domains.sql'), MIGRATION);
  return dir;
}

/**
 * A copy of the product code (shared/, functions/ and the stop reasons' list they type from) with the ninth record and its path added, inside the project
 * so bare imports resolve to its node_modules, and a way to run its worker against the throwaway database.
 */
async function codeWithNewRecord(): Promise<{ dir: string; exportDir: string; runWorker(hubspotUrl: string): Promise<void> }> {
  const dir = path.join(PROJECT_ROOT, 'test-artifacts', `registry-${process.pid}-${randomUUID().slice(0, 8)}`);
  cleanup.push(dir);
  for (const d of ['shared', 'functions']) await cp(path.join(PROJECT_ROOT, d), path.join(dir, d), { recursive: true });
  await mkdir(path.join(dir, 'web'));
  await copyFile(path.join(PROJECT_ROOT, 'web/stop-reasons.js'), path.join(dir, 'web/stop-reasons.js'));
  const registry = path.join(dir, 'shared/content-types.ts');
  const text = await readFile(registry, 'utf8');
  expect(text).toContain(REGISTRY_END);
  await writeFile(registry, text.replace(REGISTRY_END, `${RECORD}${REGISTRY_END}`));
  const paths = path.join(dir, 'shared/hubspot/api-paths.ts');
  const table = await readFile(paths, 'utf8');
  expect(table).toContain(AREAS_START);
  expect(table).toContain(LISTS_START);
  await writeFile(paths, table.replace(AREAS_START, `${AREAS_START}${AREA}`).replace(LISTS_START, `${LISTS_START}${LIST}`));
  const tsconfig = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: object };
  await writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: tsconfig.compilerOptions, include: ['shared/**/*.ts', 'functions/**/*.ts'] }));
  const exportDir = path.join(dir, 'exports');
  await mkdir(exportDir);
  // Invokes the copied worker, as cron would, until an invocation finds nothing to claim.
  await writeFile(path.join(dir, 'drive-worker.ts'), `
import { workerHandlerFromEnv } from './functions/worker/from-env.ts';
const handle = workerHandlerFromEnv(process.env as Record<string, string>);
for (let i = 0; i < 20; i++) {
  const res = await handle(new Request('http://127.0.0.1/functions/v1/worker', {
    method: 'POST', headers: { authorization: 'Bearer registry-test', 'content-type': 'application/json' }, body: '{}' }));
  const summary = await res.json() as { claimed?: number };
  if (res.status !== 200) throw new Error(\`worker answered \${res.status}: \${JSON.stringify(summary)}\`);
  if (!summary.claimed) break;
}
process.exit(0);
`);
  return {
    dir,
    exportDir,
    async runWorker(hubspotUrl) {
      await run(path.join(PROJECT_ROOT, 'node_modules/.bin/tsx'), [path.join(dir, 'drive-worker.ts')], {
        cwd: dir,
        env: { ...process.env, SUPABASE_DB_URL: throwaway.url, HUBSPOT_BASE_URL: hubspotUrl, HUBSPOT_TOKEN_KEYS: TEST_TOKEN_KEYS, WORKER_SECRET: 'registry-test', EXPORT_DIR: exportDir },
      });
    },
  };
}

/** HubSpot's CMS domains list over loopback HTTP (HubSpot's list shape and forward paging), recording each `limit` asked for. */
async function domainsStandIn(count: number): Promise<{ url: string; limits: string[]; close(): Promise<void> }> {
  const limits: string[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== DOMAINS_PATH) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'error', message: 'not found', category: 'OBJECT_NOT_FOUND' }));
      return;
    }
    const limit = Math.min(100, Number(url.searchParams.get('limit') ?? 20));
    limits.push(String(limit));
    const start = Number(url.searchParams.get('after') ?? 0);
    const results = Array.from({ length: Math.max(0, Math.min(limit, count - start)) }, (_, k) => {
      const i = start + k;
      return { id: String(9_000_000 + i), domain: `d${String(i).padStart(3, '0')}.example.com`, isResolving: i % 2 === 0, created: '2024-01-01T00:00:00Z', updated: '2025-01-01T00:00:00Z' };
    });
    const next = start + limit < count ? { paging: { next: { after: String(start + limit), link: '' } } } : {};
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ total: count, results, ...next }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    limits,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const cleanup: string[] = [];

beforeAll(async () => {
  workdir = await projectWithNewType();
  const name = `queue_registry_${process.pid}_${randomUUID().slice(0, 8)}`;
  const url = await cloneDatabase(inject('pgAdminUrl'), inject('pgTemplate'), name);
  const u = new URL(url);
  u.searchParams.set('sslmode', 'disable');
  // The template already has every project migration recorded: the CLI applies only the new one.
  const { stdout, stderr } = await run(path.join(PROJECT_ROOT, 'node_modules/.bin/supabase'),
    ['migration', 'up', '--db-url', u.toString(), '--workdir', workdir],
    { env: { ...process.env, SUPABASE_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' }, maxBuffer: 16 * 1024 * 1024 });
  expect(`${stdout}${stderr}`).toMatch(/20991231000000/);
  throwaway = { name, url, sql: connectDatabase(url, { max: 4 }) };
});

afterAll(async () => {
  await throwaway?.sql.end({ timeout: 5 });
  if (throwaway) await dropDatabase(inject('pgAdminUrl'), throwaway.name);
  if (workdir) await rm(workdir, { recursive: true, force: true });
  for (const dir of cleanup) await rm(dir, { recursive: true, force: true });
});

describe('content-type registry', () => {
  it('a ninth type added by one migration row works end to end in SQL', async () => {
    const sql = throwaway.sql;
    const { userId, portalId } = await createUserWithPortal(sql);
    const [created] = await sql`select * from public.create_run(${portalId}, ${userId}, 'fetch', ${[NEW_TYPE]}::text[], array[2])`;
    expect(created).toMatchObject({ created_types: [NEW_TYPE], duplicate_types: [] });
    const job = (await claimNextJob(sql, 'registry-worker'))!;
    expect(job).toMatchObject({ contentType: NEW_TYPE, kind: 'fetch', attempts: 1, progressTotal: 2 });
    expect(await saveFetchedPage(sql, job, [
      { id: 'd1', updatedAt: '2026-01-01T00:00:00Z', data: { domain: 'www.example.com' } },
      { id: 'd2', updatedAt: null, data: { domain: 'blog.example.com' } },
    ], { after: null, finished: true })).toEqual({ fetched: 2, added: 2, updated: 0, unchanged: 0 });
    expect(await completeFetchJob(sql, job)).toBe(true);
    const content = await sql`select hubspot_id, content_type from public.hubspot_content where portal_id = ${portalId} order by hubspot_id`;
    expect(content.map((c) => [c.hubspot_id, c.content_type])).toEqual([['d1', NEW_TYPE], ['d2', NEW_TYPE]]);
    const [runRow] = await sql`select status, content_types from public.runs where id = ${created!.run_id as string}`;
    expect(runRow).toEqual({ status: 'completed', content_types: [NEW_TYPE] });

    // An export run of the new type counts its stored items and is claimed like any other.
    const [exp] = await sql`select * from public.create_run(${portalId}, ${userId}, 'export', ${[NEW_TYPE]}::text[])`;
    const exportJob = (await claimNextJob(sql, 'registry-worker'))!;
    expect(exportJob).toMatchObject({ runId: exp!.run_id, kind: 'export', contentType: NEW_TYPE, progressTotal: 2 });
    expect(await completeJob(sql, exportJob)).toBe(true);

    // All nine types in one run.
    const all = [...CONTENT_TYPES, NEW_TYPE];
    const other = await createUserWithPortal(sql);
    const [nine] = await sql`select * from public.create_run(${other.portalId}, ${other.userId}, 'fetch', ${all}::text[])`;
    expect([...(nine!.created_types as string[])].sort()).toEqual([...all].sort());
  });

  it('a ninth type added by one record and its list path: the copied worker fetches it from HubSpot and exports its columns', async () => {
    const code = await codeWithNewRecord();
    // Nothing else in the product had to change: the copy typechecks as it is.
    await run(path.join(PROJECT_ROOT, 'node_modules/.bin/tsc'), ['--noEmit', '-p', code.dir], { maxBuffer: 16 * 1024 * 1024 })
      .catch((e: { stdout?: string }) => { throw new Error(`the copy with a ninth record does not typecheck:\n${e.stdout}`); });

    const hubspot = await domainsStandIn(250);
    try {
      const sql = throwaway.sql;
      const { userId, portalId } = await createUserWithPortal(sql);
      const [fetch] = await sql`select * from public.create_run(${portalId}, ${userId}, 'fetch', ${[NEW_TYPE]}::text[], array[250])`;
      await code.runWorker(hubspot.url);
      const errors = await sql`select last_error from public.jobs where run_id = ${fetch!.run_id as string} and last_error is not null`;
      expect(await sql`select status, jobs_completed from public.runs where id = ${fetch!.run_id as string}`, JSON.stringify(errors)).toEqual([{ status: 'completed', jobs_completed: 1 }]);
      const [stored] = await sql`select count(*)::int as n, min(data ->> 'domain') as first from public.hubspot_content
                                  where portal_id = ${portalId} and content_type = ${NEW_TYPE} and deleted_at is null`;
      expect(stored).toEqual({ n: 250, first: 'd000.example.com' });
      // Paged at the record's page size (HubSpot's default would be 20).
      expect(hubspot.limits.length).toBeGreaterThanOrEqual(3);
      expect(new Set(hubspot.limits)).toEqual(new Set(['100']));

      const [exp] = await sql`select * from public.create_run(${portalId}, ${userId}, 'export', ${[NEW_TYPE]}::text[])`;
      await code.runWorker(hubspot.url);
      const [job] = await sql`select status, result from public.jobs where run_id = ${exp!.run_id as string}`;
      expect(job!.status).toBe('completed');
      const { location, rows } = job!.result as { location: string; rows: number };
      expect(rows).toBe(250);
      const csv = await readFile(path.isAbsolute(location) ? location : path.join(code.exportDir, location), 'utf8');
      const lines = csv.trimEnd().split('\n');
      expect(lines[0]).toBe('hubspot_id,hubspot_updated_at,domain,isResolving,created,updated');
      expect(lines).toHaveLength(251);
    } finally {
      await hubspot.close();
    }
  });

  it('the project database, without that row, refuses the type everywhere', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const err = await pgError(() => db.sql`select * from public.create_run(${portalId}, ${userId}, 'fetch', ${[NEW_TYPE]}::text[])`);
    expect(err).toMatchObject({ code: '22023' });
    expect(err.message).toMatch(/distinct known types/);
    const fk = await pgError(() => db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data)
                                           values (${portalId}, ${userId}, ${NEW_TYPE}, 'x', '{}')`);
    expect(fk.code).toBe('23503');
    const [row] = await db.sql`select array_agg(content_type order by content_type) as types from private.content_types`;
    expect(row!.types).toEqual([...CONTENT_TYPES].sort());
  });
});
