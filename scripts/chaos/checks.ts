// Invariant checks shared by the chaos driver and the reliability tests: the
// queue's end state (runs settled consistently with their jobs, one
// notification each, nothing left running), content equal to HubSpot's, and
// export files that are complete and match what their job reported.
import { readFile, stat } from 'node:fs/promises';
import { exportHeader } from '../../functions/worker/export-columns.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseCsvSync } from 'csv-parse/sync';
import { localExportPath } from '../../shared/export-location.ts';

export { sleep };

/** Polls `fn` until it returns something truthy; throws after `timeoutMs`. */
export async function waitFor<T>(fn: () => Promise<T> | T, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${opts.what ?? 'a condition'}${last ? ` (last error: ${String(last)})` : ''}`);
    }
    await sleep(opts.intervalMs ?? 100);
  }
}

/**
 * RFC 4180 records of a CSV text, read by csv-parse (an independent parser, so
 * our CSV writer is not checked against our own reading of CSV). Throws on
 * malformed input; records of differing widths are returned for the caller to judge.
 */
export function parseCsv(text: string): string[][] {
  return parseCsvSync(text, { relax_column_count: true }) as string[][];
}

export interface Violation {
  check: string;
  detail: string;
}

/** Recomputes a run's status from its jobs the way settle_run does. */
export function expectedRunStatus(c: { total: number; completed: number; failed: number; stopped: number; active: number }): string | null {
  if (c.total === 0 || c.active > 0) return null;
  if (c.stopped > 0) return 'stopped';
  if (c.failed === 0) return 'completed';
  if (c.completed === 0) return 'failed';
  return 'partially_failed';
}

export interface QueueReport {
  runs: number;
  runsByStatus: Record<string, number>;
  jobs: number;
  jobsByStatus: Record<string, number>;
  notifications: number;
  maxAttemptsSeen: number;
  violations: Violation[];
}

/** Every run settled and consistent with its jobs, attempts within max, nothing running, one notification per run. */
export async function checkQueue(sql: Sql): Promise<QueueReport> {
  const violations: Violation[] = [];
  const runs = await sql`
    select r.id, r.status, r.finished_at, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
           count(j.id)::int as total,
           (count(*) filter (where j.status = 'completed'))::int as completed,
           (count(*) filter (where j.status = 'failed'))::int as failed,
           (count(*) filter (where j.status = 'stopped'))::int as stopped,
           (count(*) filter (where j.status in ('pending', 'running')))::int as active,
           (select count(*)::int from public.notifications n where n.run_id = r.id) as notes,
           (select min(n.kind) from public.notifications n where n.run_id = r.id) as note_kind
      from public.runs r left join public.jobs j on j.run_id = r.id
     group by r.id order by r.created_at`;
  const runsByStatus: Record<string, number> = {};
  for (const r of runs) {
    runsByStatus[r.status as string] = (runsByStatus[r.status as string] ?? 0) + 1;
    const expected = expectedRunStatus(r as never);
    if (r.finished_at === null) violations.push({ check: 'run terminal', detail: `run ${r.id} is ${r.status} (${r.active} active jobs)` });
    else if (expected !== r.status) violations.push({ check: 'run status matches jobs', detail: `run ${r.id} is ${r.status}, its jobs say ${expected}` });
    if (r.finished_at !== null && (r.jobs_total !== r.total || r.jobs_completed !== r.completed || r.jobs_failed !== r.failed || r.jobs_stopped !== r.stopped)) {
      violations.push({ check: 'run counts match jobs', detail: `run ${r.id}: ${r.jobs_completed}/${r.jobs_failed}/${r.jobs_stopped} of ${r.jobs_total} recorded, jobs say ${r.completed}/${r.failed}/${r.stopped} of ${r.total}` });
    }
    if (r.finished_at !== null && r.notes !== 1) violations.push({ check: 'one notification per finished run', detail: `run ${r.id} (${r.status}) has ${r.notes}` });
    if (r.finished_at === null && r.notes !== 0) violations.push({ check: 'no notification before the end', detail: `unfinished run ${r.id} has ${r.notes}` });
    if (r.finished_at !== null && r.notes === 1 && r.note_kind !== `run_${r.status}`) {
      violations.push({ check: 'notification kind', detail: `run ${r.id} is ${r.status}, notified ${r.note_kind}` });
    }
  }
  const jobs = await sql`select status, count(*)::int as n, max(attempts)::int as max_attempts_seen,
      (count(*) filter (where attempts > max_attempts))::int as over
      from public.jobs group by status`;
  const jobsByStatus: Record<string, number> = {};
  let maxAttemptsSeen = 0;
  let jobCount = 0;
  for (const j of jobs) {
    jobsByStatus[j.status as string] = j.n as number;
    jobCount += j.n as number;
    maxAttemptsSeen = Math.max(maxAttemptsSeen, j.max_attempts_seen as number);
    if ((j.over as number) > 0) violations.push({ check: 'attempts within max', detail: `${j.over} ${j.status} jobs over their max attempts` });
  }
  for (const s of ['pending', 'running']) {
    if (jobsByStatus[s]) violations.push({ check: 'no job left active', detail: `${jobsByStatus[s]} jobs still ${s}` });
  }
  const [notes] = await sql`select count(*)::int as n from public.notifications`;
  return { runs: runs.length, runsByStatus, jobs: jobCount, jobsByStatus, notifications: notes!.n as number, maxAttemptsSeen, violations };
}

/** What the content check needs of the simulator. */
export interface SimItems {
  items(portalId: number, type: ContentType): { key: string }[];
}

export interface ContentReport {
  items: number;
  lost: number;
  duplicated: number;
  extraLive: number;
  deletedMarked: number;
  violations: Violation[];
}

/** Live content rows equal the simulator's items exactly; everything else is marked deleted. */
export async function checkContent(sql: Sql, sim: SimItems, portals: readonly { portalId: string; hubspotPortalId: number }[]): Promise<ContentReport> {
  const violations: Violation[] = [];
  let items = 0;
  let lost = 0;
  let duplicated = 0;
  let extraLive = 0;
  let deletedMarked = 0;
  for (const p of portals) {
    const rows = await sql`select content_type, hubspot_id, deleted_at is not null as deleted from public.hubspot_content where portal_id = ${p.portalId}`;
    for (const type of CONTENT_TYPES) {
      const expected = new Set(sim.items(p.hubspotPortalId, type).map((i) => i.key));
      items += expected.size;
      const live = new Map<string, number>();
      const deleted = new Set<string>();
      for (const r of rows) {
        if (r.content_type !== type) continue;
        const key = r.hubspot_id as string;
        if (r.deleted) deleted.add(key);
        else live.set(key, (live.get(key) ?? 0) + 1);
      }
      deletedMarked += deleted.size;
      const missing = [...expected].filter((k) => !live.has(k));
      const extra = [...live.keys()].filter((k) => !expected.has(k));
      const dups = [...live.entries()].filter(([, n]) => n > 1);
      lost += missing.length;
      extraLive += extra.length;
      duplicated += dups.length;
      if (missing.length) violations.push({ check: 'no item lost', detail: `portal ${p.hubspotPortalId} ${type}: ${missing.length} items missing, e.g. ${missing.slice(0, 3).join(', ')}` });
      if (extra.length) violations.push({ check: 'deleted items marked', detail: `portal ${p.hubspotPortalId} ${type}: ${extra.length} live rows HubSpot no longer has, e.g. ${extra.slice(0, 3).join(', ')}` });
      if (dups.length) violations.push({ check: 'no item duplicated', detail: `portal ${p.hubspotPortalId} ${type}: ${dups.length} duplicated` });
    }
  }
  return { items, lost, duplicated, extraLive, deletedMarked, violations };
}

export interface ExportReport {
  files: number;
  rows: number;
  violations: Violation[];
}

/**
 * Every completed export job's file: exists, parses as CSV, has the type's
 * header plus exactly result.rows records, and result.bytes bytes. With
 * `liveCounts`, jobs of runs listed there must also have exported every live row.
 */
export async function checkExports(sql: Sql, opts: { exportDir: string; exactRuns?: ReadonlySet<string> }): Promise<ExportReport> {
  const violations: Violation[] = [];
  const jobs = await sql`select j.id::text, j.run_id, j.portal_id, j.content_type, j.result,
      (select count(*)::int from public.hubspot_content c where c.portal_id = j.portal_id and c.content_type = j.content_type and c.deleted_at is null) as live
      from public.jobs j where j.kind = 'export' and j.status = 'completed' order by j.id`;
  let rows = 0;
  for (const j of jobs) {
    const result = j.result as { rows?: number; bytes?: number; location?: string } | null;
    const where = `export job ${j.id} (${j.content_type})`;
    if (!result || typeof result.location !== 'string' || typeof result.rows !== 'number') {
      violations.push({ check: 'export result', detail: `${where} has no location/rows: ${JSON.stringify(result)}` });
      continue;
    }
    let text: string;
    try {
      text = await readFile(localExportPath(opts.exportDir, result.location), 'utf8');
    } catch (e) {
      violations.push({ check: 'export file exists', detail: `${where}: ${String(e)}` });
      continue;
    }
    const size = (await stat(localExportPath(opts.exportDir, result.location))).size;
    if (typeof result.bytes === 'number' && size !== result.bytes) {
      violations.push({ check: 'export file is the one reported', detail: `${where}: file has ${size} bytes, job reported ${result.bytes}` });
    }
    let records: string[][];
    try {
      records = parseCsv(text);
    } catch (e) {
      violations.push({ check: 'export file complete', detail: `${where}: ${String(e)}` });
      continue;
    }
    const header = exportHeader(j.content_type as ContentType);
    if (JSON.stringify(records[0]) !== JSON.stringify(header)) {
      violations.push({ check: 'export header', detail: `${where}: header ${JSON.stringify(records[0])?.slice(0, 120)}` });
    }
    const bad = records.findIndex((r) => r.length !== header.length);
    if (bad >= 0) violations.push({ check: 'export record width', detail: `${where}: record ${bad} has ${records[bad]!.length} fields, header ${header.length}` });
    if (records.length - 1 !== result.rows) {
      violations.push({ check: 'export rows = result.rows', detail: `${where}: file has ${records.length - 1} records, job reported ${result.rows}` });
    }
    const ids = new Set(records.slice(1).map((r) => r[0]));
    if (ids.size !== records.length - 1) violations.push({ check: 'export rows distinct', detail: `${where}: ${records.length - 1 - ids.size} repeated ids` });
    if (opts.exactRuns?.has(j.run_id as string) && result.rows !== j.live) {
      violations.push({ check: 'final export has every live row', detail: `${where}: ${result.rows} rows, ${j.live} live` });
    }
    rows += records.length - 1;
  }
  return { files: jobs.length, rows, violations };
}

