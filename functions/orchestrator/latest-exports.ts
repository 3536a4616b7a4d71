// Export answers beyond one run: the latest completed export of each content
// type of a portal (GET /orchestrator/exports?portalId=), which fetch an
// export's content reflects, and why a job's file cannot be downloaded.
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { asUser, type TransactionSql } from '../../shared/db.ts';
import { HttpError, json } from '../../shared/http.ts';
import { freshResult, type OrchestratorDeps } from './handler.ts';
import { fieldErrors, latestExportsQuery } from './schemas.ts';

type Row = Record<string, any>;

/** Seconds a client should wait before asking again for a file still being made. */
export const EXPORT_RETRY_AFTER_SECONDS = 5;

/**
 * The fetch whose content an export read: the portal's last fetch job of the
 * type that had finished when the export began (a fetch and an export of one
 * type never overlap). Null when there is none left (retention, or never fetched).
 */
export async function fromFetchOf(tx: TransactionSql, exportJob: Row): Promise<{ runId: string; jobId: string; status: string; finishedAt: string } | null> {
  if (!exportJob.started_at) return null;
  const [f] = await tx`select id::text, run_id, status, finished_at from public.jobs
    where portal_id = ${exportJob.portal_id} and kind = 'fetch' and content_type = ${exportJob.content_type}
      and finished_at <= ${exportJob.started_at} order by finished_at desc, id desc limit 1`;
  return f ? { runId: f.run_id, jobId: f.id, status: f.status, finishedAt: f.finished_at } : null;
}

/** Why an export job that has not completed has no file: 409 EXPORT_NOT_READY (with Retry-After), EXPORT_STOPPED or EXPORT_FAILED. */
export function exportNotDownloadable(job: Row): HttpError {
  if (job.status === 'stopped') {
    return new HttpError(409, 'EXPORT_STOPPED', 'This export was stopped before it completed, so it has no file: start a new export.');
  }
  if (job.status === 'failed') {
    return new HttpError(409, 'EXPORT_FAILED', `This export failed, so it has no file: start a new export.${job.last_error ? ` (${String(job.last_error).slice(0, 300)})` : ''}`);
  }
  const s = EXPORT_RETRY_AFTER_SECONDS;
  return new HttpError(409, 'EXPORT_NOT_READY', `This export is still ${job.status === 'running' ? 'being written' : 'waiting to start'}: its file can be downloaded once it completes. Try again in ${s} s.`,
    { retryAfterSeconds: s }, { 'Retry-After': String(s) });
}

/** GET /orchestrator/exports?portalId=: the newest completed export job of each content type, with its file's fresh URL. */
export async function latestExports(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = latestExportsQuery.safeParse(Object.fromEntries(new URL(req.url).searchParams));
  if (!q.success) throw new HttpError(400, 'INVALID_QUERY', 'Pass ?portalId=<uuid>.', { fieldErrors: fieldErrors(q.error) });
  const portalId = q.data.portalId;
  const jobs = await asUser(deps.sql, user.claims, async (tx) => {
    const [portal] = await tx`select id from public.portals where id = ${portalId}`;
    if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
    const rows = await tx`select distinct on (content_type) id::text, run_id, portal_id, kind, content_type, status, result, started_at, finished_at
      from public.jobs where portal_id = ${portalId} and kind = 'export' and status = 'completed'
      order by content_type, finished_at desc, id desc`;
    for (const j of rows) j.from_fetch = await fromFetchOf(tx, j);
    return rows;
  });
  jobs.sort((a, b) => CONTENT_TYPES.indexOf(a.content_type) - CONTENT_TYPES.indexOf(b.content_type));
  const results = await Promise.all(jobs.map((j) => freshResult(deps, j)));
  return json(200, {
    exports: jobs.map((j, i) => ({ contentType: j.content_type, jobId: j.id, runId: j.run_id, finishedAt: j.finished_at, result: results[i] })),
  });
}
