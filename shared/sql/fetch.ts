// Fetch (supabase/schemas/0350-0359, 0442-0443): a fetch job's saved pages, its
// completion (tombstones, sync mark), the HubDB rows stored per table, the
// HubDB tables list a run's jobs share, and the probes (a probe job's report,
// a schedule probe's claim and report).
import type { Sql } from '../db.ts';
import type { RateLimitHeaders } from '../rate-limit-headers.ts';
import type { BudgetArguments } from './budget.ts';
import type { FirstTokenClaim, TokenClaim } from './credentials.ts';
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
function withTablesSummary(answers: Record<string, ProbeAnswer>, pages: readonly string[] | null): Record<string, unknown> {
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
function reportedAnswers(sql: Sql, answers: Record<string, ProbeAnswer> | null, pages: readonly string[] | null) {
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

/** A schedule probe a worker lane holds (public.claim_schedule_probe; docs/decisions/0058). */
export interface ScheduleProbe {
  portalId: string;
  /** The fencing token its report must carry. */
  probeToken: string;
  /** What to ask HubSpot: {types: {type: question}} (private.probe_checkpoint); the report brings it back. */
  checkpoint: unknown;
  /** Claimed with a token holder: the portal's token as claim_portal_token answered the holder, when (this clock) it was asked. */
  token: FirstTokenClaim | null;
  /** Requests already granted from the portal's HubSpot budget for the first round of questions. */
  granted: number;
}

/** What a claim with a token holder also asks for: the portal's token and a grant of the first round's requests. */
export interface ScheduleProbeClaimArgs {
  holder: string;
  refreshLeaseSeconds: number;
  minValidSeconds: number;
  budget: BudgetArguments;
}

/** Claims the schedule probe due longest, or null when none is due; with `args`, its token and first grant too. */
export async function claimScheduleProbe(sql: Sql, args?: ScheduleProbeClaimArgs): Promise<ScheduleProbe | null> {
  const askedAt = Date.now();
  const [row] = args
    ? await sql`select portal_id, probe_token::text as probe_token, checkpoint, token, granted from public.claim_schedule_probe(
        ${args.holder}, ${args.refreshLeaseSeconds}, ${args.minValidSeconds}, ${args.budget.maxRequests}, ${args.budget.windowMs},
        ${args.budget.ceiling}, ${args.budget.dailyReservePercent})`
    : await sql`select portal_id, probe_token::text as probe_token, checkpoint, token, granted from public.claim_schedule_probe()`;
  return claimedProbe(row, args, askedAt);
}

/** A claim's row as a ScheduleProbe (null: none was due). */
function claimedProbe(row: Record<string, unknown> | undefined, args: ScheduleProbeClaimArgs | undefined, askedAt: number): ScheduleProbe | null {
  if (!row || row.portal_id === null) return null;
  const t = row.token as Record<string, unknown> | null;
  // As claim_portal_token's row reads (bigints as text).
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const claim = t && ({ ...t, hubspot_portal_id: String(t.hubspot_portal_id), token_version: String(t.token_version),
    refresh_in_ms: text(t.refresh_in_ms), expires_in_ms: text(t.expires_in_ms) } as TokenClaim);
  return {
    portalId: row.portal_id as string, probeToken: row.probe_token as string, checkpoint: row.checkpoint,
    token: args && claim ? { holder: args.holder, claim, askedAt } : null, granted: Number(row.granted ?? 0),
  };
}

/** How a schedule probe's report ended: no run, a run fetching the changes, a run taking a failed probe over. */
export type ScheduleProbeOutcome = 'quiet' | 'changed' | 'handed_over';

/** The last HubSpot answer's rate headers as the report takes them (times as ISO text). */
function headersJson(rateHeaders: RateLimitHeaders | null) {
  return rateHeaders && { ...rateHeaders, sentAt: new Date(rateHeaders.sentAt).toISOString(), answeredAt: new Date(rateHeaders.answeredAt).toISOString() };
}

/** The rate headers as the report's jsonb argument. */
function reportedHeaders(sql: Sql, rateHeaders: RateLimitHeaders | null) {
  return rateHeaders && sql.json(headersJson(rateHeaders) as never);
}

/**
 * Reports a schedule probe: HubSpot's answers (as completeProbeJob's), or null
 * when the probe failed and a run should take the cycle over
 * (public.report_schedule_probe). Null when fenced off.
 */
export async function reportScheduleProbe(
  sql: Sql,
  probe: ScheduleProbe,
  answers: Record<string, ProbeAnswer> | null,
  tablesPages: readonly string[] | null = null,
  /** The last HubSpot answer's rate headers, recorded with the report (as recordHubSpotRateHeaders would). */
  rateHeaders: RateLimitHeaders | null = null,
): Promise<ScheduleProbeOutcome | null> {
  const [row] = await sql`select public.report_schedule_probe(${probe.portalId}, ${probe.probeToken}::bigint,
    ${sql.json(probe.checkpoint as never)}, ${reportedAnswers(sql, answers, tablesPages)}, ${tablesPages as string[] | null}::text[],
    ${reportedHeaders(sql, rateHeaders)}) as outcome`;
  return (row?.outcome as ScheduleProbeOutcome | null) ?? null;
}

/** A schedule probe's report as reportScheduleProbe takes it. */
export interface ScheduleProbeReport {
  probe: ScheduleProbe;
  answers: Record<string, ProbeAnswer> | null;
  tablesPages: readonly string[] | null;
  rateHeaders: RateLimitHeaders | null;
}

/**
 * Reports a lane's probes as reportScheduleProbe does, in order, and claims up
 * to `claims` next ones as claimScheduleProbe does with `next`, in one call
 * (public.report_and_claim_schedule_probes, decisions 0061, 0065): outcomes[n]
 * is reports[n]'s (null: fenced off); with claims, jobsWaiting: whether
 * claim_jobs would find a job now (decision 0063). No reports: a lane's first claim.
 */
export async function reportAndClaimScheduleProbes(
  sql: Sql,
  reports: readonly ScheduleProbeReport[],
  claims: number,
  next: ScheduleProbeClaimArgs | null,
): Promise<{ outcomes: (ScheduleProbeOutcome | null)[]; next: ScheduleProbe[]; jobsWaiting: boolean }> {
  const askedAt = Date.now();
  const json = reports.map((r) => ({
    portal_id: r.probe.portalId, probe_token: r.probe.probeToken, checkpoint: r.probe.checkpoint,
    answers: r.answers && withTablesSummary(r.answers, r.tablesPages), tables_pages: r.tablesPages,
    rate_headers: headersJson(r.rateHeaders),
  }));
  // Without `next` nothing is claimed, and the claim's arguments are never read.
  const rows = await sql`select ordinality, outcome, portal_id, probe_token::text as probe_token, checkpoint, token, granted, jobs_waiting
    from public.report_and_claim_schedule_probes(${sql.json(json as never)}, ${next ? claims : 0}, ${next?.holder ?? null},
      ${next?.refreshLeaseSeconds ?? null}, ${next?.minValidSeconds ?? null}, ${next?.budget.maxRequests ?? null},
      ${next?.budget.windowMs ?? null}, ${next?.budget.ceiling ?? null}, ${next?.budget.dailyReservePercent ?? null})
    order by ordinality`;
  return {
    outcomes: reports.map((_, n) => (rows[n]?.outcome as ScheduleProbeOutcome | null) ?? null),
    next: rows.map((row) => claimedProbe(row, next ?? undefined, askedAt)).filter((p): p is ScheduleProbe => p !== null),
    jobsWaiting: rows[0]?.jobs_waiting === true,
  };
}
