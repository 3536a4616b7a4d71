// POST /orchestrator/publish/csv?portalId=&contentType=[&plan=true]: an
// edited export uploaded as text/csv becomes pending edits, all or nothing
// (docs/publish.md). The file (at most private.publish_settings.max_csv_bytes,
// 413 over it) must be UTF-8; it is read by the strict RFC 4180 reader
// (shared/csv-parse.ts: quotes, CRLF or LF, a BOM, an empty unquoted cell
// null and "" the empty string), then Postgres compares each cell with the
// stored copy's export cell (import_csv_edits): a cell equal to the copy is
// not an edit; an unknown column, a changed read-only cell, a wrong type, an
// id not in the copy or a stale row is an error. Any error: 422 INVALID_CSV
// listing them all ({row, column, code, message}), nothing stored. With
// plan=true the type's pending edits are planned in the same transaction
// (202 with the plan; any refusal stores nothing). Counted against the
// per-user write limit before the body is read.
import type { VerifiedUser } from '../../shared/auth.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { parseCsv, type CsvParseError } from '../../shared/csv-parse.ts';
import { HttpError, json, readBodyBytes } from '../../shared/http.ts';
import { takeUserWrite } from '../../shared/sql/ops.ts';
import { createPublishPlan, importCsvEdits, publishRefusalOf, publishSettings, type CsvImportError } from '../../shared/sql/publish.ts';
import type { OrchestratorDeps } from './deps.ts';
import { portalNotFound, refusal } from './publish-routes.ts';
import { csvUploadQuery } from './publish-schemas.ts';
import { parseQuery, rateLimited } from './route-helpers.ts';

/** One error of the file: the reader's (shared/csv-parse.ts), Postgres' (import_csv_edits), or the file's own (`not_utf8`, `invalid`). */
type FileError = Pick<CsvParseError | CsvImportError, 'row' | 'column' | 'message'> & { code: string };

/** The file's errors, as the 422 answers them. */
function invalidCsv(errors: readonly FileError[]): HttpError {
  const first = errors[0];
  // Postgres' messages name the column, not the row (the reader's say both): the first one's row said here.
  const where = first && first.row !== null && !/^Row \d/.test(first.message) ? `row ${first.row}: ` : '';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more: see details.errors)` : '';
  return new HttpError(422, 'INVALID_CSV', `The file was not imported, nothing was stored: ${where}${first ? first.message : 'it is not a valid export'}${more}.`, {
    errors: errors.map((e) => ({ row: e.row, column: e.column, code: e.code, message: e.message })),
  });
}

/** The import's own errors, thrown inside its transaction so that nothing it did stays. */
class CsvRejected extends Error {
  constructor(readonly errors: CsvImportError[]) {
    super('the file has errors');
  }
}

export async function uploadCsv(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  let bodyRead = false;
  try {
    const q = parseQuery(csvUploadQuery, req, 'Pass portalId (a uuid) and contentType (an editable type); optionally plan=true, with mode and publishAt.');
    const [mediaType, ...params] = (req.headers.get('content-type') ?? '').split(';').map((s) => s.trim().toLowerCase());
    const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/"/g, '');
    if (mediaType !== 'text/csv' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
      throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the file as UTF-8 CSV with Content-Type: text/csv.');
    }
    const waitMs = await takeUserWrite(deps.sql, user.userId);
    if (waitMs > 0) throw rateLimited(waitMs);

    const settings = await publishSettings(deps.sql);
    bodyRead = true;
    const bytes = await readBodyBytes(req, settings.maxCsvBytes).catch((e) => {
      if (e instanceof HttpError && e.code === 'PAYLOAD_TOO_LARGE') {
        const size = settings.maxCsvBytes >= 1048576 ? `${+(settings.maxCsvBytes / 1048576).toFixed(1)} MiB` : `${Math.floor(settings.maxCsvBytes / 1024)} KiB`;
        throw new HttpError(413, 'PAYLOAD_TOO_LARGE', `The file must be at most ${settings.maxCsvBytes} bytes (${size}): split it by rows.`);
      }
      throw e;
    });
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); // a leading BOM is dropped
    } catch {
      throw invalidCsv([{ row: null, column: null, code: 'not_utf8', message: 'The file is not UTF-8 text: save it as "CSV UTF-8"' }]);
    }
    const parsed = parseCsv(text);
    if (!parsed.ok) throw invalidCsv(parsed.errors);
    const { header, rows } = parsed.csv;

    const contentType = q.contentType as ContentType;
    let result: { edits: number; plan: { planId: string; runId: string; items: number } | null };
    try {
      result = await deps.sql.begin(async (tx) => {
        const imported = await importCsvEdits(tx, { portalId: q.portalId, userId: user.userId, contentType, columns: header as string[], rows });
        if (imported.errors.length > 0) throw new CsvRejected(imported.errors);
        const plan = q.plan === 'true'
          ? await createPublishPlan(tx, {
            portalId: q.portalId, userId: user.userId, contentTypes: [contentType], mode: q.mode,
            publishAt: q.publishAt ? new Date(q.publishAt) : null,
          })
          : null;
        return { edits: imported.edits, plan };
      });
    } catch (e) {
      if (e instanceof CsvRejected) throw invalidCsv(e.errors);
      if ((e as { code?: unknown } | null)?.code === '23505') {
        // Another upload (or an app's edit) of the same items was stored at the same moment.
        throw new HttpError(409, 'EDITS_BUSY', 'Another change to the same items was being stored at the same time: nothing was stored; upload the file again.');
      }
      const r = publishRefusalOf(e);
      // The header itself refused whole (e.g. more columns than any export has).
      if (r?.code === 'invalid') throw invalidCsv([{ row: null, column: null, code: 'invalid', message: r.message }]);
      throw refusal(e, { notFound: portalNotFound(), busy: 'PLAN_IN_PROGRESS' });
    }
    if (result.plan) deps.wakeWorker();
    deps.log.info('publish_csv_imported', { portal_id: q.portalId, content_type: contentType, rows: rows.length, edits: result.edits, plan_id: result.plan?.planId ?? null });
    return json(result.plan ? 202 : 200, { portalId: q.portalId, contentType, rows: rows.length, edits: result.edits, plan: result.plan });
  } finally {
    if (!bodyRead) await req.body?.cancel().catch(() => {});
  }
}
