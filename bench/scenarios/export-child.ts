// Child process of scenario 5: one worker invocation exporting one content type
// of one portal to CSV (functions/worker, local directory sink), then a JSON
// line with rows, time and the process's peak RSS.
// Usage: tsx bench/scenarios/export-child.ts <dbUrl> <portalId> <userId> <contentType> <exportDir>
import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { ContentType } from '../../shared/content-types.ts';
import { connectDatabase } from '../../shared/db.ts';
import { silentLogger } from '../../shared/log.ts';
import { createRun } from '../../shared/sql/runs.ts';
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { localExportPath } from '../../shared/export-location.ts';
import { runWorkerInvocation } from '../../functions/worker/invocation.ts';

function statusKb(field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const [dbUrl, portalId, userId, contentType, exportDir] = process.argv.slice(2);
if (!dbUrl || !portalId || !userId || !contentType || !exportDir) {
  console.error('usage: export-child.ts <dbUrl> <portalId> <userId> <contentType> <exportDir>');
  process.exit(2);
}

const sql = connectDatabase(dbUrl, { max: 3, applicationName: 'bench-export' });
try {
  const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: [contentType as ContentType] });
  const rssBeforeKb = statusKb('VmRSS');
  // Where the memory goes: the peak of V8's heap and of off-heap buffers, sampled every 20 ms.
  const peaks = { heapUsedKb: 0, heapTotalKb: 0, externalKb: 0, arrayBuffersKb: 0 };
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peaks.heapUsedKb = Math.max(peaks.heapUsedKb, m.heapUsed / 1024);
    peaks.heapTotalKb = Math.max(peaks.heapTotalKb, m.heapTotal / 1024);
    peaks.externalKb = Math.max(peaks.externalKb, m.external / 1024);
    peaks.arrayBuffersKb = Math.max(peaks.arrayBuffersKb, m.arrayBuffers / 1024);
  }, 20);
  const t0 = performance.now();
  const summary = await runWorkerInvocation({
    sql, log: silentLogger, exportSink: localDirectorySink(exportDir),
    settings: { budgetMs: 120_000, lanes: 1, minStartMs: 1_000, rateLimit: { maxPer10s: 190 } },
  }, `bench-export-${process.pid}`);
  const elapsedMs = performance.now() - t0;
  clearInterval(sampler);
  const [job] = await sql`select status, result from public.jobs where run_id = ${run.runId}`;
  const result = (job?.result ?? {}) as { rows?: number; bytes?: number; location?: string };
  const fileBytes = result.location ? (await stat(localExportPath(exportDir, result.location))).size : null;
  console.log(JSON.stringify({
    status: job?.status, rows: result.rows ?? 0, bytes: result.bytes ?? 0, fileBytes, elapsedMs, summary,
    rssBeforeKb, peakRssKb: statusKb('VmHWM'), maxRssKb: process.resourceUsage().maxRSS, peaks,
  }));
} finally {
  await sql.end({ timeout: 5 });
}
