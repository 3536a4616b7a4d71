// Export answers beyond one run: the latest completed export of each content
// type of a portal (GET /orchestrator/exports?portalId=), and why a job's file
// cannot be downloaded.
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { HttpError, json } from '../../shared/http.ts';
import { latestCompletedExports } from '../../shared/sql/export.ts';
import { freshResult, type OrchestratorDeps } from './handler.ts';
import { fieldErrors, latestExportsQuery } from './schemas.ts';

/** Seconds a client should wait before asking again for a file still being made. */
export const EXPORT_RETRY_AFTER_SECONDS = 5;

/** Why an export job that has not completed has no file: 409 EXPORT_NOT_READY (with Retry-After), EXPORT_STOPPED or EXPORT_FAILED. */
export function exportNotDownloadable(job: { status: string; last_error: string | null }): HttpError {
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
  const jobs = await latestCompletedExports(deps.sql, user.claims, portalId);
  if (!jobs) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  jobs.sort((a, b) => CONTENT_TYPES.indexOf(a.content_type) - CONTENT_TYPES.indexOf(b.content_type));
  const results = await Promise.all(jobs.map((j) => freshResult(deps, j)));
  return json(200, {
    exports: jobs.map((j, i) => ({ contentType: j.content_type, jobId: j.id, runId: j.run_id, finishedAt: j.finished_at, result: results[i] })),
  });
}
