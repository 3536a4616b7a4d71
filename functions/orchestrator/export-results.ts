// A completed export's result as answers show it: its location as a bucket
// path, a freshly signed URL (Storage's, or a signed link to the local file),
// or why there is none; and the answer for a store that could not be asked.
import { HttpError } from '../../shared/http.ts';
import type { OrchestratorDeps } from './deps.ts';
import { ExportFileGoneError, ExportStoreError } from './export-files.ts';

/** The job fields a result is made from. */
export interface ExportResultSource {
  id: string;
  kind: string;
  status: string;
  result: Record<string, unknown> | null;
  from_fetch?: unknown;
}

/**
 * A completed export's result with a freshly signed URL when its file is in
 * Storage. When no URL can be given, `url` is null and `urlUnavailable` says
 * why (EXPORT_FILE_GONE, or the store's STORAGE_MISCONFIGURED /
 * STORAGE_UNAVAILABLE): the run itself is still answered.
 */
export async function freshResult(deps: OrchestratorDeps, job: ExportResultSource): Promise<unknown> {
  const stored = job.result as Record<string, unknown> | null;
  if (job.kind !== 'export' || job.status !== 'completed' || !stored || typeof stored.location !== 'string' || !deps.exportFiles) return stored;
  const result = { ...stored, location: deps.exportFiles.shownLocation(stored.location), fromFetch: job.from_fetch ?? null };
  try {
    const signed = (await deps.exportFiles.signedUrl(stored.location)) ?? (await localLink(deps, job, stored.location));
    return signed ? { ...result, url: signed.url, urlExpiresAt: signed.expiresAt } : result;
  } catch (e) {
    if (e instanceof ExportFileGoneError) return { ...result, url: null, urlUnavailable: { code: FILE_GONE.code, message: FILE_GONE.message } };
    const failure = exportStoreFailure(deps, job.id as string, e);
    return { ...result, url: null, urlUnavailable: { code: failure.code, message: failure.message } };
  }
}

/** A signed link to a file the store cannot sign (the local directory), when links are configured and the file is there. */
async function localLink(deps: OrchestratorDeps, job: ExportResultSource, location: string): Promise<{ url: string; expiresAt: string } | null> {
  if (!deps.exportLinks || !deps.exportFiles) return null;
  const file = await deps.exportFiles.open(location);
  if (!file) throw new ExportFileGoneError(`${location} is not there`);
  await file.body.cancel();
  return deps.exportLinks.sign(job.id as string);
}

export const FILE_GONE = { code: 'EXPORT_FILE_GONE', message: 'The export file is no longer there: export again.' } as const;

/**
 * The answer for an export file the store could not be asked about (logged for
 * the operator, without the key): 503 STORAGE_MISCONFIGURED when Storage
 * refused this server's key or lacks the bucket, 503 STORAGE_UNAVAILABLE when
 * it failed. Never "gone": the file may well be there.
 */
export function exportStoreFailure(deps: OrchestratorDeps, jobId: string, e: unknown): HttpError {
  const code = e instanceof ExportStoreError ? e.code : 'STORAGE_UNAVAILABLE';
  const error = e instanceof Error ? e.message : String(e);
  if (code === 'STORAGE_MISCONFIGURED') {
    deps.log.error('export_storage_misconfigured', { job_id: jobId, error });
    return new HttpError(503, code,
      'The export file cannot be read now: the file store refused this server\'s credentials (an operator must fix its Storage key). The file is kept: try again later.');
  }
  deps.log.warn('export_storage_unavailable', { job_id: jobId, error });
  return new HttpError(503, code, 'The export file cannot be read now: the file store did not answer. The file is kept: try again in a minute.');
}
