// Worker CPU per exported row: seeds N site pages in a real, migrated database,
// runs the export job (functions/worker/export-job.ts: Postgres formats the CSV
// with COPY, the worker passes the bytes to the sink) and divides this
// process's CPU time (process.cpuUsage: user + system) by the rows exported.
// Postgres runs in its own processes, so its CPU is not counted; it is shown
// beside it (Linux, local server).
//
//   npx tsx bench/scenarios/export-cpu.ts [--rows 50000] [--runs 3] [--sink local|storage]
//   node_modules/.bin/deno run -A --config deno.json bench/scenarios/export-cpu.ts ...
//
// DATABASE_URL: use that server (it needs CREATEDB) instead of an embedded one.
// --sink storage uploads to Supabase Storage (SUPABASE_URL, SUPABASE_SERVICE_ROLE_KEY,
// a private bucket `exports`) instead of writing a local file.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { processExportJob } from '../../functions/worker/export-job.ts';
import { type ExportSink } from '../../functions/worker/export-sink.ts';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { supabaseStorageSink } from '../../functions/worker/tus-sink.ts';
import type { JobContext } from '../../functions/worker/job-context.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { silentLogger } from '../../shared/log.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { claimNextJob } from '../../shared/sql/jobs.ts';
import { createRun } from '../../shared/sql/runs.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';
import { dropDatabase, migratedDatabase, postgresCpuMs, startBenchPostgres } from '../lib/pg.ts';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '50000' },
    runs: { type: 'string', default: '3' },
    sink: { type: 'string', default: 'local' },
  },
});
const rows = Number(values.rows);
const runs = Number(values.runs);
if (!Number.isInteger(rows) || rows < 1 || !Number.isInteger(runs) || runs < 1) throw new Error('--rows and --runs must be positive integers');
if (values.sink !== 'local' && values.sink !== 'storage') throw new Error('--sink is local or storage');
const log = (s: string) => console.log(s);

/** Site pages shaped like HubSpot's: the exported fields plus a large body that stays in Postgres. */
async function seed(sql: Sql, portalId: string, ownerId: string, type: ContentType, count: number): Promise<void> {
  for (let from = 1; from <= count; from += 10_000) {
    const to = Math.min(count, from + 9_999);
    await sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
      select ${portalId}, ${ownerId}, ${type}, (100000000 + g)::text,
             jsonb_build_object(
               'id', (100000000 + g)::text, 'name', 'Page ' || g || ', "quoted"', 'slug', 'section/page-' || g,
               'url', 'https://www.example.com/section/page-' || g, 'state', 'PUBLISHED',
               'htmlTitle', case when g % 50 = 0 then '=HYPERLINK("x")' else 'Title of page ' || g end,
               'metaDescription', 'A description of page ' || g || e' with a line\nbreak', 'language', 'en',
               'domain', 'www.example.com', 'authorName', 'Author ' || (g % 97), 'publishDate', '2025-06-01T10:00:00Z',
               'created', '2025-01-01T10:00:00Z', 'updated', '2025-06-01T10:00:00Z', 'archivedAt', null,
               'layoutSections', jsonb_build_object('dnd_area', jsonb_build_object('rows', (select jsonb_agg(md5((g * 31 + i)::text)) from generate_series(1, 40) i))),
               'widgets', jsonb_build_object('body', repeat('<p>Lorem ipsum dolor sit amet. </p>', 60))),
             timestamptz '2025-06-01 10:00:00+00' + g * interval '1 second'
        from generate_series(${from}::int, ${to}::int) g`;
  }
}

function contextFor(sql: Sql, job: NonNullable<Awaited<ReturnType<typeof claimNextJob>>>, sink: ExportSink): JobContext {
  return {
    sql,
    job,
    log: silentLogger,
    signal: new AbortController().signal,
    timeLeft: () => 600_000,
    outOfBudget: () => null,
    cpuMs: () => {
      const c = process.cpuUsage();
      return (c.user + c.system) / 1000;
    },
    hubspotForPortal: async () => {
      throw new Error('an export does not talk to HubSpot');
    },
    exportSink: sink,
    now: Date.now,
  };
}

const pg = await startBenchPostgres(log);
const dbUrl = await migratedDatabase(pg, 'export_cpu');
const sql = connectDatabase(dbUrl, { max: 4, applicationName: 'bench-export-cpu' });
const dir = await mkdtemp(path.join(tmpdir(), 'export-cpu-'));
const sink = values.sink === 'storage'
  ? supabaseStorageSink({ supabaseUrl: process.env.SUPABASE_URL ?? '', serviceKey: process.env.SUPABASE_SERVICE_ROLE_KEY ?? '' })
  : localDirectorySink(dir);
try {
  const userId = crypto.randomUUID();
  await sql`insert into auth.users (id, email, aud, role) values (${userId}, ${`${userId}@example.test`}, 'authenticated', 'authenticated')`;
  const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: userId, hubspotPortalId: 4242, name: 'export-cpu', accessToken: 'pat-bench-export-cpu' });
  await seed(sql, portalId, userId, 'landing_pages', 2_000); // warm-up type
  await seed(sql, portalId, userId, 'site_pages', rows);
  await sql`vacuum analyze public.hubspot_content`;
  const runtime = process.versions.deno ? `Deno ${process.versions.deno}` : `Node ${process.versions.node}`;
  log(`${rows} site pages seeded; ${runtime}; ${values.sink} sink; Postgres ${pg.version}`);

  const exportOnce = async (type: ContentType) => {
    const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: [type] });
    const job = await claimNextJob(sql, `export-cpu-${type}`, ['export']);
    if (!job || job.runId !== run.runId) throw new Error('could not claim the export job');
    // Postgres's CPU is read from /proc before and after, outside the worker's own measurement.
    const server0 = await postgresCpuMs(pg.pid);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const outcome = await processExportJob(contextFor(sql, job, sink));
    const wallMs = performance.now() - t0;
    const c = process.cpuUsage(c0);
    const server1 = await postgresCpuMs(pg.pid);
    const cpu = { clientMs: (c.user + c.system) / 1000, serverMs: server0 === null || server1 === null ? null : server1 - server0 };
    if (outcome.kind !== 'completed') throw new Error(`export ended ${JSON.stringify(outcome)}`);
    const [row] = await sql`select result from public.jobs where id = ${job.id}`;
    const result = row!.result as { rows: number; bytes: number };
    return { ...result, ...cpu, wallMs };
  };

  await exportOnce('landing_pages'); // JIT, connections, first plans: not counted
  const perRow: number[] = [];
  for (let i = 1; i <= runs; i++) {
    const m = await exportOnce('site_pages');
    const us = (ms: number) => (ms * 1000) / m.rows;
    perRow.push(us(m.clientMs));
    log(`run ${i}: ${m.rows} rows, ${(m.bytes / 1024 / 1024).toFixed(1)} MB, worker CPU ${m.clientMs.toFixed(0)} ms = ${us(m.clientMs).toFixed(2)} µs/row` +
      `${m.serverMs === null ? '' : `  (Postgres CPU ${us(m.serverMs).toFixed(1)} µs/row)`}  wall ${(m.wallMs / 1000).toFixed(2)} s`);
  }
  const sorted = [...perRow].sort((a, b) => a - b);
  log(`worker CPU per exported row: median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} µs (best ${sorted[0]!.toFixed(2)}, worst ${sorted.at(-1)!.toFixed(2)})`);
} finally {
  await sql.end({ timeout: 5 });
  await rm(dir, { recursive: true, force: true });
  await dropDatabase(pg, dbUrl).catch(() => {});
  await pg.stop();
}
