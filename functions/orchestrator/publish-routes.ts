// The publish routes (docs/publish.md): plan a portal's pending edits, approve
// a plan, roll a publish run back, discard a plan (actions of POST
// /orchestrator), and the owner's reads under /orchestrator/publish/: the
// plans of a portal, one plan, a page of its items, its audit CSV (COPY …
// TO STDOUT as the user). The SQL functions decide, race-free, and refuse
// with a hint that becomes the answer's code (refusal below); every read runs
// as the user, so another user's plan is "not found" exactly as a missing one.
// The CSV upload: ./publish-csv.ts; the schemas: ./publish-schemas.ts.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import type { ContentType } from '../../shared/content-types.ts';
import { CORS_HEADERS, HttpError, json } from '../../shared/http.ts';
import { ownPortal } from '../../shared/sql/portals.ts';
import {
  approvePublishPlan, createPublishPlan, discardPublishPlan, publishAuditCsv, publishItems, publishPlan, publishPlans, publishRefusalOf,
  rollbackPublishRun, type PublishItemRow, type PublishPlanRow,
} from '../../shared/sql/publish.ts';
import type { OrchestratorDeps } from './deps.ts';
import {
  itemsQuery, planIdParam, plansQuery, type approvePlanBody, type createPlanBody, type discardPlanBody, type rollbackRunBody,
} from './publish-schemas.ts';
import { notFound, parseQuery } from './route-helpers.ts';
import { decodeRunCursor, encodeRunCursor } from './run-cursor.ts';
import { fieldErrors } from './schemas.ts';

/** The answer (status, code) to each hint the publish functions refuse with; `not_found` and `busy` are the route's own. */
const REFUSALS: Record<string, [number, string]> = {
  no_edits: [409, 'NO_PENDING_EDITS'],
  too_many: [413, 'TOO_MANY_EDITS'],
  disconnected: [424, 'HUBSPOT_DISCONNECTED'],
  already_approved: [409, 'PLAN_ALREADY_APPROVED'],
  not_ready: [409, 'PLAN_NOT_READY'],
  stale: [409, 'PLAN_STALE'],
  nothing_ready: [409, 'PLAN_NOTHING_READY'],
  planning: [409, 'PLAN_STILL_PLANNING'],
  running: [409, 'PUBLISH_RUN_NOT_FINISHED'],
  already_rolled_back: [409, 'ALREADY_ROLLED_BACK'],
  nothing_applied: [409, 'NOTHING_TO_ROLL_BACK'],
  invalid: [400, 'INVALID_BODY'],
  conflict: [409, 'PUBLISH_CONFLICT'],
};

/**
 * A publish function's refusal as the answer: `notFound` for P0002 (not the
 * user's, or none: never which), `busy` for 55006 (another plan, publish or
 * restore of the portal in flight), the others by their hint. Anything else
 * is rethrown (a 500).
 */
export function refusal(e: unknown, route: { notFound: HttpError; busy: string }): HttpError {
  const r = publishRefusalOf(e);
  if (!r) throw e;
  if (r.code === 'not_found') return route.notFound;
  if (r.code === 'busy') return new HttpError(409, route.busy, capitalised(r.message));
  // A hint this route does not know (a newer SQL function's): the class's own answer.
  const [status, code] = REFUSALS[r.code] ?? ({ 400: [400, 'INVALID_BODY'], 413: [413, 'TOO_MANY_EDITS'] } as Record<number, [number, string]>)[r.status]
    ?? [409, 'PUBLISH_CONFLICT'];
  return new HttpError(status, code, capitalised(r.message));
}

const capitalised = (s: string) => (s ? `${s[0]!.toUpperCase()}${s.slice(1)}${/[.!?]$/.test(s) ? '' : '.'}` : s);

export const portalNotFound = () => new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
const planNotFound = () => new HttpError(404, 'PLAN_NOT_FOUND', 'No such plan among yours.');

// ---------- actions (POST /orchestrator) ----------

/** create_publish_plan: 202 {planId, runId, items}; the plan run reads the items from HubSpot. */
export async function createPlan(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof createPlanBody>): Promise<Response> {
  let plan;
  try {
    plan = await createPublishPlan(deps.sql, {
      portalId: body.portalId, userId: user.userId, contentTypes: body.contentTypes as ContentType[] | undefined, mode: body.mode,
      publishAt: body.publishAt ? new Date(body.publishAt) : null,
    });
  } catch (e) {
    throw refusal(e, { notFound: portalNotFound(), busy: 'PLAN_IN_PROGRESS' });
  }
  deps.wakeWorker();
  deps.log.info('publish_plan_created', { plan_id: plan.planId, run_id: plan.runId, items: plan.items });
  return json(202, plan);
}

/** approve_publish_plan: 202 {planId, publishRunId}. */
export async function approvePlan(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof approvePlanBody>): Promise<Response> {
  let publishRunId;
  try {
    publishRunId = await approvePublishPlan(deps.sql, body.planId, user.userId);
  } catch (e) {
    throw refusal(e, { notFound: planNotFound(), busy: 'PUBLISH_IN_PROGRESS' });
  }
  deps.wakeWorker();
  deps.log.info('publish_plan_approved', { plan_id: body.planId, run_id: publishRunId });
  return json(202, { planId: body.planId, publishRunId });
}

/** rollback_publish_run: 202 {runId, restoreRunId}. */
export async function rollbackRun(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof rollbackRunBody>): Promise<Response> {
  let restoreRunId;
  try {
    restoreRunId = await rollbackPublishRun(deps.sql, body.runId, user.userId);
  } catch (e) {
    throw refusal(e, { notFound: new HttpError(404, 'RUN_NOT_FOUND', 'No such publish run among yours.'), busy: 'PUBLISH_IN_PROGRESS' });
  }
  deps.wakeWorker();
  deps.log.info('publish_run_rolled_back', { run_id: body.runId, restore_run_id: restoreRunId });
  return json(202, { runId: body.runId, restoreRunId });
}

/** discard_publish_plan: 200 {planId, discarded}. */
export async function discardPlan(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof discardPlanBody>): Promise<Response> {
  let discarded;
  try {
    discarded = await discardPublishPlan(deps.sql, body.planId, user.userId);
  } catch (e) {
    throw refusal(e, { notFound: planNotFound(), busy: 'PUBLISH_IN_PROGRESS' });
  }
  deps.log.info('publish_plan_discarded', { plan_id: body.planId, discarded });
  return json(200, { planId: body.planId, discarded });
}

// ---------- reads (GET /orchestrator/publish/…) ----------

/** GET /orchestrator/publish/plans[/{planId}[/items | /audit.csv]]. */
export async function publishRead(deps: OrchestratorDeps, user: VerifiedUser, req: Request, route: string[]): Promise<Response> {
  if (route.length === 2 && route[1] === 'plans') return await listPlans(deps, user, req);
  if (route.length < 3 || route.length > 4 || route[1] !== 'plans') throw notFound();
  const planId = planIdOf(route[2]!);
  if (route.length === 3) return await getPlan(deps, user, planId);
  if (route[3] === 'items') return await listItems(deps, user, planId, req);
  if (route[3] === 'audit.csv') return await auditCsv(deps, user, planId);
  throw notFound();
}

function planIdOf(raw: string): string {
  const id = planIdParam.safeParse(raw);
  if (!id.success) {
    throw new HttpError(400, 'INVALID_PATH', 'Use /orchestrator/publish/plans/<plan id>.', { fieldErrors: fieldErrors(id.error).map((f) => ({ ...f, path: 'planId' })) });
  }
  return id.data;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

function planJson(p: PublishPlanRow, now = Date.now()) {
  return {
    id: p.id, portalId: p.portal_id, status: p.status,
    approvable: p.status === 'ready' && p.fresh_until !== null && p.fresh_until.getTime() >= now && p.items_ready > 0,
    mode: p.mode, publishAt: iso(p.publish_at), contentTypes: p.content_types,
    createdBy: p.created_by, createdAt: iso(p.created_at)!, planRunId: p.plan_run_id, plannedAt: iso(p.planned_at), freshUntil: iso(p.fresh_until),
    approvedBy: p.approved_by, approvedAt: iso(p.approved_at), publishRunId: p.publish_run_id,
    restoredBy: p.restored_by, restoredAt: iso(p.restored_at), restoreRunId: p.restore_run_id,
    counts: {
      total: p.items_total, ready: p.items_ready, conflict: p.items_conflict, invalid: p.items_invalid,
      unchanged: p.items_unchanged, missing: p.items_missing,
    },
  };
}

function itemJson(i: PublishItemRow) {
  return {
    id: i.id, contentType: i.content_type, hubspotId: i.hubspot_id, editId: i.edit_id, baseUpdatedAt: iso(i.base_updated_at)!,
    before: i.before, after: i.after, current: i.current, plannedUpdatedAt: iso(i.planned_updated_at),
    planStatus: i.plan_status, planMessage: i.plan_message, outcome: i.outcome, outcomeMessage: i.outcome_message,
    preUpdatedAt: iso(i.pre_updated_at), appliedUpdatedAt: iso(i.applied_updated_at), answer: i.answer ?? null,
    overwrittenBy: i.overwritten_by ?? null, overwrittenRevisionId: i.overwritten_revision_id,
    restoreOutcome: i.restore_outcome, restoreMessage: i.restore_message, restoredUpdatedAt: iso(i.restored_updated_at), writes: i.writes,
  };
}

/** GET /orchestrator/publish/plans?portalId=&limit=&cursor=: the portal's plans, newest first. */
async function listPlans(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = parseQuery(plansQuery, req, 'Pass portalId (a uuid); optionally limit (1-100) and cursor (a nextCursor).');
  const after = q.cursor === undefined ? null : decodeRunCursor(q.cursor);
  if (q.cursor !== undefined && !after) {
    throw new HttpError(400, 'INVALID_QUERY', 'cursor must be a nextCursor from a previous page.', { fieldErrors: [{ path: 'cursor', message: 'not a cursor' }] });
  }
  const limit = q.limit ?? 20;
  const rows = await publishPlans(deps.sql, user.claims, { portalId: q.portalId, limit, after });
  // None: a portal of yours without plans, or not yours (RLS shows nothing either way): which one?
  if (rows.length === 0 && !(await ownPortal(deps.sql, user.claims, q.portalId))) throw portalNotFound();
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return json(200, {
    plans: page.map((p) => planJson(p)),
    nextCursor: rows.length > limit && last ? encodeRunCursor(last.cursor_at, last.id) : null,
  });
}

/** GET /orchestrator/publish/plans/{planId}. */
async function getPlan(deps: OrchestratorDeps, user: VerifiedUser, planId: string): Promise<Response> {
  const plan = await publishPlan(deps.sql, user.claims, planId);
  if (!plan) throw planNotFound();
  return json(200, { plan: planJson(plan) });
}

/** GET /orchestrator/publish/plans/{planId}/items?planStatus=&outcome=&restoreOutcome=&limit=&cursor=: a page of items in id order. */
async function listItems(deps: OrchestratorDeps, user: VerifiedUser, planId: string, req: Request): Promise<Response> {
  const q = parseQuery(itemsQuery, req, 'Optional: planStatus, outcome, restoreOutcome, limit (1-200), cursor (a nextCursor).');
  const limit = q.limit ?? 50;
  const rows = await publishItems(deps.sql, user.claims, {
    planId, afterId: q.cursor ?? null, limit: limit + 1, planStatus: q.planStatus, outcome: q.outcome, restoreOutcome: q.restoreOutcome,
  });
  if (rows.length === 0 && !(await publishPlan(deps.sql, user.claims, planId))) throw planNotFound();
  const page = rows.slice(0, limit);
  return json(200, { items: page.map(itemJson), nextCursor: rows.length > limit ? page[page.length - 1]!.id : null });
}

/**
 * GET /orchestrator/publish/plans/{planId}/audit.csv: the plan's audit trail,
 * streamed from Postgres (COPY … TO STDOUT as the user; formula-neutralised
 * cells like the exports'). 404 before anything is sent when the plan is not
 * the user's; the COPY's header row is its first chunk otherwise.
 */
async function auditCsv(deps: OrchestratorDeps, user: VerifiedUser, planId: string): Promise<Response> {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  let started!: () => void;
  const streaming = new Promise<'streaming'>((resolve) => (started = () => resolve('streaming')));
  const copy = publishAuditCsv(deps.sql, user.claims, planId, async (chunk) => {
    started();
    await writer.write(chunk); // resolves as the client reads: the COPY waits for a slow reader
  }).then(async (found) => {
    if (found) await writer.close();
    return found;
  }, async (e) => {
    await writer.abort(e).catch(() => {});
    throw e;
  });
  const first = await Promise.race([streaming, copy]);
  if (first === false) throw planNotFound();
  copy.catch((e) => deps.log.warn('publish_audit_stream_failed', { plan_id: planId, error: e instanceof Error ? e.message : String(e) }));
  return new Response(readable, {
    status: 200,
    headers: {
      ...CORS_HEADERS,
      'Content-Type': 'text/csv; charset=utf-8',
      'Content-Disposition': `attachment; filename="publish-audit-${planId.slice(0, 8)}.csv"`,
      'Cache-Control': 'no-store',
    },
  });
}
