// Scenario 5: export throughput and memory. A worker process (tsx child, the
// worker's real code path: claim → stream rows from Postgres → CSV file)
// exports one portal's 50,000 site pages (quick: 2,000); rows/s and the
// child's peak RSS (/proc/self/status VmHWM, and process.resourceUsage().maxRSS).
// The same child also runs under Deno, the runtime the worker really uses.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../local/postgres.ts';
import type { BenchContext, ScenarioResult } from '../lib/context.ts';
import { dropDatabase, migratedDatabase, pool } from '../lib/pg.ts';
import { atMost, figure } from '../lib/report.ts';
import { benchIds, seedContent, seedUsersAndPortals } from '../lib/seed.ts';

const S = '5';
const run = promisify(execFile);
const TSX = path.join(PROJECT_ROOT, 'node_modules/.bin/tsx');
const DENO = path.join(PROJECT_ROOT, 'node_modules/.bin/deno');
const CHILD = path.join(PROJECT_ROOT, 'bench/scenarios/export-child.ts');
/** V8 limits that show the live set is small: the default heap grows lazily on a big machine. */
const CAPPED = '--max-old-space-size=40 --max-semi-space-size=2';
/** The same child under Node (tsx, as specified), Node with a capped heap, and Deno (what the edge function runs on). */
const RUNTIMES = {
  node: (args: string[]) => [TSX, [CHILD, ...args], {}] as const,
  nodeCapped: (args: string[]) => [TSX, [CHILD, ...args], { NODE_OPTIONS: CAPPED }] as const,
  deno: (args: string[]) => [DENO, ['run', '-A', '--config', 'deno.json', CHILD, ...args], {}] as const,
};
const ORDER: Runtime[] = ['node', 'deno', 'nodeCapped'];
type Runtime = keyof typeof RUNTIMES;

interface ChildReport {
  status: string;
  rows: number;
  bytes: number;
  fileBytes: number | null;
  elapsedMs: number;
  rssBeforeKb: number | null;
  peakRssKb: number | null;
  maxRssKb: number;
  peaks: { heapUsedKb: number; heapTotalKb: number; externalKb: number; arrayBuffersKb: number };
}

export async function exportScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const items = ctx.quick ? 2_000 : 50_000;
  const url = await migratedDatabase(ctx.pg, 's5');
  const sql = pool(url, 1);
  const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-bench-export-'));
  const reports: Record<Runtime, ChildReport[]> = { node: [], nodeCapped: [], deno: [] };
  try {
    await seedUsersAndPortals(sql, 1, 1);
    await seedContent(sql, 1, 'site_pages', items);
    await sql.unsafe('vacuum analyze');
    const [size] = await sql`select pg_size_pretty(pg_total_relation_size('public.hubspot_content')) as s`;
    ctx.log(`[5] ${items} site pages seeded (${String(size?.s)})`);
    const ids = benchIds(1);
    for (let rep = 0; rep < ctx.reps; rep++) {
      for (const rt of ORDER.map((_, k) => ORDER[(k + rep) % ORDER.length]!)) {
        const [cmd, argv, env] = RUNTIMES[rt]([url, ids.portalId, ids.userId, 'site_pages', exportDir]);
        const { stdout } = await run(cmd, [...argv], { cwd: PROJECT_ROOT, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024, timeout: 180_000 });
        const r = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as ChildReport;
        reports[rt].push(r);
        const label = `export rep ${rep + 1} (${rt})`;
        ctx.checks.equal(S, `${label}: job completed`, r.status, 'completed');
        ctx.checks.equal(S, `${label}: every live row exported`, r.rows, items);
        ctx.checks.expect(S, `${label}: file size matches the job result`, r.fileBytes === r.bytes && r.bytes > 0, `file ${r.fileBytes}, result ${r.bytes}`);
        ctx.log(`[5] rep ${rep + 1}/${ctx.reps} ${rt}: ${r.rows} rows in ${Math.round(r.elapsedMs)} ms, peak RSS ${mb(peak(r)).toFixed(1)} MB`);
      }
    }
  } finally {
    await sql.end({ timeout: 5 });
    await rm(exportDir, { recursive: true, force: true });
    await dropDatabase(ctx.pg, url);
  }
  ctx.note(`Scenario 5: ${items.toLocaleString('en-US')} site pages (~2 KB JSON each, seeded by SQL) exported by one worker invocation in a child process ` +
    `(claim, pages of rows from Postgres, CSV to a local file, complete): under tsx (Node, the goal's figure) and, for comparison, under Deno ` +
    `(the edge runtime) and under tsx with NODE_OPTIONS="${CAPPED}" (same work, V8 made to collect early: shows how much of the peak is live data), rotating. Peak RSS = VmHWM of the whole child (runtime + loader + worker code); "RSS before" is its VmRSS just before the invocation.`);
  const { node, nodeCapped, deno } = reports;
  return {
    figures: [
      figure(S, `export rows/s (${items.toLocaleString('en-US')} rows), tsx child`, 'rows/s', node.map((r) => (r.rows * 1000) / r.elapsedMs)),
      figure(S, 'export worker peak RSS, tsx child', 'MB', node.map((r) => mb(peak(r))), { goal: atMost(128, '< 128 MB') }),
      figure(S, 'export worker RSS before the export, tsx child', 'MB', node.map((r) => mb(r.rssBeforeKb ?? Number.NaN))),
      figure(S, 'export worker peak V8 heap used (sampled), tsx child', 'MB', node.map((r) => mb(r.peaks.heapUsedKb))),
      figure(S, `export rows/s (${items.toLocaleString('en-US')} rows), Deno child`, 'rows/s', deno.map((r) => (r.rows * 1000) / r.elapsedMs)),
      figure(S, 'export worker peak RSS, Deno child', 'MB', deno.map((r) => mb(peak(r)))),
      figure(S, 'export worker RSS before the export, Deno child', 'MB', deno.map((r) => mb(r.rssBeforeKb ?? Number.NaN))),
      figure(S, 'export worker peak RSS, tsx child with a 40 MB old-space cap', 'MB', nodeCapped.map((r) => mb(peak(r)))),
      figure(S, `export rows/s (${items.toLocaleString('en-US')} rows), tsx child with the cap`, 'rows/s', nodeCapped.map((r) => (r.rows * 1000) / r.elapsedMs)),
      figure(S, 'export file size', 'MB', node.map((r) => r.bytes / 1024 / 1024)),
    ],
    details: { items, reports },
  };
}

function peak(r: ChildReport): number {
  return r.peakRssKb ?? r.maxRssKb;
}

function mb(kb: number): number {
  return kb / 1024;
}
