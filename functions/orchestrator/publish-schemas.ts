// What the publish endpoints accept and answer (docs/publish.md), as zod
// schemas registered for openapi.json: the plan, approve, roll back and
// discard actions of POST /orchestrator, the CSV upload's query, the reads'
// queries, and the plans and items as answered.
import { z } from 'zod';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { EDITABLE_CONTENT_TYPES } from '../../shared/publish-fields.ts';
import { ITEM_OUTCOMES, RESTORE_OUTCOMES } from '../../shared/sql/publish.ts';
import { apiSchemas } from './schemas.ts';

function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

const uuid = z.string().uuid();
const timestamp = z.iso.datetime({ offset: true });
const editableType = z.enum(EDITABLE_CONTENT_TYPES as unknown as [string, ...string[]])
  .describe(`A content type an edit may change: ${EDITABLE_CONTENT_TYPES.join(', ')} (HubDB tables are not editable).`);
const mode = z.enum(['live', 'draft', 'schedule']).describe(
  'How pages and posts are written: `live` (default: the live object), `draft` (the draft, then pushed live), `schedule` (the draft, published by HubSpot at `publishAt`). ' +
    'Draft and schedule take site pages, landing pages and blog posts only.');
const publishAt = timestamp.describe('With mode `schedule` (and only with it): when HubSpot publishes; in the future.');
const PAGE_TYPES: readonly string[] = ['site_pages', 'landing_pages', 'blog_posts'];

/** The checks a plan's mode and time share, wherever they are given (a body, an upload's query). */
function checkMode(b: { mode?: string; publishAt?: string; contentTypes?: readonly string[] }, ctx: z.RefinementCtx): void {
  if ((b.mode === 'schedule') !== (b.publishAt !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['publishAt'], message: 'a publish time goes with mode "schedule", and only with it' });
  } else if (b.publishAt !== undefined && Date.parse(b.publishAt) <= Date.now()) {
    ctx.addIssue({ code: 'custom', path: ['publishAt'], message: 'must be in the future' });
  }
  const others = (b.contentTypes ?? []).filter((t) => !PAGE_TYPES.includes(t));
  if (b.mode && b.mode !== 'live' && others.length > 0) {
    ctx.addIssue({ code: 'custom', path: ['mode'], message: `${b.mode} mode writes pages and posts only, not ${others.join(', ')}` });
  }
}

// ---------- requests ----------

export const createPlanBody = named(
  'CreatePublishPlanRequest',
  z.object({
    action: z.literal('create_publish_plan'),
    portalId: uuid,
    contentTypes: z.array(editableType).min(1).max(EDITABLE_CONTENT_TYPES.length)
      .refine((ts) => new Set(ts).size === ts.length, 'content types must be distinct').optional()
      .describe("Only these types' pending edits (default: every type's)."),
    mode: mode.optional(),
    publishAt: publishAt.optional(),
  }).strict().superRefine(checkMode),
  "Plan the portal's pending edits (public.content_edits): a dry run that reads each item from HubSpot (a run of kind `plan`), then approve it by its id while it is fresh. " +
    "An earlier plan of the portal that was never approved and covers one of these types is discarded, its edits planned again.",
);

export const approvePlanBody = named(
  'ApprovePublishPlanRequest',
  z.object({ action: z.literal('approve_publish_plan'), planId: uuid }).strict(),
  'Approve a ready plan while it is fresh (freshUntil): its publish run writes its ready items to HubSpot. Once: a second approval is refused.',
);

export const rollbackRunBody = named(
  'RollbackPublishRunRequest',
  z.object({ action: z.literal('rollback_publish_run'), runId: uuid.describe('The publish run (a plan\'s publishRunId).') }).strict(),
  "Roll a finished publish run back: a restore run writes each applied item's previous values back, skipping (and listing) items changed in HubSpot since.",
);

export const discardPlanBody = named(
  'DiscardPublishPlanRequest',
  z.object({ action: z.literal('discard_publish_plan'), planId: uuid }).strict(),
  'Drop a plan that was never approved (ready or failed): its edits are pending again.',
);

// ---------- queries ----------

const flag = z.enum(['true', 'false']);

export const csvUploadQuery = z.object({
  portalId: uuid.describe('One of your portals.'),
  contentType: editableType.describe('The content type of the export the file is (its columns are that export\'s).'),
  plan: flag.optional().describe('`true`: also plan the type\'s pending edits (the file\'s and any others) in the same transaction: 202 with the plan, or nothing stored. Default `false`: store the edits only (200).'),
  mode: mode.optional().describe('With plan=true: how the plan writes pages and posts (see CreatePublishPlanRequest).'),
  publishAt: publishAt.optional(),
}).superRefine((q, ctx) => {
  if (q.plan !== 'true' && (q.mode !== undefined || q.publishAt !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['mode'], message: 'mode and publishAt go with plan=true' });
    return;
  }
  checkMode({ ...q, contentTypes: [q.contentType] }, ctx);
});

export const plansQuery = z.object({
  portalId: uuid.describe('One of your portals.'),
  limit: z.coerce.number().int().min(1).max(100).optional().describe('Page size, 1-100 (default 20).'),
  cursor: z.string().max(200).optional().describe('`nextCursor` of the previous page.'),
});

export const PLAN_STATUSES = ['ready', 'conflict', 'invalid', 'unchanged', 'missing'] as const;
export const OUTCOMES = ITEM_OUTCOMES;
export { RESTORE_OUTCOMES };

export const itemsQuery = z.object({
  planStatus: z.enum(PLAN_STATUSES).optional().describe('Only items the plan classified so (e.g. `conflict`).'),
  outcome: z.enum(OUTCOMES).optional().describe("Only items whose apply ended so (e.g. `overwritten`)."),
  restoreOutcome: z.enum(RESTORE_OUTCOMES).optional().describe("Only items whose rollback ended so."),
  limit: z.coerce.number().int().min(1).max(200).optional().describe('Page size, 1-200 (default 50).'),
  cursor: z.string().regex(/^[1-9][0-9]{0,18}$/, 'must be a nextCursor').refine((c) => BigInt(c) <= 9223372036854775807n, 'must be a nextCursor')
    .optional().describe('`nextCursor` of the previous page.'),
});

export const planIdParam = uuid.describe('The plan id (planId of its creation, or of the plans list).');

// ---------- responses ----------

export const planCreatedResponse = named('PublishPlanCreated', z.strictObject({
  planId: uuid,
  runId: uuid.describe('The plan run (kind `plan`): follow it with GET /orchestrator?runId=; the plan is `ready` when it completes.'),
  items: z.number().int().describe('Pending edits taken into the plan, one item each.'),
}));

export const csvImportedResponse = named('PublishCsvImported', z.strictObject({
  portalId: uuid,
  contentType: editableType,
  rows: z.number().int().describe('Data rows in the file.'),
  edits: z.number().int().describe('Pending edits stored: one per row with a changed editable cell (a cell equal to the stored copy is not an edit); each replaces the item\'s earlier pending edit.'),
  plan: planCreatedResponse.nullable().describe('With plan=true: the plan of the type\'s pending edits; else null.'),
}));

export const planApprovedResponse = named('PublishPlanApproved', z.strictObject({
  planId: uuid,
  publishRunId: uuid.describe('The publish run (kind `publish`): follow it with GET /orchestrator?runId=.'),
}));

export const runRolledBackResponse = named('PublishRunRolledBack', z.strictObject({
  runId: uuid.describe('The publish run rolled back.'),
  restoreRunId: uuid.describe('The restore run (kind `restore`): follow it with GET /orchestrator?runId=.'),
}));

export const planDiscardedResponse = named('PublishPlanDiscarded', z.strictObject({
  planId: uuid,
  discarded: z.boolean().describe('false when it was discarded already.'),
}));

const nullableTime = timestamp.nullable();

export const publishPlan = named('PublishPlan', z.strictObject({
  id: uuid,
  portalId: uuid,
  status: z.enum(['planning', 'ready', 'approved', 'failed', 'discarded']).describe(
    'planning (its plan run reads the items from HubSpot), ready (approvable until freshUntil), approved, failed (its edits are pending again), discarded.'),
  approvable: z.boolean().describe('ready, fresh (now before freshUntil) and with at least one ready item: approve_publish_plan would be taken.'),
  mode: z.enum(['live', 'draft', 'schedule']),
  publishAt: nullableTime,
  contentTypes: z.array(z.enum(CONTENT_TYPES)),
  createdBy: uuid.describe('Who planned.'),
  createdAt: timestamp,
  planRunId: uuid.nullable().describe('The plan run (null once retention deleted it).'),
  plannedAt: nullableTime.describe('When the plan run settled (null while planning).'),
  freshUntil: nullableTime.describe('Approvable until then (the plan run\'s end plus plan_fresh_minutes, 30 by default); after it, plan again.'),
  approvedBy: uuid.nullable(),
  approvedAt: nullableTime,
  publishRunId: uuid.nullable(),
  restoredBy: uuid.nullable().describe('Who rolled the publish run back.'),
  restoredAt: nullableTime,
  restoreRunId: uuid.nullable(),
  counts: z.strictObject({
    total: z.number().int(), ready: z.number().int(), conflict: z.number().int(), invalid: z.number().int(),
    unchanged: z.number().int(), missing: z.number().int(),
  }).describe('Items, and how the plan classified them (kept when the plan run settled; 0 but total while planning).'),
}), 'A plan: a dry run over a portal\'s pending edits, approved by its id while fresh.');

export const planDetailResponse = named('PublishPlanDetail', z.strictObject({ plan: publishPlan }));

export const planListResponse = named('PublishPlanList', z.strictObject({
  plans: z.array(publishPlan).describe('Newest first.'),
  nextCursor: z.string().nullable().describe('Pass as `cursor` for the next (older) page; null on the last page.'),
}));

const fields = z.record(z.string(), z.unknown());

export const publishItem = named('PublishItem', z.strictObject({
  id: z.string().describe('A bigint, as a string.'),
  contentType: z.enum(CONTENT_TYPES),
  hubspotId: z.string().describe('The item\'s id in the copy (a HubDB row: `<tableId>:<rowId>`).'),
  editId: z.string().nullable(),
  baseUpdatedAt: timestamp.describe('The HubSpot update time the edit is based on.'),
  before: fields.nullable().describe('HubSpot\'s values of the patched fields when the plan read the item (null until read, or when missing).'),
  after: fields.describe('The edit\'s patch: the target values (a HubDB row\'s `values` holds only the changed columns).'),
  current: fields.nullable().describe('For a conflict: HubSpot\'s values of the patched fields when it was found, shown beside ours (never written over).'),
  plannedUpdatedAt: nullableTime.describe('HubSpot\'s update time the plan saw.'),
  planStatus: z.enum(PLAN_STATUSES).nullable().describe('Null while planning.'),
  planMessage: z.string().nullable(),
  outcome: z.enum(OUTCOMES).nullable().describe('The apply\'s outcome; null before the publish run reaches it.'),
  outcomeMessage: z.string().nullable().describe('Why: a conflict, HubSpot\'s own message for an invalid item, a failed job\'s error.'),
  preUpdatedAt: nullableTime.describe('HubSpot\'s update time at the apply\'s re-read (the pre-image\'s).'),
  appliedUpdatedAt: nullableTime.describe('HubSpot\'s update time after our write.'),
  answer: z.unknown().describe('HubSpot\'s answer for the item (its result or error); null before.'),
  overwrittenBy: z.unknown().describe('For `overwritten`: the foreign audit events that landed between the re-read and our write.'),
  overwrittenRevisionId: z.string().nullable().describe('For `overwritten`: the revision to restore to get the foreign edit back.'),
  restoreOutcome: z.enum(RESTORE_OUTCOMES).nullable(),
  restoreMessage: z.string().nullable(),
  restoredUpdatedAt: nullableTime,
  writes: z.number().int().describe('Our write requests that carried this item (at most 1 unless HubSpot never applied a write).'),
}), 'One item of a plan: its fields before → after, how the plan classified it, what the apply and the rollback did.');

export const itemPageResponse = named('PublishItemPage', z.strictObject({
  items: z.array(publishItem).describe('In id order (the plan\'s order: content type, then HubSpot id).'),
  nextCursor: z.string().nullable().describe('Pass as `cursor` for the next page; null on the last page.'),
}));
