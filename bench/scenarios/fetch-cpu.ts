// Worker CPU per fetched item: runs the fetch job (functions/worker/fetch-job.ts)
// over the simulator's pages into a real, migrated database and divides this
// process's CPU time (process.cpuUsage: user + system) by the items saved. The
// simulator runs in a child process and Postgres in its own, so neither is
// counted; the Postgres server's CPU is shown beside it (Linux, local server).
//
//   npx tsx bench/scenarios/fetch-cpu.ts [--pages 100] [--types blog_posts,site_pages,hubdb_rows] [--legacy]
//   node_modules/.bin/deno run -A --config deno.json bench/scenarios/fetch-cpu.ts ...
//
// DATABASE_URL: use that server (it needs CREATEDB) instead of an embedded one.
// --legacy also measures the previous path on the same pages for comparison (the
// official client's typed list calls and models, items shaped in JS, save_fetched_page).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from '@hubspot/api-client';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { processFetchJob } from '../../functions/worker/fetch-job.ts';
import type { JobContext } from '../../functions/worker/job-context.ts';
import { isContentType, type ContentType } from '../../shared/hubspot/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { createHubSpotClient } from '../../shared/hubspot/client.ts';
import { sharedRequestBudget } from '../../shared/hubspot/request-budget.ts';
import { silentLogger } from '../../shared/log.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { claimNextJob, type ClaimedJob } from '../../shared/sql/jobs.ts';
import { createRun, stopRun } from '../../shared/sql/runs.ts';
import { saveFetchedPage } from '../../scripts/lib/queue-test-helpers.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import { freePort, PROJECT_ROOT } from '../../local/postgres.ts';
import { dropDatabase, migratedDatabase, postgresCpuMs, startBenchPostgres } from '../lib/pg.ts';

const { values } = parseArgs({
  options: {
    pages: { type: 'string', default: '100' },
    types: { type: 'string', default: 'blog_posts,site_pages,hubdb_rows' },
    legacy: { type: 'boolean', default: false },
  },
});
const maxPages = Number(values.pages);
const types = values.types.split(',').map((t) => t.trim());
for (const t of types) if (!isContentType(t)) throw new Error(`unknown content type ${t}`);

const TOKEN = 'pat-bench-fetch-cpu';
const HUBSPOT_PORTAL_ID = 123;
const log = (s: string) => console.log(s);

/** The simulator in its own process (its CPU is not ours). */
async function startSimulator(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const tsx = path.join(PROJECT_ROOT, 'node_modules/.bin/tsx');
  const child = spawn(tsx, ['hubspot-sim/cli.ts', '--port', String(port), '--size', 'realistic', '--token', TOKEN,
    '--portal-id', String(HUBSPOT_PORTAL_ID), '--max-per-10s', '1000000'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('listening on')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`simulator exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

const cpuNow = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};

interface Measured {
  items: number;
  pages: number;
  clientMs: number;
  userMs: number;
  serverMs: number | null;
  wallMs: number;
}

async function claimType(sql: Sql, portalId: string, userId: string, type: ContentType): Promise<{ runId: string; job: ClaimedJob }> {
  const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: [type] });
  const job = await claimNextJob(sql, `fetch-cpu-${type}`, ['fetch']);
  if (!job || job.runId !== run.runId) throw new Error('could not claim the fetch job');
  return { runId: run.runId!, job };
}

async function measure(pgPid: number | null, work: () => Promise<{ items: number; pages: number }>): Promise<Measured> {
  const s0 = await postgresCpuMs(pgPid);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const { items, pages } = await work();
  const c = process.cpuUsage(c0);
  const wallMs = performance.now() - t0;
  const s1 = await postgresCpuMs(pgPid);
  return { items, pages, clientMs: (c.user + c.system) / 1000, userMs: c.user / 1000, serverMs: s0 === null || s1 === null ? null : s1 - s0, wallMs };
}

/** The fetch job itself, stopped after `maxPages` pages (a released job). */
async function rawPath(sql: Sql, simUrl: string, job: ClaimedJob): Promise<{ items: number; pages: number }> {
  const timeLeft = () => 600_000;
  const ctx: JobContext = {
    sql,
    job,
    log: silentLogger,
    signal: new AbortController().signal,
    timeLeft,
    outOfBudget: () => null,
    cpuMs: cpuNow,
    hubspotForPortal: async () => createHubSpotClient({
      accessToken: TOKEN, basePath: simUrl, timeLeft,
      beforeRequest: sharedRequestBudget(sql, String(HUBSPOT_PORTAL_ID), { maxPer10s: 1_000_000 }, undefined, timeLeft),
    }),
    exportSink: localDirectorySink(await mkdtemp(path.join(tmpdir(), 'fetch-cpu-'))),
    now: Date.now,
  };
  let pages = 0;
  ctx.outOfBudget = () => (pages++ >= maxPages ? 'bench page limit' : null);
  await processFetchJob(ctx);
  const [row] = await sql`select progress_done, (result ->> 'pages')::int as pages from public.jobs where id = ${job.id}`;
  return { items: Number(row!.progress_done), pages: Number(row!.pages) };
}

/** The previous path, for comparison: typed list calls, SDK models, items shaped in JS, save_fetched_page. */
async function legacyPath(sql: Sql, simUrl: string, job: ClaimedJob): Promise<{ items: number; pages: number }> {
  const u = undefined;
  const cms = new Client({ accessToken: TOKEN, basePath: simUrl, numberOfApiCallRetries: 0 }).cms;
  const toItem = (raw: unknown) => {
    const data = JSON.parse(JSON.stringify(raw ?? {})) as Record<string, unknown>;
    const updated = data['updated'] ?? data['updatedAt'];
    return { id: String(data['id']), updatedAt: typeof updated === 'string' ? updated : null, data };
  };
  type Page = { results: unknown[]; paging?: { next?: { after?: string } } };
  const lists: Partial<Record<ContentType, (after: string | undefined) => Promise<Page>>> = {
    blog_posts: (a) => cms.blogs.blogPosts.basicApi.getPage(u, u, u, u, u, u, u, a, 100, false),
    site_pages: (a) => cms.pages.sitePagesApi.getPage(u, u, u, u, u, u, u, a, 100, false),
    landing_pages: (a) => cms.pages.landingPagesApi.getPage(u, u, u, u, u, u, u, a, 100, false),
    blog_authors: (a) => cms.blogs.authors.blogAuthorsApi.getPage(u, u, u, u, u, u, u, a, 100, false),
    blog_tags: (a) => cms.blogs.tags.blogTagsApi.getPage(u, u, u, u, u, u, u, a, 100, false),
    url_redirects: (a) => cms.urlRedirects.redirectsApi.getPage(u, u, u, u, u, u, u, a, 100, false),
  };
  let tableIds: string[] = [];
  if (job.contentType === 'hubdb_rows') {
    const tables = await cms.hubdb.tablesApi.getAllTables(u, u, 1000, u, u, u, u, u, u, u, false);
    tableIds = tables.results.map((t) => String(t.id)).sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
  }
  let items = 0;
  let pages = 0;
  let after: string | undefined;
  let table = 0;
  const budget = sharedRequestBudget(sql, String(HUBSPOT_PORTAL_ID), { maxPer10s: 1_000_000 });
  while (pages < maxPages) {
    await budget();
    let page: Page;
    let converted;
    if (job.contentType === 'hubdb_rows') {
      const tableId = tableIds[table];
      if (tableId === undefined) break;
      page = await cms.hubdb.rowsApi.getTableRows(tableId, u, after, 1000, u, u, false) as unknown as Page;
      converted = page.results.map((r) => {
        const item = toItem(r);
        return { id: `${tableId}:${item.id}`, updatedAt: item.updatedAt, data: { ...item.data, tableId } };
      });
    } else {
      const list = lists[job.contentType!];
      if (!list) throw new Error(`--legacy covers ${Object.keys(lists).join(', ')} and hubdb_rows`);
      page = await list(after);
      converted = page.results.map(toItem);
    }
    after = page.paging?.next?.after || undefined;
    await saveFetchedPage(sql, job, converted, { after: after ?? null, finished: after === undefined });
    items += converted.length;
    pages++;
    if (!after) {
      if (job.contentType !== 'hubdb_rows') break;
      table++;
    }
  }
  return { items, pages };
}

function report(label: string, type: string, m: Measured): void {
  const perItem = (ms: number) => ((ms * 1000) / Math.max(1, m.items)).toFixed(1);
  log(`${label.padEnd(7)} ${type.padEnd(12)} ${String(m.items).padStart(6)} items ${String(m.pages).padStart(4)} pages  ` +
    `worker CPU ${m.clientMs.toFixed(0).padStart(6)} ms = ${perItem(m.clientMs).padStart(6)} µs/item (user ${perItem(m.userMs)})` +
    `${m.serverMs === null ? '' : `   (Postgres CPU ${perItem(m.serverMs).padStart(6)} µs/item)`}   wall ${(m.wallMs / 1000).toFixed(1)} s`);
}

const pg = await startBenchPostgres(log);
const sim = await startSimulator();
const dbUrl = await migratedDatabase(pg, 'fetch_cpu');
const sql = connectDatabase(dbUrl, { max: 4, applicationName: 'bench-fetch-cpu' });
try {
  const userId = crypto.randomUUID();
  await sql`insert into auth.users (id, email, aud, role) values (${userId}, ${`${userId}@example.test`}, 'authenticated', 'authenticated')`;
  const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: userId, hubspotPortalId: HUBSPOT_PORTAL_ID, name: 'fetch-cpu', accessToken: TOKEN });
  log(`simulator ${sim.url} (realistic portal), up to ${maxPages} pages per type, ${process.versions.deno ? `Deno ${process.versions.deno}` : `Node ${process.versions.node}`}`);
  // Warm-up (JIT, connections, first plans): one page, not counted.
  {
    const { runId, job } = await claimType(sql, portalId, userId, 'blog_tags');
    await rawPath(sql, sim.url, job).catch(() => null);
    await stopRun(sql, runId);
    await sql`delete from public.hubspot_content`;
  }
  const totals = { items: 0, clientMs: 0 };
  for (const type of types as ContentType[]) {
    const { runId, job } = await claimType(sql, portalId, userId, type);
    const m = await measure(pg.pid, () => rawPath(sql, sim.url, job));
    report('raw', type, m);
    totals.items += m.items;
    totals.clientMs += m.clientMs;
    await stopRun(sql, runId);
    if (values.legacy) {
      await sql`delete from public.hubspot_content`;
      const legacy = await claimType(sql, portalId, userId, type);
      report('legacy', type, await measure(pg.pid, () => legacyPath(sql, sim.url, legacy.job)));
      await stopRun(sql, legacy.runId);
    }
    await sql`delete from public.hubspot_content`;
  }
  log(`raw path overall: ${((totals.clientMs * 1000) / Math.max(1, totals.items)).toFixed(1)} µs of worker CPU per item (${totals.items} items)`);
} finally {
  await sql.end({ timeout: 5 });
  sim.child.kill('SIGTERM');
  await dropDatabase(pg, dbUrl).catch(() => {});
  await pg.stop();
}
