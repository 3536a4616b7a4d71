// Scenario 9: Postgres CPU per stored item on the fetch path. One connection
// calls save_fetched_page_raw with the simulator's own page bodies (its
// generators and list routes, in this process, no HTTP) for three passes of
// the same portal, each a new fetch job as a re-fetch is:
//   insert     first fetch, every item new;
//   unchanged  re-fetch, nothing changed (every item counts as unchanged; run 10
//              times, each a new job: one takes only tens of ms);
//   changed10  re-fetch after 10% of the items got a new `updated` time;
// then complete_fetch_job (deleted-item marking) after each pass. Types: site
// pages and blog posts (100 items a page) and HubDB rows (1000 a page); plus
// the fixed cost of one call with an empty page. CPU is the backend's own
// (utime + stime from /proc, 10 ms ticks: passes are sized to take seconds)
// and the whole server's (backend, WAL writer, checkpointer, autovacuum).
//
// Also a command for comparing schema variants A/B on the same pages, run
// interleaved in one process (each variant's SQL applied to a clone of the
// migrated database, every repetition on a fresh clone):
//   npx tsx bench/scenarios/store-cost.ts [--variant name=file.sql ...] [--reps 3] [--scale 1]
// With no --variant it measures the migrated schema alone.
import { parseArgs } from 'node:util';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Portal } from '../../hubspot-sim/portal.ts';
import { handleRoute, matchRoute } from '../../hubspot-sim/routes.ts';
import { contentType, type ContentType } from '../../shared/content-types.ts';
import { LIST_PATHS, rowsPath } from '../../shared/hubspot/endpoints.ts';
import { completeFetchJob, saveFetchedPageRaw } from '../../shared/sql/fetch.ts';
import { claimNextJob, type ClaimedJob } from '../../shared/sql/jobs.ts';
import { createRun } from '../../shared/sql/runs.ts';
import type { Sql } from '../../shared/db.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { cloneDatabase, dropDatabase, migratedDatabase, pool, postgresCpuMs, startBenchPostgres, type BenchPostgres } from '../lib/pg.ts';
import { figure, type Figure } from '../lib/report.ts';
import { Checks } from '../lib/result.ts';
import { benchIds, seedUsersAndPortals } from '../lib/seed.ts';
import { median } from '../lib/stats.ts';

const HUBSPOT_PORTAL_ID = 4242;
const TYPES = ['site_pages', 'blog_posts', 'hubdb_rows'] as const satisfies readonly ContentType[];
type StoreType = (typeof TYPES)[number];
export const PASSES = ['insert', 'unchanged', 'changed10'] as const;
export type Pass = (typeof PASSES)[number];

export interface StoreSizes {
  site_pages: number;
  blog_posts: number;
  hubdb_rows: number;
  hubdbTables: number;
  /** Calls with an empty page (the fixed cost per call). */
  emptyCalls: number;
  /** Times the unchanged re-fetch runs (each a new job; the figure is their mean). */
  unchangedRepeats: number;
}

const FULL: StoreSizes = { site_pages: 3000, blog_posts: 3000, hubdb_rows: 8000, hubdbTables: 4, emptyCalls: 1000, unchangedRepeats: 10 };
const QUICK: StoreSizes = { site_pages: 300, blog_posts: 0, hubdb_rows: 1000, hubdbTables: 1, emptyCalls: 100, unchangedRepeats: 1 };

interface Page {
  body: string;
  context: { tableId: string; nextTableId: string | null } | null;
  items: number;
}

/** The list response bodies the simulator serves for one type, page after page (at our page size). */
export function pagesOf(portal: Portal, type: StoreType): Page[] {
  const pageSize = contentType(type).pageSize;
  const pages: Page[] = [];
  const walk = (listPath: string, context: Page['context']) => {
    const route = matchRoute('GET', listPath);
    if (!route) throw new Error(`the simulator has no route ${listPath}`);
    let after: string | null = null;
    do {
      const query = new URLSearchParams({ limit: String(pageSize) });
      if (after) query.set('after', after);
      const res = handleRoute(route, portal, query, listPath, 'http://127.0.0.1');
      if (res.status !== 200) throw new Error(`simulator answered ${res.status} for ${listPath}`);
      const body = res.body.toString();
      const parsed = JSON.parse(body) as { results: unknown[]; paging?: { next?: { after?: string } } };
      after = parsed.paging?.next?.after ?? null;
      pages.push({ body, context: context && { ...context }, items: parsed.results.length });
    } while (after);
  };
  if (type !== 'hubdb_rows') {
    walk(LIST_PATHS[type], null);
  } else {
    const tables = portal.collection('hubdb_tables').active();
    tables.forEach((t, i) => walk(rowsPath(String(t.id)), {
      tableId: String(t.id), nextTableId: tables[i + 1] ? String(tables[i + 1]!.id) : null,
    }));
  }
  return pages;
}

/** CPU of the backend behind a one-connection pool and of the whole server. */
interface Meter {
  backendPid: number;
  read(): Promise<{ backendMs: number; serverMs: number }>;
}

async function meter(sql: Sql, pg: BenchPostgres): Promise<Meter> {
  const [row] = await sql`select pg_backend_pid() as pid`;
  const backendPid = Number(row!.pid);
  return {
    backendPid,
    async read() {
      const backendMs = await postgresCpuMs(backendPid);
      const serverMs = await postgresCpuMs(pg.pid);
      if (backendMs === null || serverMs === null) throw new Error('Postgres CPU is readable only for a local server (/proc)');
      return { backendMs, serverMs };
    },
  };
}

async function claimFetch(sql: Sql, portalId: string, userId: string, type: StoreType): Promise<ClaimedJob> {
  const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: [type] });
  const job = await claimNextJob(sql, 'bench-store-cost', ['fetch']);
  if (!run.runId || !job || job.runId !== run.runId) throw new Error(`could not claim the ${type} fetch job`);
  return job;
}

export interface PassCost {
  items: number;
  pages: number;
  /** Backend CPU µs per item: saving the pages. */
  saveUs: number;
  /** Backend CPU µs per item: complete_fetch_job (deleted-item marking). */
  completeUs: number;
  /** Whole-server CPU µs per item, save + complete (background processes included). */
  serverUs: number;
  counts: { added: number; updated: number; unchanged: number };
}

export interface VariantRun {
  /** type -> pass -> cost */
  passes: Record<StoreType, Partial<Record<Pass, PassCost>>>;
  /** Backend CPU µs per call of an empty page. */
  emptyPageUs: number;
  /** hubspot_content's size (heap + TOAST + indexes) after the last pass, bytes. */
  tableBytes: number;
}

/** Runs every pass on one freshly cloned database; the simulator portal is built fresh, so every variant sees the same pages. */
async function runVariant(pg: BenchPostgres, url: string, sizes: StoreSizes, checks: Checks, label: string): Promise<VariantRun> {
  const portal = new Portal({
    portalId: HUBSPOT_PORTAL_ID, token: 'unused', seed: 7, hubdbTables: sizes.hubdbTables,
    sizes: { site_pages: sizes.site_pages, blog_posts: sizes.blog_posts, hubdb_rows: sizes.hubdb_rows, landing_pages: 0, url_redirects: 0 },
  });
  const sql = pool(url, 1) as unknown as Sql;
  try {
    await seedUsersAndPortals(sql, 1, 1);
    const { userId, portalId } = benchIds(1);
    const cpu = await meter(sql, pg);
    const passes = { site_pages: {}, blog_posts: {}, hubdb_rows: {} } as VariantRun['passes'];
    for (const type of TYPES) {
      if (sizes[type] === 0) continue;
      for (const pass of PASSES) {
        if (pass === 'changed10') portal.touchItems(type, Math.round(sizes[type] / 10));
        const pages = pagesOf(portal, type);
        const items = pages.reduce((n, p) => n + p.items, 0);
        const expected = pass === 'insert' ? { added: items, updated: 0, unchanged: 0 }
          : pass === 'unchanged' ? { added: 0, updated: 0, unchanged: items }
          : { added: 0, updated: Math.round(sizes[type] / 10), unchanged: items - Math.round(sizes[type] / 10) };
        // An unchanged re-fetch takes tens of ms: repeated (each a new fetch job) to span many 10-ms ticks.
        const repeats = pass === 'unchanged' ? sizes.unchangedRepeats : 1;
        let saveMs = 0;
        let completeMs = 0;
        let serverMs = 0;
        let counts = { added: 0, updated: 0, unchanged: 0 };
        for (let r = 0; r < repeats; r++) {
          const job = await claimFetch(sql, portalId, userId, type);
          const c0 = await cpu.read();
          counts = { added: 0, updated: 0, unchanged: 0 };
          for (const page of pages) {
            const saved = await saveFetchedPageRaw(sql, job, page.body, page.context);
            if (!saved) throw new Error(`${label}: page refused (fenced off?)`);
            counts.added += saved.added;
            counts.updated += saved.updated;
            counts.unchanged += saved.unchanged;
          }
          const c1 = await cpu.read();
          if (!(await completeFetchJob(sql, job))) throw new Error(`${label}: complete_fetch_job refused`);
          const c2 = await cpu.read();
          saveMs += c1.backendMs - c0.backendMs;
          completeMs += c2.backendMs - c1.backendMs;
          serverMs += c2.serverMs - c0.serverMs;
          checks.expect('9', `${label} ${type} ${pass}: counts`, JSON.stringify(counts) === JSON.stringify(expected),
            `expected ${JSON.stringify(expected)}, got ${JSON.stringify(counts)}`);
        }
        const per = (ms: number) => (ms * 1000) / Math.max(1, items * repeats);
        passes[type][pass] = { items, pages: pages.length, saveUs: per(saveMs), completeUs: per(completeMs), serverUs: per(serverMs), counts };
      }
      const [state] = await sql`select count(*)::int as live, count(*) filter (where deleted_at is not null)::int as deleted
        from public.hubspot_content where content_type = ${type}`;
      checks.equal('9', `${label} ${type}: every item stored once, none marked deleted`, `${state!.live}/${state!.deleted}`, `${sizes[type]}/0`);
    }
    // Fixed cost per call: empty pages on a held job.
    let emptyPageUs = Number.NaN;
    if (sizes.emptyCalls > 0) {
      const job = await claimFetch(sql, portalId, userId, 'site_pages');
      const c0 = await cpu.read();
      for (let i = 0; i < sizes.emptyCalls; i++) {
        if (!(await saveFetchedPageRaw(sql, job, '{"results":[]}'))) throw new Error(`${label}: empty page refused`);
      }
      const c1 = await cpu.read();
      emptyPageUs = ((c1.backendMs - c0.backendMs) * 1000) / sizes.emptyCalls;
    }
    const [again] = await sql`select pg_backend_pid() as pid`;
    checks.equal('9', `${label}: one backend measured throughout`, Number(again!.pid), cpu.backendPid);
    const [size] = await sql`select pg_total_relation_size('public.hubspot_content')::bigint as bytes`;
    return { passes, emptyPageUs, tableBytes: Number(size!.bytes) };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** A schema variant: SQL applied to a clone of the migrated database (null: the migrations as they are). */
export interface Variant {
  name: string;
  sql: string | null;
}

/** Each variant on a fresh clone per repetition, variants interleaved within each repetition. */
export async function measureVariants(pg: BenchPostgres, variants: readonly Variant[], sizes: StoreSizes, reps: number, checks: Checks,
  log: (s: string) => void): Promise<Map<string, VariantRun[]>> {
  const base = await migratedDatabase(pg, 'store_cost');
  const templates = new Map<string, string>();
  for (const v of variants) {
    const t = await cloneDatabase(pg, base, `store_cost_t_${v.name}`);
    if (v.sql) {
      const admin = pool(t, 1);
      await admin.unsafe(v.sql).finally(() => admin.end({ timeout: 5 }));
    }
    templates.set(v.name, t);
  }
  const runs = new Map<string, VariantRun[]>(variants.map((v) => [v.name, []]));
  for (let r = 0; r < reps; r++) {
    // Alternate the order each repetition: neither variant always runs first.
    const order = r % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const url = await cloneDatabase(pg, templates.get(v.name)!, `store_cost_r_${v.name}`);
      runs.get(v.name)!.push(await runVariant(pg, url, sizes, checks, v.name));
      await dropDatabase(pg, url);
      log(`store cost: ${v.name} repetition ${r + 1}/${reps} done`);
    }
  }
  for (const t of [...templates.values(), base]) await dropDatabase(pg, t);
  return runs;
}

const TYPE_LABEL: Record<StoreType, string> = { site_pages: 'site pages (100/page)', blog_posts: 'blog posts (100/page)', hubdb_rows: 'HubDB rows (1000/page)' };

/** Scenario 9 (the migrated schema alone). */
export async function storeCost(ctx: BenchContext): Promise<ScenarioResult> {
  const sizes = ctx.quick ? QUICK : FULL;
  const runs = (await measureVariants(ctx.pg, [{ name: 'current', sql: null }], sizes, ctx.reps, ctx.checks, ctx.log)).get('current')!;
  const figures: Figure[] = [];
  for (const type of TYPES) {
    if (sizes[type] === 0) continue;
    for (const pass of PASSES) {
      const of = (f: (p: PassCost) => number) => runs.map((r) => f(r.passes[type][pass]!));
      figures.push(figure('9', `${TYPE_LABEL[type]}, ${pass}: save_fetched_page_raw`, 'µs Postgres CPU/item', of((p) => p.saveUs)));
      figures.push(figure('9', `${TYPE_LABEL[type]}, ${pass}: complete_fetch_job`, 'µs Postgres CPU/item', of((p) => p.completeUs)));
    }
  }
  figures.push(figure('9', 'one call with an empty page (fixed cost)', 'µs Postgres CPU/call', runs.map((r) => r.emptyPageUs)));
  ctx.note('Scenario 9: one connection calls save_fetched_page_raw with the simulator\'s page bodies (site pages and blog posts ' +
    '~2 KB an item, 100 a page; HubDB rows 1000 a page): a first fetch (every item new), a re-fetch of the same pages ' +
    '(every item unchanged), a re-fetch after 10% of the items got a new updated time; each pass is a new fetch job, ' +
    'completed by complete_fetch_job (deleted-item marking). CPU is the backend\'s own, from /proc (10 ms ticks).');
  return {
    figures,
    details: { sizes, runs: runs.map((r) => ({ ...r })) },
  };
}

function printComparison(runs: Map<string, VariantRun[]>, sizes: StoreSizes): void {
  const names = [...runs.keys()];
  const first = names[0]!;
  const cell = (xs: number[]) => median(xs).toFixed(1).padStart(7);
  console.log(`\nmedian backend CPU µs/item (save | complete | server total), ratios vs ${first}`);
  for (const type of TYPES) {
    if (sizes[type] === 0) continue;
    for (const pass of PASSES) {
      const line = names.map((n) => {
        const rs = runs.get(n)!.map((r) => r.passes[type][pass]!);
        const save = rs.map((p) => p.saveUs);
        const ratio = n === first ? '' : ` (×${(median(save) / median(runs.get(first)!.map((r) => r.passes[type][pass]!.saveUs))).toFixed(2)})`;
        return `${n}: ${cell(save)}${ratio.padEnd(8)} |${cell(rs.map((p) => p.completeUs))} |${cell(rs.map((p) => p.serverUs))}`;
      });
      console.log(`${type.padEnd(11)} ${pass.padEnd(9)} ${line.join('   ')}`);
    }
  }
  console.log(`empty page µs/call: ${names.map((n) => `${n} ${cell(runs.get(n)!.map((r) => r.emptyPageUs))}`).join('   ')}`);
  console.log(`table bytes: ${names.map((n) => `${n} ${(median(runs.get(n)!.map((r) => r.tableBytes)) / 1e6).toFixed(1)} MB`).join('   ')}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      variant: { type: 'string', multiple: true, default: [] },
      reps: { type: 'string', default: '3' },
      scale: { type: 'string', default: '1' },
    },
  });
  const scale = Number(values.scale);
  const sizes: StoreSizes = {
    ...FULL, site_pages: Math.round(FULL.site_pages * scale), blog_posts: Math.round(FULL.blog_posts * scale), hubdb_rows: Math.round(FULL.hubdb_rows * scale),
  };
  const variants: Variant[] = [{ name: 'current', sql: null }];
  for (const v of values.variant) {
    const [name, file] = v.split('=');
    if (!name || !file) throw new Error(`--variant name=file.sql, got ${v}`);
    variants.push({ name, sql: await readFile(file, 'utf8') });
  }
  const log = (s: string) => console.error(s);
  const pg = await startBenchPostgres(log);
  const checks = new Checks(log);
  try {
    const runs = await measureVariants(pg, variants, sizes, Number(values.reps), checks, log);
    printComparison(runs, sizes);
  } finally {
    await pg.stop();
  }
  if (checks.failed.length) process.exitCode = 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
