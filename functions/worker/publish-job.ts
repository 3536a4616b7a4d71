// The publish job (docs/publish.md): applies one content type of an approved
// plan in batches. Each batch re-reads its items from HubSpot and hands the
// answer, as text, to Postgres (prepare_publish_batch), which decides per item
// (conflict, already there, its own earlier write, or to write now), keeps the
// pre-images and counts each write before it is sent; the write follows at
// once (publish-io.ts), and HubSpot's answer goes back to Postgres
// (record_publish_batch). The worker never sends a write Postgres did not hand
// it, nor one twice for one prepare: a write whose outcome is unknown (a 5xx,
// a timeout, a dropped connection) is not sent again; the next batch re-reads
// its items, and Postgres recognises a write that landed.
//
// After the last batch, the publish window check: one paged read of HubSpot's
// audit log (newest first) over the job's publish window (publish_job_context:
// from the earliest re-read to just after the latest write, on HubSpot's
// clock) finds edits that landed between a re-read and our write
// (record_window_events marks those items `overwritten`, telling our own
// writer's events, a draft PATCH among them, from another's), and each such
// page or post's revisions give the revision to restore. Blog authors and tags
// have no audit events, HubDB rows' events name only their table: those
// publish windows are not checked (docs/publish.md says what each type can
// detect).
//
// Budget, release, parking and fencing as the fetch job: the budget is asked
// before each batch, a HubSpot wait past the deadline releases the job, the
// daily limit parks it, and a fenced-off call ends the job's work at once.
import { HubSpotTransientError } from '../../shared/hubspot/errors.ts';
import { auditObjectType, nextAuditCursor, nextCursor, type HubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { completeJob } from '../../shared/sql/jobs.ts';
import {
  nextPublishItems, overwrittenPublishItems, preparePublishBatch, publishJobContext, recordOverwrittenRevision, recordPublishBatch,
  recordWindowEvents, type ItemToWrite, type OverwrittenItem,
} from '../../shared/sql/publish.ts';
import type { Sql } from '../../shared/db.ts';
import { hubspotWaitOutcome, PageCost } from './fetch-job.ts';
import { jobContentType, lost, PermanentJobError, releaseOrLost, type JobContext, type JobOutcome } from './job-context.ts';
import { writeClientOf } from './plan-job.ts';
import { batchSize, isVersioned, LIVE, readItems, writeItems, type WriteMode } from './publish-io.ts';

/** Writes in a row whose outcome stayed unknown before the job gives up this attempt (retried later, re-reading first). */
const MAX_UNKNOWN_WRITES = 3;
/** Revisions read per page while looking for the one a foreign edit left. */
const REVISIONS_PAGE = 20;

type Held = JobContext['job'];

/** What a publish or restore job does with a batch: its re-read's decision and its answer's record, and how it writes. */
export interface ApplyPhase {
  /** `readAt`: HubSpot's time of the re-read when its answer carries none (readItems). */
  prepare(sql: Sql, job: Held, itemIds: readonly string[], body: string, readAt: Date | null): Promise<ItemToWrite[] | null>;
  record(sql: Sql, job: Held, itemIds: readonly string[], status: number, body: string): Promise<unknown>;
  writing: WriteMode;
  /** Batches sized as for this mode instead (a restore of a scheduled plan: drafts written one by one). */
  batchesAs?: WriteMode;
}

/**
 * Applies the job's batches until none is left (null), or ends the job's
 * work (its outcome: released, parked, lost). Throws what fails the attempt.
 */
export async function applyBatches(ctx: JobContext, hs: HubSpotWriteClient, type: ContentType, phase: ApplyPhase): Promise<JobOutcome | null> {
  const { sql, job, signal } = ctx;
  const cost = new PageCost();
  let unknownInARow = 0;
  for (;;) {
    if (signal.aborted) return lost('job lease lost');
    const stop = ctx.outOfBudget(cost.next());
    if (stop) return releaseOrLost(ctx, stop);
    const wall0 = ctx.now();
    const cpu0 = ctx.cpuMs();
    const items = await nextPublishItems(sql, job, batchSize(type, phase.batchesAs ?? phase.writing));
    if (items === null) return lost('fenced off reading the next items');
    if (items.length === 0) return null;
    const ids = items.map((i) => i.itemId);
    let reread: Awaited<ReturnType<typeof readItems>>;
    try {
      reread = await readItems(hs, type, items.map((i) => i.hubspotId), signal);
    } catch (e) {
      return hubspotWaitOutcome(ctx, e);
    }
    if (signal.aborted) return lost('job lease lost');
    const toWrite = await phase.prepare(sql, job, ids, reread.body, reread.readAt);
    if (toWrite === null) return lost('fenced off preparing a batch');
    if (toWrite.length > 0) {
      // Counted already; not sent when the job is no longer ours (the next holder's re-read decides).
      if (signal.aborted) return lost('job lease lost before a write');
      let result;
      try {
        result = await writeItems(hs, type, toWrite, phase.writing, signal);
      } catch (e) {
        return hubspotWaitOutcome(ctx, e); // not sent: the items stay `writing`, the next re-read decides
      }
      if (result.answer) {
        const recorded = await phase.record(sql, job, toWrite.map((w) => w.itemId), result.answer.status, result.answer.body);
        if (recorded === null) return lost('fenced off recording a write');
      }
      if (result.stoppedBy !== null) return hubspotWaitOutcome(ctx, result.stoppedBy);
      if (result.unknown > 0) {
        unknownInARow++;
        ctx.log.warn('publish_write_outcome_unknown', { items: result.unknown, in_a_row: unknownInARow });
        if (unknownInARow >= MAX_UNKNOWN_WRITES) {
          throw new HubSpotTransientError(`${unknownInARow} writes in a row got no answer (their items are re-read on the next attempt)`, null);
        }
        continue; // the same items first: re-read, and Postgres recognises what landed
      }
      unknownInARow = 0;
    }
    cost.record(ctx.now() - wall0, ctx.cpuMs() - cpu0);
  }
}

/** How the plan says pages and posts are written (every other type: live); null when fenced off. */
async function writeModeOf(ctx: JobContext, type: ContentType): Promise<WriteMode | null> {
  const plan = await publishJobContext(ctx.sql, ctx.job);
  if (!plan) return null;
  if (!isVersioned(type)) return LIVE;
  if (plan.mode === 'schedule' && !plan.publishAt) throw new PermanentJobError('A scheduled plan has no publish time.');
  return { mode: plan.mode, publishAt: plan.publishAt };
}

/** Runs a publish job until applied and checked (completed), out of budget (released) or fenced off (lost). */
export async function processPublishJob(ctx: JobContext): Promise<JobOutcome> {
  const type = jobContentType(ctx.job);
  const hs = await writeClientOf(ctx);
  const writing = await writeModeOf(ctx, type);
  if (!writing) return lost('fenced off reading the plan');
  const applied = await applyBatches(ctx, hs, type, { prepare: preparePublishBatch, record: recordPublishBatch, writing });
  if (applied) return applied;
  const checked = await checkPublishWindow(ctx, hs, type);
  if ('kind' in checked) return checked;
  ctx.log.info('publish_batches_done', { audit_pages: checked.auditPages, overwritten: checked.overwritten });
  const completed = await completeJob(ctx.sql, ctx.job, { audit_pages: checked.auditPages, overwritten: checked.overwritten });
  return completed ? { kind: 'completed' } : lost('fenced off at completion');
}

/**
 * The publish window check (see the header): the audit log over the job's
 * publish window read page by page, newest first, into record_window_events,
 * then each overwritten page's or post's revision recorded. Resumable: a released job checks again on its
 * next claim (the calls add only what is new).
 */
async function checkPublishWindow(ctx: JobContext, hs: HubSpotWriteClient, type: ContentType): Promise<JobOutcome | { auditPages: number; overwritten: number }> {
  const { sql, signal } = ctx;
  const objectType = auditObjectType(type);
  // HubDB events name the table, not the row.
  if (objectType === null || type === 'hubdb_rows') return { auditPages: 0, overwritten: 0 };
  const context = await publishJobContext(sql, ctx.job);
  if (context === null) return lost('fenced off reading the publish window');
  const publishWindow = context.publishWindow;
  if (publishWindow === null) return { auditPages: 0, overwritten: 0 };
  let cursor: string | null = null;
  let auditPages = 0;
  let overwritten = 0;
  do {
    if (signal.aborted) return lost('job lease lost');
    const stop = ctx.outOfBudget();
    if (stop) return releaseOrLost(ctx, stop);
    let page: string;
    try {
      page = await hs.auditLog({ objectType, after: publishWindow.after, before: publishWindow.before, cursor }, signal);
    } catch (e) {
      return hubspotWaitOutcome(ctx, e);
    }
    const marked = await recordWindowEvents(sql, ctx.job, page);
    if (marked === null) return lost('fenced off recording window events');
    overwritten += marked;
    auditPages++;
    cursor = nextAuditCursor(page, publishWindow.after);
  } while (cursor !== null);
  if (!isVersioned(type)) return { auditPages, overwritten };
  const items = await overwrittenPublishItems(sql, ctx.job);
  if (items === null) return lost('fenced off reading the overwritten items');
  for (const item of items) {
    if (signal.aborted) return lost('job lease lost');
    const stop = ctx.outOfBudget();
    if (stop) return releaseOrLost(ctx, stop);
    let revisionId: string | null;
    try {
      revisionId = await revisionBefore(hs, type, item, signal);
    } catch (e) {
      return hubspotWaitOutcome(ctx, e);
    }
    if (revisionId === null) continue;
    if ((await recordOverwrittenRevision(sql, ctx.job, item.itemId, revisionId)) === null) return lost('fenced off recording a revision');
  }
  return { auditPages, overwritten };
}

/**
 * The revision a foreign edit left just before our write: the newest of the
 * item's revisions (newest first) stamped strictly between its pre-image's
 * update time and ours; null when none is (HubSpot kept none).
 */
async function revisionBefore(
  hs: HubSpotWriteClient, type: Parameters<HubSpotWriteClient['revisions']>[0], item: OverwrittenItem, signal: AbortSignal,
): Promise<string | null> {
  const from = item.preUpdatedAt.getTime();
  const ours = item.appliedUpdatedAt.getTime();
  let after: string | null = null;
  do {
    const text = await hs.revisions(type, item.hubspotId, { limit: REVISIONS_PAGE, after }, signal);
    // A page of a few revisions of one item: parsed here.
    const results = (JSON.parse(text) as { results?: { id?: unknown; updatedAt?: unknown }[] }).results ?? [];
    for (const r of results) {
      const at = Date.parse(String(r.updatedAt));
      if (at > from && at < ours) return String(r.id);
      if (at <= from) return null;
    }
    after = nextCursor(text);
  } while (after !== null);
  return null;
}
