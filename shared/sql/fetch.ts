// Fetch (supabase/schemas/0350-0355): a fetch job's saved pages, its
// completion (tombstones, sync mark) and the HubDB rows stored per table.
import type { Sql } from '../db.ts';
import type { ClaimedJob } from './jobs.ts';

export interface PageCounts {
  fetched: number;
  added: number;
  updated: number;
  unchanged: number;
}

/**
 * The checkpoint a fetch job keeps: HubSpot's next cursor, and whether the last
 * page was saved; an incremental job's listing (since, phase) too. The stored
 * checkpoint holds more (maxUpdated, HubDB tables): only SQL reads those.
 */
export interface FetchCheckpoint {
  after: string | null;
  finished: boolean;
  /** hubdbSweep false: this HubDB rows cycle reads changed rows only (no sweep phase: create_run's cadence). */
  sync?: { since: string; phase: 'changed' | 'archived' | 'sweep'; hubdbSweep?: boolean };
}

/** What save_fetched_page_raw answers: the page's counts and the checkpoint it stored. */
export interface SavedRawPage extends PageCounts {
  checkpoint: FetchCheckpoint;
}

/**
 * Writes one page as HubSpot sent it (the response text, parsed by Postgres)
 * atomically for the job lease holder. `context` is the HubDB rows page's table
 * ({tableId, nextTableId, tableUpdatedAt}), null for other types. Null when fenced
 * off (nothing written); a body that is not a list response throws.
 */
export async function saveFetchedPageRaw(
  sql: Sql,
  job: Pick<ClaimedJob, 'id' | 'fencingToken'>,
  body: string,
  context: object | null = null,
): Promise<SavedRawPage | null> {
  const [row] = await sql`select public.save_fetched_page_raw(${job.id}, ${job.fencingToken}, ${body}::text,
    ${context === null ? null : sql.json(context as never)}) as counts`;
  return (row?.counts as SavedRawPage | null) ?? null;
}

/** Completes a fetch job, marking items it never saw as deleted; false when fenced off. */
export async function completeFetchJob(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>): Promise<boolean> {
  const [row] = await sql`select public.complete_fetch_job(${job.id}, ${job.fencingToken}) as ok`;
  return row?.ok === true;
}


/** Live HubDB rows stored per table of a portal (table id → count). */
export async function storedHubdbRows(sql: Sql, portalId: string): Promise<Record<string, number>> {
  const rows = await sql`select table_id, live_rows from public.stored_hubdb_rows(${portalId})`;
  return Object.fromEntries(rows.map((r) => [String(r.table_id), Number(r.live_rows)]));
}
