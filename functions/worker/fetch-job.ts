// The fetch job: pages one content type from HubSpot into Postgres. Each page
// goes to the database as HubSpot's response text and is parsed and saved there
// in one fenced transaction with the next cursor, so the worker spends almost
// no CPU per item and a reclaimed job resumes where the last saved page ended.
// Before each page it asks the invocation's budget (wall clock and CPU) whether
// another page fits; when not, or when a HubSpot wait would pass the deadline,
// it releases the job (no attempt used).
import type { Sql } from '../../shared/db.ts';
import { DeadlineReached, HubSpotRateLimitError } from '../../shared/hubspot/errors.ts';
import { hubspotDailyResetAt } from '../../shared/sql/budget.ts';
import { completeFetchJob, saveFetchedPageRaw, storedHubdbRowIds, storedHubdbRows, type FetchCheckpoint } from '../../shared/sql/fetch.ts';
import { parkJob } from '../../shared/sql/jobs.ts';
import { jobContentType, lost, releaseOrLost, type JobContext, type JobOutcome, type UnitCost } from './job-context.ts';
import { runTablesList } from './tables-list.ts';

export type { FetchCheckpoint };

export function parseFetchCheckpoint(value: unknown): FetchCheckpoint {
  if (value && typeof value === 'object') {
    const v = value as Record<string, unknown>;
    const checkpoint: FetchCheckpoint = { after: typeof v.after === 'string' ? v.after : null, finished: v.finished === true };
    // An incremental job (create_run set its mode and since; save_fetched_page_raw moves its phase).
    if (v.mode === 'incremental' && typeof v.since === 'string') {
      checkpoint.sync = { since: v.since, phase: v.phase === 'archived' || v.phase === 'sweep' ? v.phase : 'changed' };
      if (v.hubdbSweep === false) checkpoint.sync.hubdbSweep = false;
      const stored = v.storedRows;
      if (stored && typeof stored === 'object' && !Array.isArray(stored) && Object.values(stored).every((n) => typeof n === 'number')) {
        checkpoint.sync.storedRows = stored as Record<string, number>;
      }
      if (Array.isArray(v.recount)) checkpoint.sync.recount = v.recount.filter((t): t is string => typeof t === 'string');
    }
    return checkpoint;
  }
  return { after: null, finished: false };
}

/**
 * The live HubDB rows stored per table that a pass of a sweep cycle compares with HubSpot's rowCount: the
 * job's storedRows, the tables its changed pass wrote to counted again for the sweep pass (decision 0056).
 * Null outside a sweep cycle.
 */
export async function storedRowsOfPass(sql: Sql, portalId: string, sync: NonNullable<FetchCheckpoint['sync']>): Promise<Record<string, number> | null> {
  if (!sync.storedRows) return null;
  const recount = sync.phase === 'sweep' && sync.recount?.length ? await storedHubdbRows(sql, portalId, sync.recount) : {};
  return { ...sync.storedRows, ...recount };
}

/** What one page (fetch + save) has cost so far: a moving average, never below the last page. */
export class PageCost {
  private samples = 0;
  private avgWall = 0;
  private avgCpu = 0;
  private lastWall = 0;
  private lastCpu = 0;

  record(wallMs: number, cpuMs: number): void {
    this.samples++;
    this.avgWall = this.samples === 1 ? wallMs : this.avgWall * 0.7 + wallMs * 0.3;
    this.avgCpu = this.samples === 1 ? cpuMs : this.avgCpu * 0.7 + cpuMs * 0.3;
    this.lastWall = wallMs;
    this.lastCpu = cpuMs;
  }

  /** The next page's expected cost (empty before the first page: the budget's own minimum applies). */
  next(): UnitCost {
    if (this.samples === 0) return {};
    return { wallMs: Math.max(this.avgWall, this.lastWall), cpuMs: Math.max(this.avgCpu, this.lastCpu) };
  }
}

/** A HubSpot wait at least this long parks the job until then, instead of releasing it to be claimed at once. */
const PARK_AFTER_MS = 5_000;

/**
 * Puts the job back until `untilMs` without using an attempt, the reason shown
 * on the job and its run (HubSpot's daily limit, or a long Retry-After), so no
 * invocation claims it only to meet the same answer.
 */
async function parkUntil(ctx: JobContext, untilMs: number, reason: string): Promise<JobOutcome> {
  const parked = await parkJob(ctx.sql, ctx.job, new Date(untilMs), reason);
  return parked ? { kind: 'released', reason } : lost(`job lease lost before parking (${reason})`);
}

/**
 * A HubSpot request that did not answer (`e`): the job parked for HubSpot's
 * daily limit or a long wait, released for a wait past the deadline, lost when
 * fenced off; any other error is thrown on (the job's failure).
 */
export async function hubspotWaitOutcome(ctx: JobContext, e: unknown): Promise<JobOutcome> {
  if (ctx.signal.aborted) return lost('job lease lost');
  if (e instanceof HubSpotRateLimitError && e.policy === 'DAILY') {
    // The day's quota (spent, or down to the operator's reserve) comes back at
    // midnight in the account's time zone; at least a minute from now.
    const midnight = await hubspotDailyResetAt(ctx.sql, ctx.job.portalId, ctx.now());
    const until = Math.max(midnight.getTime(), ctx.now() + 60_000);
    return parkUntil(ctx, until, `waiting for HubSpot's daily limit until ${new Date(until).toISOString()}`);
  }
  if (!(e instanceof DeadlineReached)) throw e;
  if (e.waitMs !== null && e.waitMs >= PARK_AFTER_MS) {
    return parkUntil(ctx, ctx.now() + e.waitMs, `HubSpot asked to wait ${Math.ceil(e.waitMs / 1000)} s`);
  }
  return releaseOrLost(ctx, `HubSpot wait past the deadline: ${e.message}`);
}

/** Runs a fetch job until done, out of budget (released) or fenced off (lost). */
export async function processFetchJob(ctx: JobContext): Promise<JobOutcome> {
  const { sql, job, signal } = ctx;
  const contentType = jobContentType(job);
  const hubspot = await ctx.hubspotForPortal(job.portalId);
  let checkpoint = parseFetchCheckpoint(job.checkpoint);
  const cost = new PageCost();
  let pages = 0;
  // A sweep cycle's read of HubDB rows compares each table's rowCount with the live rows stored: counted
  // when the job was created (its checkpoint's storedRows), the tables its changed pass wrote to counted
  // again for the sweep pass, once per claim (decision 0056). A cycle without a sweep has none: its
  // changed pass then reads every changed table, those that lost rows too.
  let storedRows = null as { phase: string; counts: Record<string, number> } | null;
  const storedRowIds = (tableId: string) => storedHubdbRowIds(sql, job.portalId, tableId);
  // The run's HubDB tables list, read once for its tables and rows jobs (decision 0045).
  const tablesList = contentType === 'hubdb_rows' || contentType === 'hubdb_tables' ? runTablesList(ctx) : undefined;

  while (!checkpoint.finished) {
    if (signal.aborted) return lost('job lease lost');
    // Every page, the first after a claim included, starts only when the budget
    // has room for it (the invocation claims only with room for one page, so a
    // claim makes progress whenever the budget allows).
    const stop = ctx.outOfBudget(cost.next());
    if (stop) return releaseOrLost(ctx, stop);
    const wall0 = ctx.now();
    const cpu0 = ctx.cpuMs();
    let page;
    try {
      const s = checkpoint.sync;
      if (contentType === 'hubdb_rows' && s?.storedRows && storedRows?.phase !== s.phase) {
        storedRows = { phase: s.phase, counts: (await storedRowsOfPass(sql, job.portalId, s))! };
      }
      const sync = s ? { since: s.since, phase: s.phase, storedRows: storedRows?.counts, storedRowIds } : null;
      page = await hubspot.fetchRawPage(contentType, checkpoint.after, signal, sync, tablesList);
    } catch (e) {
      // The checkpoint of the last saved page is already stored in each case.
      return hubspotWaitOutcome(ctx, e);
    }
    if (signal.aborted) return lost('job lease lost');
    const saved = await saveFetchedPageRaw(sql, job, page.body, page.context);
    if (!saved) return lost('fenced off while saving a page');
    cost.record(ctx.now() - wall0, ctx.cpuMs() - cpu0);
    checkpoint = parseFetchCheckpoint(saved.checkpoint);
    pages++;
  }
  ctx.log.info('fetch_pages_done', { pages });
  const completed = await completeFetchJob(sql, job);
  return completed ? { kind: 'completed' } : lost('fenced off at completion');
}
