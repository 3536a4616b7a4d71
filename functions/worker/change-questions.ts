// The questions a scheduled cycle asks HubSpot first (docs/sync.md#the-quiet-cycle;
// decisions 0046, 0049, 0055), asked alike by a probe job (./probe-job.ts) and
// a schedule probe (./schedule-probe.ts): per type, only whether anything
// changed since the type's marks (two one-item listings per CMS type, near a
// change the overlap window's first page instead of the first; the HubDB
// tables list, and near a change of HubDB rows the overlap window of each
// table updated since). The database decides on the answers.
import type { ProbeAnswer } from '../../shared/sql/fetch.ts';
import { isContentType, type ContentType } from '../../shared/content-types.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import { PermanentJobError } from './job-context.ts';

/** What a probe asks of one type (create_run wrote it into the checkpoint). */
export interface ProbeQuestion {
  type: ContentType;
  /** CMS types: the marks to ask for changes and archives after (ISO 8601). */
  updatedAfter?: string;
  archivedAfter?: string;
  /** Near the type's last change: the overlap window to list (docs/decisions/0049; HubDB rows: 0055). */
  windowAfter?: string;
}

export function parseProbeCheckpoint(value: unknown): ProbeQuestion[] {
  const types = (value as { types?: unknown } | null)?.types;
  if (!types || typeof types !== 'object') throw new PermanentJobError('The probe has no types to ask about.');
  return Object.entries(types as Record<string, { updatedAfter?: unknown; archivedAfter?: unknown; windowAfter?: unknown }>).map(([type, q]) => {
    if (!isContentType(type)) throw new PermanentJobError(`The probe names an unknown content type "${type}".`);
    if (type === 'hubdb_tables') return { type };
    if (q?.windowAfter !== undefined && typeof q.windowAfter !== 'string') throw new PermanentJobError(`The probe of ${type} has a malformed window.`);
    if (type === 'hubdb_rows') return { type, ...(q?.windowAfter !== undefined ? { windowAfter: q.windowAfter } : {}) };
    if (typeof q?.updatedAfter !== 'string' || typeof q?.archivedAfter !== 'string') {
      throw new PermanentJobError(`The probe of ${type} has no marks to ask after.`);
    }
    return { type, updatedAfter: q.updatedAfter, archivedAfter: q.archivedAfter, ...(q.windowAfter !== undefined ? { windowAfter: q.windowAfter } : {}) };
  });
}

/** HubSpot's answers to a probe's questions, and the tables list's pages when HubDB is asked about. */
export interface ProbeReport {
  answers: Record<string, ProbeAnswer>;
  tablesPages: string[] | null;
}

/**
 * HubSpot's answers for every type, asked all at once (a probe is a dozen
 * small requests: one after another they kept a lane for seconds).
 */
export async function askHubSpot(hubspot: HubSpotContentClient, questions: readonly ProbeQuestion[], signal: AbortSignal): Promise<ProbeReport> {
  const cms = questions.filter((q) => q.updatedAfter !== undefined);
  const [counted, pages] = await Promise.all([
    Promise.all(cms.map(async (q) => [q.type, q.windowAfter !== undefined
      ? await hubspot.readChangeWindow(q.type, q.windowAfter, q.archivedAfter!, signal)
      : await hubspot.countChanges(q.type, q.updatedAfter!, q.archivedAfter!, signal)] as const)),
    questions.length > cms.length ? hubspot.readTablesList(signal) : null,
  ]);
  const answers: Record<string, ProbeAnswer> = Object.fromEntries(counted);
  // HubDB rows near their last change: the overlap windows of the tables that list says were updated since.
  const rows = questions.find((q) => q.type === 'hubdb_rows' && q.windowAfter !== undefined);
  if (rows && pages) answers['hubdb_rows'] = { windows: await hubspot.readRowsWindows(pages, rows.windowAfter!, signal) };
  return { answers, tablesPages: pages };
}
