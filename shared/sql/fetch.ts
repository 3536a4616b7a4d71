// Fetch (supabase/schemas/0350-0359): a fetch job's saved pages, its
// completion (tombstones, sync mark), the HubDB rows stored per table, the
// HubDB tables list a run's jobs share, and a probe job's report (the answers
// as the database reads them, which a schedule probe's report shares:
// ./schedule-probe.ts).
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
  /**
   * hubdbSweep false: this HubDB rows cycle reads changed rows only (no sweep phase: create_run's cadence).
   * A sweep cycle's storedRows (live rows stored per table when the job was created) and recount (the
   * tables its changed pass wrote rows to, counted again for the sweep): decision 0056.
   */
  sync?: {
    since: string;
    phase: 'changed' | 'archived' | 'sweep';
    hubdbSweep?: boolean;
    storedRows?: Record<string, number>;
    recount?: string[];
  };
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


/** Live HubDB rows stored per table of a portal (table id → count); with `tables`, of those (0 for none). */
export async function storedHubdbRows(sql: Sql, portalId: string, tables: readonly string[] | null = null): Promise<Record<string, number>> {
  const rows = await sql`select table_id, live_rows from public.stored_hubdb_rows(${portalId}, ${tables === null ? null : [...tables]}::text[])`;
  return Object.fromEntries(rows.map((r) => [String(r.table_id), Number(r.live_rows)]));
}

/** The row ids (without `<tableId>:`) of one HubDB table's live rows stored in the portal: a sweep's comparison. */
export async function storedHubdbRowIds(sql: Sql, portalId: string, tableId: string): Promise<string[]> {
  const [row] = await sql`select public.stored_hubdb_row_ids(${portalId}, ${tableId}) as ids`;
  return (row?.ids as string[] | undefined) ?? [];
}

/**
 * take_hubdb_tables_list's answer for the run of a HubDB tables or rows job: `use` the
 * pages another job of the run stored, `wait` while another job of the run reads them,
 * or `read` them from HubSpot (the caller now holds the read lease).
 */
export type TablesListTake =
  | { decision: 'use'; pages: string[]; readAt: Date }
  | { decision: 'wait'; waitMs: number }
  | { decision: 'read' };

/** What to do for the job's run's HubDB tables list; null when fenced off. */
export async function takeHubdbTablesList(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, readSeconds: number): Promise<TablesListTake | null> {
  const [row] = await sql`select decision, pages, read_at, wait_ms from public.take_hubdb_tables_list(${job.id}, ${job.fencingToken}, ${readSeconds})`;
  if (!row) return null;
  if (row.decision === 'use') return { decision: 'use', pages: row.pages as string[], readAt: row.read_at as Date };
  if (row.decision === 'wait') return { decision: 'wait', waitMs: Number(row.wait_ms) };
  return { decision: 'read' };
}

/**
 * Stores the pages this job read for its run's other job (null: gives up the read
 * lease). Answers the pages another job of the run stored first, to be used instead;
 * null when the caller uses its own.
 */
export async function storeHubdbTablesList(sql: Sql, job: Pick<ClaimedJob, 'id' | 'fencingToken'>, pages: readonly string[] | null): Promise<string[] | null> {
  const [row] = await sql`select public.store_hubdb_tables_list(${job.id}, ${job.fencingToken}, ${pages === null ? null : [...pages]}::text[]) as pages`;
  return (row?.pages as string[] | null) ?? null;
}

/**
 * A type's answer to a probe: a CMS type's two totals, or near its last change the overlap window's page
 * (as HubSpot sent it); HubDB rows near theirs: each recently updated table's window page.
 */
export type ProbeAnswer = { changed: number; archived: number } | { window: string; archived: number } | { windows: Record<string, string> };

/** A HubDB table as a probe's decision reads it: the summary of one entry of the tables list's pages. */
interface TableSummary { id: unknown; updatedAt: unknown; rowCount: unknown }

/**
 * The answers as the database reads them: with the tables list's pages, their summary under
 * hubdb_tables (the decision never parses the pages, which it keeps only for a run's HubDB
 * jobs; decision 0062). Pages that are not JSON add none: the database then refuses the report.
 */
export function withTablesSummary(answers: Record<string, ProbeAnswer>, pages: readonly string[] | null): Record<string, unknown> {
  if (pages === null) return answers;
  const tables: TableSummary[] = [];
  try {
    for (const page of pages) {
      for (const t of (JSON.parse(page) as { results?: { id?: unknown; updatedAt?: unknown; rowCount?: unknown }[] }).results ?? []) {
        tables.push({ id: t?.id ?? null, updatedAt: t?.updatedAt ?? null, rowCount: t?.rowCount ?? null });
      }
    }
  } catch {
    return answers;
  }
  return { ...answers, hubdb_tables: { tables } };
}

/** The answers as the report's jsonb argument (null: the probe failed). */
export function reportedAnswers(sql: Sql, answers: Record<string, ProbeAnswer> | null, pages: readonly string[] | null) {
  return answers === null ? null : sql.json(withTablesSummary(answers, pages) as never);
}

/**
 * The holder of a probe reports HubSpot's answers (per CMS type probed, a
 * ProbeAnswer; the HubDB tables list's pages, when HubDB is probed); the
 * database adds the changed types' fetch jobs and completes the probe
 * (public.complete_probe_job). False when fenced off.
 */
export async function completeProbeJob(
  sql: Sql,
  job: Pick<ClaimedJob, 'id' | 'fencingToken'>,
  answers: Record<string, ProbeAnswer>,
  tablesPages: readonly string[] | null = null,
): Promise<boolean> {
  const [row] = await sql`select public.complete_probe_job(${job.id}, ${job.fencingToken}, ${reportedAnswers(sql, answers, tablesPages)},
    ${tablesPages as string[] | null}::text[]) as ok`;
  return row?.ok === true;
}
