// The export routes: download one export job's file (to its owner, or to a
// signed link's holder), the latest completed export of each content type of
// a portal (GET /orchestrator/exports?portalId=), and why a job's file cannot
// be downloaded.
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { CORS_HEADERS, HttpError, json } from '../../shared/http.ts';
import { downloadJob, latestCompletedExports } from '../../shared/sql/export.ts';
import type { OrchestratorDeps } from './deps.ts';
import { ExportStoreError } from './export-files.ts';
import { exportStoreFailure, FILE_GONE, freshResult } from './export-results.ts';
import { exportJobId, fieldErrors, latestExportsQuery } from './schemas.ts';

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

/**
 * Streams an export job's file: to its owner (`user`, RLS decides), or to
 * whoever holds a current signed link (`link`: the query of result.url).
 */
export async function downloadExport(deps: OrchestratorDeps, user: VerifiedUser | null, rawId: string, link?: URLSearchParams): Promise<Response> {
  const id = exportJobId.safeParse(rawId);
  if (!id.success) throw new HttpError(400, 'INVALID_PATH', 'Use /orchestrator/exports/<export job id>.', { fieldErrors: fieldErrors(id.error).map((f) => ({ ...f, path: 'jobId' })) });
  if (!user) {
    if (!deps.exportLinks || !(await deps.exportLinks.verify(id.data, link?.get('expires') ?? null, link?.get('signature') ?? null))) {
      throw new HttpError(403, 'LINK_INVALID', 'This download link is invalid or has expired: get a fresh one (result.url of GET ?runId=), or send your access token.');
    }
  }
  const job = await downloadJob(deps.sql, user ? user.claims : null, id.data);
  if (!job || job.kind !== 'export') throw new HttpError(404, 'EXPORT_NOT_FOUND', 'No such export job among yours.');
  const location = (job.result as { location?: unknown } | null)?.location;
  if (job.status !== 'completed') throw exportNotDownloadable(job);
  if (typeof location !== 'string') throw new HttpError(410, FILE_GONE.code, FILE_GONE.message);
  if (!deps.exportFiles) throw new HttpError(501, 'DOWNLOADS_UNAVAILABLE', 'This orchestrator has no export store configured (EXPORT_DIR, or SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY).');
  let file;
  try {
    file = await deps.exportFiles.open(location);
  } catch (e) {
    if (e instanceof ExportStoreError) throw exportStoreFailure(deps, job.id as string, e);
    throw e;
  }
  if (!file) throw new HttpError(410, FILE_GONE.code, FILE_GONE.message);
  const headers: Record<string, string> = {
    ...CORS_HEADERS,
    'Content-Type': 'text/csv; charset=utf-8',
    'Content-Disposition': `attachment; filename="${job.content_type}-${String(job.run_id).slice(0, 8)}.csv"`,
    'Cache-Control': 'private, no-store',
    'X-Content-Type-Options': 'nosniff',
  };
  if (file.size !== undefined) headers['Content-Length'] = String(file.size);
  deps.log.info('export_downloaded', { job_id: job.id, run_id: job.run_id });
  return new Response(file.body, { status: 200, headers });
}
