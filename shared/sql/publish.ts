// Publish (supabase/schemas/0470-0502): edits into plans, plans approved into
// publish runs, publish runs rolled back; the plan, publish and restore jobs'
// holder calls (HubSpot's answers go in as text: Postgres parses them); and
// the owner's reads of plans, items and the audit CSV, made as the user (RLS).
// docs/publish.md. Ids of items and jobs are bigint, kept as strings.
import type { ContentType } from '../content-types.ts';
import { asUser, type Sql, type TransactionSql, type UserClaims } from '../db.ts';
import type { ClaimedJob } from './jobs.ts';

type Held = Pick<ClaimedJob, 'id' | 'fencingToken'>;
type Row = Record<string, unknown>;

export type PublishMode = 'live' | 'draft' | 'schedule';
export type PublishPlanStatus = 'planning' | 'ready' | 'approved' | 'failed' | 'discarded';
export type PlanStatus = 'ready' | 'conflict' | 'invalid' | 'unchanged' | 'missing';
/** An item's apply outcome (publish_items.outcome; its CHECK lists the same). */
export const ITEM_OUTCOMES = ['writing', 'applied', 'scheduled', 'unchanged', 'conflict', 'invalid', 'failed', 'overwritten'] as const;
export type ItemOutcome = (typeof ITEM_OUTCOMES)[number];
/** An item's rollback outcome (publish_items.restore_outcome). */
export const RESTORE_OUTCOMES = ['restoring', 'restored', 'conflict', 'invalid', 'failed'] as const;
export type RestoreOutcome = (typeof RESTORE_OUTCOMES)[number];

/**
 * A refusal of one of the user-facing calls, as the HTTP API answers it:
 * `code` is machine-readable (the SQL error's hint, else its class: `not_found`,
 * `invalid`, `busy`, `conflict`, `too_many`), `status` the HTTP status.
 */
export class PublishRefusal extends Error {
  constructor(readonly code: string, readonly status: 400 | 404 | 409 | 413, message: string) {
    super(message);
    this.name = 'PublishRefusal';
  }
}

/** The refusal a publish function raised (SQLSTATE and hint), or null for any other error. */
export function publishRefusalOf(e: unknown): PublishRefusal | null {
  if (e instanceof PublishRefusal) return e;
  const err = e as { code?: unknown; hint?: unknown; message?: unknown } | null;
  if (typeof err?.code !== 'string') return null;
  const hint = typeof err.hint === 'string' && /^[a-z_]{1,40}$/.test(err.hint) ? err.hint : null;
  const message = String(err.message ?? '').replace(/^[a-z_]+: /, '');
  switch (err.code) {
    case 'P0002': return new PublishRefusal(hint ?? 'not_found', 404, message);
    case '55000': return new PublishRefusal(hint ?? 'conflict', 409, message);
    case '55006': return new PublishRefusal(hint ?? 'busy', 409, message);
    case '54000': return new PublishRefusal(hint ?? 'too_many', 413, message);
    case '22023': case '22004': case '22P02': return new PublishRefusal(hint ?? 'invalid', 400, message);
    default: return null;
  }
}

/** Runs a user-facing call, its refusals thrown as PublishRefusal. */
async function refusing<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw publishRefusalOf(e) ?? e;
  }
}

/** Runs a holder call; null when the caller no longer holds the job (55000: stop working on it). */
async function held<T>(call: () => Promise<T>): Promise<T | null> {
  try {
    return await call();
  } catch (e) {
    if ((e as { code?: unknown } | null)?.code === '55000') return null;
    throw e;
  }
}

/** private.publish_settings: approvable minutes, items per HubSpot batch request, CSV bytes per import, edits per plan. */
export interface PublishSettings {
  planFreshMinutes: number;
  batchSize: number;
  maxCsvBytes: number;
  maxEditsPerPlan: number;
}

/** The publish settings (one row; operators change them in SQL). */
export async function publishSettings(sql: Sql): Promise<PublishSettings> {
  const [row] = await sql`select plan_fresh_minutes, batch_size, max_csv_bytes, max_edits_per_plan from private.publish_settings where id`;
  if (!row) throw new Error('private.publish_settings has no row');
  return { planFreshMinutes: row.plan_fresh_minutes, batchSize: row.batch_size, maxCsvBytes: row.max_csv_bytes, maxEditsPerPlan: row.max_edits_per_plan };
}

// ---------- edits and plans (the orchestrator, for the signed-in user) ----------

export interface CreatePlanInput {
  portalId: string;
  userId: string;
  /** Only these types' pending edits (default: all). */
  contentTypes?: readonly ContentType[] | null;
  mode?: PublishMode;
  /** With mode `schedule`: when HubSpot publishes. */
  publishAt?: Date | null;
}

/** A plan of the portal's pending edits and the plan run that reads them; throws PublishRefusal. `sql` may be a transaction (an upload's import and plan together). */
export async function createPublishPlan(sql: Sql | TransactionSql, input: CreatePlanInput): Promise<{ planId: string; runId: string; items: number }> {
  return refusing(async () => {
    const [row] = await sql`select plan_id, run_id, items from public.create_publish_plan(${input.portalId}, ${input.userId},
      ${(input.contentTypes ?? null) as string[] | null}, ${input.mode ?? 'live'}, ${input.publishAt ?? null})`;
    if (!row) throw new Error('create_publish_plan returned no row');
    return { planId: row.plan_id as string, runId: row.run_id as string, items: row.items as number };
  });
}

/** One error of a CSV import: its data row (1-based; null for the header), column, code and message. */
export interface CsvImportError {
  row: number | null;
  column: string | null;
  code: 'unknown_column' | 'duplicate_column' | 'missing_column' | 'row_shape' | 'not_in_copy' | 'duplicate_row' | 'stale'
    | 'read_only' | 'wrong_type' | 'too_many_errors';
  message: string;
}

export interface CsvImportInput {
  portalId: string;
  userId: string;
  contentType: ContentType;
  /** The header, as the file has it. */
  columns: readonly string[];
  /** The data rows, each a cell per column: a string, or null for an empty unquoted cell. */
  rows: readonly (readonly (string | null)[])[];
}

/** Pending edits from an edited export, all or nothing: `errors` empty and `edits` stored, or the errors and nothing stored. `sql` may be a transaction. */
export async function importCsvEdits(sql: Sql | TransactionSql, input: CsvImportInput): Promise<{ edits: number; errors: CsvImportError[] }> {
  return refusing(async () => {
    const [row] = await sql`select edits, errors from public.import_csv_edits(${input.portalId}, ${input.userId}, ${input.contentType},
      ${input.columns as string[]}, ${sql.json(input.rows as never)})`;
    if (!row) throw new Error('import_csv_edits returned no row');
    return { edits: row.edits as number, errors: row.errors as CsvImportError[] };
  });
}

/** Approves the user's fresh plan: its publish run's id; throws PublishRefusal (not_found, already_approved, stale, busy, …). */
export async function approvePublishPlan(sql: Sql, planId: string, userId: string): Promise<string> {
  return refusing(async () => {
    const [row] = await sql`select public.approve_publish_plan(${planId}, ${userId}) as run_id`;
    return row!.run_id as string;
  });
}

/** Rolls the user's finished publish run back: the restore run's id; throws PublishRefusal. */
export async function rollbackPublishRun(sql: Sql, runId: string, userId: string): Promise<string> {
  return refusing(async () => {
    const [row] = await sql`select public.rollback_publish_run(${runId}, ${userId}) as run_id`;
    return row!.run_id as string;
  });
}

/** Drops the user's unapproved plan, its edits pending again; false when it was discarded already. Throws PublishRefusal. */
export async function discardPublishPlan(sql: Sql, planId: string, userId: string): Promise<boolean> {
  return refusing(async () => {
    const [row] = await sql`select public.discard_publish_plan(${planId}, ${userId}) as ok`;
    return row?.ok === true;
  });
}

// ---------- the jobs' holder calls (the worker) ----------

/** An item a plan, publish or restore job still has to handle. */
export interface ItemToHandle {
  itemId: string;
  hubspotId: string;
  /** The edit's patch (target values). */
  after: Record<string, unknown>;
  /** HubSpot's values of those fields as the plan read them; for a restore, what it writes back (the pre-image's). */
  before: Record<string, unknown> | null;
  /** The phase's state: plan_status (a plan: null), outcome (publish) or restore_outcome (restore). */
  state: string | null;
  /** Write requests that carried it so far (restore: its own count). */
  writes: number;
}

/** The job's next items to handle, in id order; null when fenced off. */
export async function nextPublishItems(sql: Sql, job: Held, limit: number): Promise<ItemToHandle[] | null> {
  return held(async () => {
    const rows = await sql`select item_id::text, hubspot_id, after, before, state, writes
      from public.next_publish_items(${job.id}, ${job.fencingToken}, ${limit})`;
    return rows.map((r: Row) => ({
      itemId: r.item_id as string, hubspotId: r.hubspot_id as string, after: r.after as Record<string, unknown>,
      before: (r.before as Record<string, unknown> | null) ?? null, state: (r.state as string | null) ?? null, writes: r.writes as number,
    }));
  });
}

export interface PlanBatchCounts {
  ready: number;
  conflict: number;
  invalid: number;
  unchanged: number;
  missing: number;
}

/** A plan job's batch: HubSpot's batch/read answer text classifies the items; null when fenced off. */
export async function recordPlanBatch(sql: Sql, job: Held, itemIds: readonly string[], body: string): Promise<PlanBatchCounts | null> {
  return held(async () => {
    const [row] = await sql`select public.record_plan_batch(${job.id}, ${job.fencingToken}, ${itemIds as string[]}::bigint[], ${body}) as counts`;
    return row!.counts as PlanBatchCounts;
  });
}

/** An item to write now, with the fields to send (publish: the targets; restore: the pre-image's values). */
export interface ItemToWrite {
  itemId: string;
  hubspotId: string;
  fields: Record<string, unknown>;
  /** A restore of a scheduled item not live yet: its draft is written back, not the live item. */
  draft?: boolean;
}

/**
 * A publish job's re-read of a batch (HubSpot's batch/read answer text), just
 * before its write: the items to write now, each write counted before it is
 * sent; null when fenced off. `readAt`: when HubSpot answered the read by its
 * own clock, for answers without a `startedAt` (a redirect's GET: its Date
 * header); the item's publish window starts there.
 */
export async function preparePublishBatch(
  sql: Sql, job: Held, itemIds: readonly string[], body: string, readAt: Date | null = null,
): Promise<ItemToWrite[] | null> {
  return held(async () => {
    const rows = await sql`select item_id::text, hubspot_id, after
      from public.prepare_publish_batch(${job.id}, ${job.fencingToken}, ${itemIds as string[]}::bigint[], ${body}, ${readAt})`;
    return rows.map((r: Row) => ({ itemId: r.item_id as string, hubspotId: r.hubspot_id as string, fields: r.after as Record<string, unknown> }));
  });
}

/** What recording a publish job's write did to the batch's items. */
export interface PublishBatchCounts {
  applied: number;
  /** Mode schedule: the draft written and scheduled (nothing live yet). */
  scheduled: number;
  invalid: number;
  /** Sent, no answer: the next re-read decides. */
  writing: number;
}

/** HubSpot's answer to a publish job's write (status 200/207, or a 4xx refusal but 429); null when fenced off. */
export async function recordPublishBatch(
  sql: Sql, job: Held, itemIds: readonly string[], status: number, body: string,
): Promise<PublishBatchCounts | null> {
  return held(async () => {
    const [row] = await sql`select public.record_publish_batch(${job.id}, ${job.fencingToken}, ${itemIds as string[]}::bigint[],
      ${status}, ${body}) as counts`;
    return row!.counts as PublishBatchCounts;
  });
}

/** A publish job's plan as its holder reads it: how pages and posts are written, and its publish window so far. */
export interface PublishJobContext {
  mode: PublishMode;
  /** Mode `schedule`: when HubSpot publishes. */
  publishAt: Date | null;
  /**
   * The job's publish window: where its window events can be, on HubSpot's
   * clock (events strictly between `after` and `before`), over `items` written
   * items; null while none is written.
   */
  publishWindow: { after: Date; before: Date; items: number } | null;
}

/** The holder's publish job's mode and publish window (public.publish_job_context); null when fenced off. */
export async function publishJobContext(sql: Sql, job: Held): Promise<PublishJobContext | null> {
  return held(async () => {
    const [row] = await sql`select mode, publish_at, window_after, window_before, written
      from public.publish_job_context(${job.id}, ${job.fencingToken})`;
    if (!row) throw new Error('publish_job_context returned no row');
    const written = row.written as number;
    return {
      mode: row.mode as PublishMode,
      publishAt: (row.publish_at as Date | null) ?? null,
      publishWindow: written > 0 && row.window_after && row.window_before
        ? { after: row.window_after as Date, before: row.window_before as Date, items: written }
        : null,
    };
  });
}

/** An item of the job found overwritten in its publish window, its revision not yet recorded. */
export interface OverwrittenItem {
  itemId: string;
  hubspotId: string;
  preUpdatedAt: Date;
  appliedUpdatedAt: Date;
}

/** The holder's publish job's overwritten items without a revision to restore, in id order; null when fenced off. */
export async function overwrittenPublishItems(sql: Sql, job: Held): Promise<OverwrittenItem[] | null> {
  return held(async () => {
    const rows = await sql`select item_id::text, hubspot_id, pre_updated_at, applied_updated_at
      from public.overwritten_publish_items(${job.id}, ${job.fencingToken})`;
    return rows.map((r: Row) => ({
      itemId: r.item_id as string, hubspotId: r.hubspot_id as string,
      preUpdatedAt: r.pre_updated_at as Date, appliedUpdatedAt: r.applied_updated_at as Date,
    }));
  });
}

/** An audit-log page read after the writes: the items a foreign edit overwrote in the publish window become `overwritten`; null when fenced off. */
export async function recordWindowEvents(sql: Sql, job: Held, body: string): Promise<number | null> {
  return held(async () => {
    const [row] = await sql`select public.record_window_events(${job.id}, ${job.fencingToken}, ${body}) as n`;
    return Number(row!.n);
  });
}

/** The revision to restore for an overwritten item; false when the item is not overwritten, null when fenced off. */
export async function recordOverwrittenRevision(sql: Sql, job: Held, itemId: string, revisionId: string): Promise<boolean | null> {
  return held(async () => {
    const [row] = await sql`select public.record_overwritten_revision(${job.id}, ${job.fencingToken}, ${itemId}, ${revisionId}) as ok`;
    return row?.ok === true;
  });
}

/**
 * A restore job's re-read of a batch: the items to write back now (the
 * pre-image's values; `draft`: a scheduled item's draft), each counted first;
 * null when fenced off.
 */
export async function prepareRestoreBatch(sql: Sql, job: Held, itemIds: readonly string[], body: string): Promise<ItemToWrite[] | null> {
  return held(async () => {
    const rows = await sql`select item_id::text, hubspot_id, before, draft
      from public.prepare_restore_batch(${job.id}, ${job.fencingToken}, ${itemIds as string[]}::bigint[], ${body})`;
    return rows.map((r: Row) => ({
      itemId: r.item_id as string, hubspotId: r.hubspot_id as string, fields: r.before as Record<string, unknown>,
      ...(r.draft === true ? { draft: true } : {}),
    }));
  });
}

/** HubSpot's answer to a restore job's write; null when fenced off. */
export async function recordRestoreBatch(
  sql: Sql, job: Held, itemIds: readonly string[], status: number, body: string,
): Promise<{ restored: number; invalid: number; restoring: number } | null> {
  return held(async () => {
    const [row] = await sql`select public.record_restore_batch(${job.id}, ${job.fencingToken}, ${itemIds as string[]}::bigint[],
      ${status}, ${body}) as counts`;
    return row!.counts as { restored: number; invalid: number; restoring: number };
  });
}

// ---------- the owner's reads (RLS) ----------

/** A plan as its owner reads it. */
export interface PublishPlanRow {
  id: string;
  portal_id: string;
  created_by: string;
  created_at: Date;
  content_types: ContentType[];
  status: PublishPlanStatus;
  mode: PublishMode;
  publish_at: Date | null;
  plan_run_id: string | null;
  planned_at: Date | null;
  fresh_until: Date | null;
  approved_by: string | null;
  approved_at: Date | null;
  publish_run_id: string | null;
  restored_by: string | null;
  restored_at: Date | null;
  restore_run_id: string | null;
  items_total: number;
  items_ready: number;
  items_conflict: number;
  items_invalid: number;
  items_unchanged: number;
  items_missing: number;
}

const PLAN_COLUMNS = `id, portal_id, created_by, created_at, content_types, status, mode, publish_at, plan_run_id, planned_at, fresh_until,
  approved_by, approved_at, publish_run_id, restored_by, restored_at, restore_run_id,
  items_total, items_ready, items_conflict, items_invalid, items_unchanged, items_missing`;

/** The user's plan, or null when it is not theirs. */
export async function publishPlan(sql: Sql, claims: UserClaims, planId: string): Promise<PublishPlanRow | null> {
  const [row] = await asUser(sql, claims, (tx) => tx<PublishPlanRow[]>`select ${tx.unsafe(PLAN_COLUMNS)} from public.publish_plans where id = ${planId}`);
  return row ?? null;
}

/** A plan of the plans list, with its keyset position (`cursor_at`: created_at in microseconds, UTC). */
export interface PublishPlanListRow extends PublishPlanRow {
  cursor_at: string;
}

/**
 * The user's plans of a portal, newest first (keyset on created_at and id,
 * after `after`: a previous row's cursor_at and id); `limit + 1` rows, so the
 * caller knows whether more follow.
 */
export async function publishPlans(
  sql: Sql, claims: UserClaims, q: { portalId: string; limit: number; after?: { at: string; id: string } | null },
): Promise<PublishPlanListRow[]> {
  return asUser(sql, claims, async (tx) => [...await tx<PublishPlanListRow[]>`select ${tx.unsafe(PLAN_COLUMNS)},
      to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at
    from public.publish_plans
    where portal_id = ${q.portalId}
      -- ::text first: a parameter typed timestamptz would pass through a JS Date and lose the microseconds.
      ${q.after ? tx`and (created_at, id) < (${q.after.at}::text::timestamptz, ${q.after.id}::uuid)` : tx``}
    order by created_at desc, id desc limit ${q.limit + 1}`]);
}

/** An item of a plan as its owner reads it (id as text). */
export interface PublishItemRow {
  id: string;
  content_type: ContentType;
  hubspot_id: string;
  edit_id: string | null;
  base_updated_at: Date;
  after: Record<string, unknown>;
  before: Record<string, unknown> | null;
  current: Record<string, unknown> | null;
  planned_updated_at: Date | null;
  plan_status: PlanStatus | null;
  plan_message: string | null;
  outcome: ItemOutcome | null;
  outcome_message: string | null;
  pre_updated_at: Date | null;
  applied_updated_at: Date | null;
  answer: unknown;
  overwritten_by: unknown;
  overwritten_revision_id: string | null;
  restore_outcome: RestoreOutcome | null;
  restore_message: string | null;
  restored_updated_at: Date | null;
  writes: number;
}

/** A page of the user's plan's items by id (after `afterId`), perhaps of one plan status, outcome or restore outcome. */
export async function publishItems(
  sql: Sql, claims: UserClaims,
  q: { planId: string; afterId?: string | null; limit: number; planStatus?: PlanStatus; outcome?: ItemOutcome; restoreOutcome?: RestoreOutcome },
): Promise<PublishItemRow[]> {
  return asUser(sql, claims, async (tx) => [...await tx<PublishItemRow[]>`
    select i.id::text, i.content_type, i.hubspot_id, i.edit_id::text, i.base_updated_at, i.after, i.before, i.current, i.planned_updated_at,
           i.plan_status, i.plan_message, i.outcome, i.outcome_message, i.pre_updated_at, i.applied_updated_at, i.answer, i.overwritten_by,
           i.overwritten_revision_id, i.restore_outcome, i.restore_message, i.restored_updated_at, i.writes
      from public.publish_items i
     where i.plan_id = ${q.planId}
       ${q.afterId ? tx`and i.id > ${q.afterId}::bigint` : tx``}
       ${q.planStatus ? tx`and i.plan_status = ${q.planStatus}` : tx``}
       ${q.outcome ? tx`and i.outcome = ${q.outcome}` : tx``}
       ${q.restoreOutcome ? tx`and i.restore_outcome = ${q.restoreOutcome}` : tx``}
     order by i.id limit ${q.limit}`]);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A text expression formula-neutralised as the export's cells are (a leading = + - @ tab CR gets an apostrophe). */
function cell(expr: string): string {
  return `(case when left(${expr}, 1) in ('=', '+', '-', '@', E'\\t', E'\\r') then '''' || ${expr} else ${expr} end)`;
}

/**
 * COPY text of a plan's audit trail as CSV with a header, one row per item in
 * id order: who planned, approved and rolled back and when, then the item's
 * fields before and after (JSON), its plan status, outcome, HubSpot's answer
 * and its restore. Run as the user: RLS gives nothing for another's plan. It
 * inlines a validated uuid only (COPY takes no parameters).
 */
export function publishAuditCopy(planId: string): string {
  if (!UUID.test(planId)) throw new Error('not a plan id');
  const columns = [
    ['plan_id', 'p.id::text'], ['planned_by', 'p.created_by::text'], ['planned_at', 'p.created_at::text'],
    ['approved_by', 'p.approved_by::text'], ['approved_at', 'p.approved_at::text'],
    ['restored_by', 'p.restored_by::text'], ['restored_at', 'p.restored_at::text'],
    ['item_id', 'i.id::text'], ['content_type', 'i.content_type'], ['hubspot_id', cell('i.hubspot_id')],
    ['base_updated_at', 'i.base_updated_at::text'], ['before', cell('i.before::text')], ['after', cell('i.after::text')],
    ['plan_status', 'i.plan_status'], ['plan_message', cell('i.plan_message')], ['current', cell('i.current::text')],
    ['outcome', 'i.outcome'], ['outcome_message', cell('i.outcome_message')], ['writes', 'i.writes::text'],
    ['applied_updated_at', 'i.applied_updated_at::text'], ['answer', cell('i.answer::text')],
    ['overwritten_by', cell('i.overwritten_by::text')], ['overwritten_revision_id', cell('i.overwritten_revision_id')],
    ['restore_outcome', 'i.restore_outcome'], ['restore_message', cell('i.restore_message')],
    ['restored_updated_at', 'i.restored_updated_at::text'], ['restore_answer', cell('i.restore_answer::text')],
  ] as const;
  return `copy (select ${columns.map(([name, expr]) => `${expr} as ${name}`).join(', ')}
    from public.publish_plans p join public.publish_items i on i.plan_id = p.id
    where p.id = '${planId}' order by i.id) to stdout with (format csv, header)`;
}

/** Streams the user's plan's audit CSV to `write`; false (nothing written) when the plan is not theirs. */
export async function publishAuditCsv(
  sql: Sql, claims: UserClaims, planId: string, write: (chunk: Uint8Array) => void | Promise<void>,
): Promise<boolean> {
  return asUser(sql, claims, async (tx) => {
    const [plan] = await tx`select id from public.publish_plans where id = ${planId}`;
    if (!plan) return false;
    const stream = await tx.unsafe(publishAuditCopy(planId)).readable();
    for await (const chunk of stream as AsyncIterable<Uint8Array>) await write(chunk);
    return true;
  });
}
