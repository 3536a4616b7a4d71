// Export (supabase/schemas/0360-0365): an export job's start, its keyset pages
// and the COPY text of its header and rows, and the reads of export jobs the
// orchestrator answers downloads with.
import type { ContentType, JobKind } from '../content-types.ts';
import { asUser, type Sql, type TransactionSql, type UserClaims } from '../db.ts';
import type { ClaimedJob, JobStatus } from './jobs.ts';

type Held = Pick<ClaimedJob, 'id' | 'fencingToken'>;

/** The holder starts an export file: its first checkpoint, and the rows it will write counted now. False: not ours any more. */
export async function beginExport(sql: Sql, job: Held, checkpoint: unknown): Promise<boolean> {
  const [row] = await sql`select public.begin_export(${job.id}, ${job.fencingToken}, ${sql.json(checkpoint as never)}) as ok`;
  return row?.ok === true;
}

/** The owner of the job's portal (for a claimed row that did not carry it). */
export async function jobOwner(sql: Sql, jobId: string): Promise<string> {
  const [row] = await sql`select owner_id from public.jobs where id = ${jobId}`;
  return String(row?.owner_id);
}

const DIGITS = /^\d{1,19}$/;

/** A bigint for the COPY text, which takes no bind parameters: digits only, or it throws. */
function int(value: string | number): string {
  const s = String(value);
  if (!DIGITS.test(s)) throw new Error(`not a non-negative integer: ${JSON.stringify(s).slice(0, 40)}`);
  return s;
}

/** `e.v[1], e.v[2], ...`: the cells of a text[] row as COPY columns. */
function columnList(width: number): string {
  return Array.from({ length: width }, (_, i) => `e.v[${i + 1}]`).join(', ');
}

/** The next keyset page after `afterId`: `held` false when fenced off; `lastId` null when no item is left. */
export async function exportPage(sql: Sql, job: Held, afterId: string, pageRows: number): Promise<{ held: boolean; lastId: string | null; rowCount: number }> {
  const [page] = await sql.unsafe(
    `select held, last_id::text as last_id, row_count from public.export_page(${int(job.id)}, ${int(job.fencingToken)}, ${int(afterId)}, ${int(pageRows)})`,
  );
  return { held: page?.held === true, lastId: (page?.last_id as string | null | undefined) ?? null, rowCount: Number(page?.row_count ?? 0) };
}

/** COPY text of the file's header line, `width` cells (the columns plus two). It inlines validated integers only. */
export function exportHeaderCopy(job: Held, width: number): string {
  return `copy (select ${columnList(width)} from public.export_header(${int(job.id)}, ${int(job.fencingToken)}) as e(v)) to stdout with (format csv)`;
}

/** COPY text of the rows after `afterId` through `throughId`, in id order. It inlines validated integers only. */
export function exportRowsCopy(job: Held, width: number, afterId: string, throughId: string): string {
  return `copy (select ${columnList(width)} from public.export_rows(${int(job.id)}, ${int(job.fencingToken)}, ${int(afterId)}, ${int(throughId)})` +
    ' with ordinality as e(v, n) order by e.n) to stdout with (format csv)';
}

/** The fetch an export read: its job and run, how it ended and when. */
export interface FromFetch {
  runId: string;
  jobId: string;
  status: string;
  finishedAt: string;
}

/**
 * The fetch whose content an export read: the portal's last fetch job of the
 * type that had finished when the export began (a fetch and an export of one
 * type never overlap). Null when there is none left (retention, or never fetched).
 */
export async function fromFetchOf(
  tx: TransactionSql, exportJob: { portal_id: string; content_type: string; started_at: Date | null },
): Promise<FromFetch | null> {
  if (!exportJob.started_at) return null;
  const [f] = await tx`select id::text, run_id, status, finished_at from public.jobs
    where portal_id = ${exportJob.portal_id} and kind = 'fetch' and content_type = ${exportJob.content_type}
      and finished_at <= ${exportJob.started_at} order by finished_at desc, id desc limit 1`;
  return f ? { runId: f.run_id, jobId: f.id, status: f.status, finishedAt: f.finished_at } : null;
}

/** A completed export job of a portal, with its fetch. */
export interface ExportJobRow {
  id: string;
  run_id: string;
  portal_id: string;
  kind: JobKind;
  content_type: ContentType;
  status: JobStatus;
  result: Record<string, unknown> | null;
  started_at: Date | null;
  finished_at: Date | null;
  from_fetch?: FromFetch | null;
}

/** The newest completed export job of each content type of the user's portal; null when the portal is not theirs. */
export async function latestCompletedExports(sql: Sql, claims: UserClaims, portalId: string): Promise<ExportJobRow[] | null> {
  return asUser(sql, claims, async (tx) => {
    const [portal] = await tx`select id from public.portals where id = ${portalId}`;
    if (!portal) return null;
    const rows = await tx<ExportJobRow[]>`select distinct on (content_type) id::text, run_id, portal_id, kind, content_type, status, result, started_at, finished_at
      from public.jobs where portal_id = ${portalId} and kind = 'export' and status = 'completed'
      order by content_type, finished_at desc, id desc`;
    for (const j of rows) j.from_fetch = await fromFetchOf(tx, j);
    return [...rows];
  });
}

/** A job asked for as a download. */
export interface DownloadJobRow {
  id: string;
  run_id: string;
  kind: JobKind;
  status: JobStatus;
  content_type: ContentType;
  result: Record<string, unknown> | null;
  last_error: string | null;
}

/** The job to download: the user's (RLS) when `claims` is given, else any (a signed link was checked); undefined when none. */
export async function downloadJob(sql: Sql, claims: UserClaims | null, jobId: string): Promise<DownloadJobRow | undefined> {
  const read = (q: Sql | TransactionSql) =>
    q<DownloadJobRow[]>`select id::text, run_id, kind, status, content_type, result, last_error from public.jobs where id = ${jobId}`;
  const [job] = claims ? await asUser(sql, claims, read) : await read(sql);
  return job;
}
