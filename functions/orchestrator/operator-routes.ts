// Operator endpoints (the Operator view): every user's jobs filtered by
// status, portal, kind and time; every portal with its pause, jobs and HubSpot
// requests; a portal's request history; and the actions: retry or stop a job,
// pause or resume a portal. Only for operators (app_metadata.queue_operator,
// checked in the database on every call); the SQL is the service role's.
import { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { JOB_KINDS } from '../../shared/content-types.ts';
import { HttpError, json } from '../../shared/http.ts';
import { isQueueOperator } from '../../shared/sql/ops.ts';
import {
  operatorJobs, operatorPortals, pausePortal, requestHistory, resumePortal, retryJob, stopJob, type OperatorJobRow,
} from '../../shared/sql/operator.ts';
import type { ApiOperation } from './api-operation.ts';
import type { OrchestratorDeps } from './deps.ts';
import { apiSchemas, errorBody, exportJobId } from './schemas.ts';

function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

const uuid = z.string().uuid();
const timestamp = z.iso.datetime({ offset: true });
const jobId = exportJobId.describe('A job id (digits).');
/**
 * A job id in an action's body: the HTTP API's string, or the number a Realtime row carries (`id` of a jobs
 * row), exact only up to 2^53 − 1, so a larger id must be sent as its string.
 */
const actionJobId = z.union([exportJobId, z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)])
  .transform((id) => String(id))
  .describe('A job id: its string (as the HTTP API answers it), or a number up to 2^53 − 1 (as a Realtime row carries it).');

// ---------- requests ----------

export const operatorJobsQuery = z.object({
  status: z.enum(['pending', 'running', 'completed', 'failed', 'stopped']).optional(),
  portalId: uuid.optional(),
  kind: z.enum(JOB_KINDS).optional(),
  since: timestamp.optional().describe('Jobs created at or after this time.'),
  until: timestamp.optional().describe('Jobs created before this time.'),
  limit: z.coerce.number().int().min(1).max(200).optional().describe('Default 50.'),
  beforeId: jobId.optional().describe('`nextBeforeId` of the previous page.'),
});

export const operatorRequestsQuery = z.object({
  portalId: uuid,
  since: timestamp.optional().describe('Default: an hour ago; at most 24 hours back.'),
});

export const retryJobBody = named('RetryJobRequest', z.object({ action: z.literal('retry_job'), jobId: actionJobId }).strict(),
  'Operators: give a failed job one more attempt (its run reopens and settles again).');
export const stopJobBody = named('StopJobRequest', z.object({ action: z.literal('stop_job'), jobId: actionJobId }).strict(),
  'Operators: stop one pending or running job.');
export const pausePortalBody = named('PausePortalRequest', z.object({
  action: z.literal('pause_portal'), portalId: uuid, reason: z.string().trim().min(1).max(500).optional().describe('Shown on its jobs and runs; default "paused by an operator".'),
}).strict(), 'Operators: pause a portal (no job of it is claimed, its schedule creates nothing) until it is resumed.');
export const resumePortalBody = named('ResumePortalRequest', z.object({ action: z.literal('resume_portal'), portalId: uuid }).strict(),
  'Operators: resume a paused portal.');

// ---------- responses ----------

const operatorJob = named('OperatorJob', z.strictObject({
  id: z.string(), runId: uuid, portalId: uuid, portalName: z.string(), hubspotPortalId: z.number().int(), portalPaused: z.boolean(),
  kind: z.string(), contentType: z.string(), status: z.string(), attempts: z.number().int(), maxAttempts: z.number().int(),
  done: z.number().int(), total: z.number().int().nullable(), lastError: z.string().nullable(), waitingReason: z.string().nullable(),
  createdAt: timestamp, startedAt: timestamp.nullable(), finishedAt: timestamp.nullable(), updatedAt: timestamp,
  runStatus: z.string(), trigger: z.enum(['user', 'schedule']), fetchMode: z.enum(['full', 'incremental']).nullable(),
}));
export const operatorJobsResponse = named('OperatorJobs', z.strictObject({
  jobs: z.array(operatorJob), nextBeforeId: z.string().nullable().describe('Pass as beforeId for the next (older) page; null: no more.'),
}));
export const operatorPortalsResponse = named('OperatorPortals', z.strictObject({
  portals: z.array(z.strictObject({
    portalId: uuid, name: z.string(), ownerId: uuid, hubspotPortalId: z.number().int(), authKind: z.enum(['private_app', 'oauth']),
    disconnectedAt: timestamp.nullable(), disconnectedReason: z.string().nullable(),
    pausedAt: timestamp.nullable(), pausedBy: uuid.nullable(), pauseReason: z.string().nullable(),
    pendingJobs: z.number().int(), runningJobs: z.number().int(), requestsLast10s: z.number().int(), requestsLastHour: z.number().int(),
    limitPer10s: z.number().nullable().describe('The learned HubSpot limit per 10 s; null while unknown.'),
  })),
}));
export const requestWindows = z.array(z.strictObject({ windowStart: timestamp, requests: z.number().int() }))
  .describe('Requests per 10-s window (epoch-aligned), oldest first; windows without a request are absent.');
export const operatorRequestsResponse = named('OperatorRequestHistory', z.strictObject({ portalId: uuid, hubspotPortalId: z.number().int(), windows: requestWindows }));
export const jobActionResponse = named('JobActionDone', z.strictObject({
  jobId: z.string(), outcome: z.enum(['retried', 'stopped', 'already_ended']),
}));
export const portalPauseResponse = named('PortalPauseChanged', z.strictObject({
  portalId: uuid, paused: z.boolean().describe('The portal is paused now.'), changed: z.boolean().describe('false: it already was (or was not) paused.'),
}));

// ---------- routes ----------

async function requireOperator(deps: OrchestratorDeps, user: VerifiedUser): Promise<void> {
  if (!(await isQueueOperator(deps.sql, user.userId))) {
    throw new HttpError(403, 'NOT_AN_OPERATOR', 'For operators only (app_metadata.queue_operator = true).');
  }
}
const iso = (d: Date | null) => (d ? d.toISOString() : null);

function jobJson(j: OperatorJobRow) {
  return {
    id: j.id, runId: j.run_id, portalId: j.portal_id, portalName: j.portal_name, hubspotPortalId: Number(j.hubspot_portal_id),
    portalPaused: j.portal_paused, kind: j.kind, contentType: j.content_type, status: j.status, attempts: j.attempts,
    maxAttempts: j.max_attempts, done: j.progress_done, total: j.progress_total, lastError: j.last_error, waitingReason: j.waiting_reason,
    createdAt: j.created_at.toISOString(), startedAt: iso(j.started_at), finishedAt: iso(j.finished_at), updatedAt: j.updated_at.toISOString(),
    runStatus: j.run_status, trigger: j.run_trigger as 'user' | 'schedule', fetchMode: j.run_fetch_mode as 'full' | 'incremental' | null,
  };
}

/** GET /orchestrator/operator/jobs */
export async function listOperatorJobs(deps: OrchestratorDeps, user: VerifiedUser, q: z.infer<typeof operatorJobsQuery>): Promise<Response> {
  await requireOperator(deps, user);
  const limit = q.limit ?? 50;
  const rows = await operatorJobs(deps.sql, {
    status: q.status, portalId: q.portalId, kind: q.kind, since: q.since ? new Date(q.since) : undefined,
    until: q.until ? new Date(q.until) : undefined, limit: limit + 1, beforeId: q.beforeId,
  });
  const page = rows.slice(0, limit);
  return json(200, { jobs: page.map(jobJson), nextBeforeId: rows.length > limit ? page[page.length - 1]!.id : null });
}

/** GET /orchestrator/operator/portals */
export async function listOperatorPortals(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  await requireOperator(deps, user);
  const rows = await operatorPortals(deps.sql);
  return json(200, {
    portals: rows.map((p) => ({
      portalId: p.portal_id, name: p.name, ownerId: p.owner_id, hubspotPortalId: Number(p.hubspot_portal_id), authKind: p.auth_kind as 'private_app' | 'oauth',
      disconnectedAt: iso(p.disconnected_at), disconnectedReason: p.disconnected_reason, pausedAt: iso(p.paused_at), pausedBy: p.paused_by,
      pauseReason: p.pause_reason, pendingJobs: p.pending_jobs, runningJobs: p.running_jobs, requestsLast10s: p.requests_last_10s,
      requestsLastHour: p.requests_last_hour,
      limitPer10s: p.max_per_interval && p.interval_ms ? (p.max_per_interval * 10_000) / p.interval_ms : null,
    })),
  });
}

/** GET /orchestrator/operator/requests?portalId=&since=: any portal's request history. */
export async function operatorRequestHistory(deps: OrchestratorDeps, user: VerifiedUser, q: z.infer<typeof operatorRequestsQuery>): Promise<Response> {
  await requireOperator(deps, user);
  const portal = (await operatorPortals(deps.sql)).find((p) => p.portal_id === q.portalId);
  if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal.');
  const since = q.since ? new Date(q.since) : new Date(Date.now() - 3_600_000);
  const windows = await requestHistory(deps.sql, portal.hubspot_portal_id, since);
  return json(200, {
    portalId: q.portalId, hubspotPortalId: Number(portal.hubspot_portal_id),
    windows: windows.map((w) => ({ windowStart: w.window_start.toISOString(), requests: w.requests })),
  });
}

/** POST retry_job / stop_job. */
export async function jobAction(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof retryJobBody> | z.infer<typeof stopJobBody>): Promise<Response> {
  await requireOperator(deps, user);
  if (body.action === 'stop_job') {
    const stopped = await stopJob(deps.sql, body.jobId);
    if (stopped === null) throw new HttpError(404, 'JOB_NOT_FOUND', 'No such job.');
    deps.log.info('operator_job_stopped', { job_id: body.jobId, operator: user.userId, stopped });
    return json(200, { jobId: body.jobId, outcome: stopped ? 'stopped' : 'already_ended' });
  }
  const outcome = await retryJob(deps.sql, body.jobId);
  if (outcome === null) throw new HttpError(404, 'JOB_NOT_FOUND', 'No such job.');
  deps.log.info('operator_job_retry', { job_id: body.jobId, operator: user.userId, outcome });
  if (outcome === 'not_failed') throw new HttpError(409, 'JOB_NOT_FAILED', 'Only a failed job can be retried; nothing was changed.');
  if (outcome === 'busy') throw new HttpError(409, 'JOB_TYPE_BUSY', 'Another run of this portal is working on this content type: retry once it ends. Nothing was changed.');
  if (outcome === 'disconnected') throw new HttpError(424, 'HUBSPOT_DISCONNECTED', 'The portal is disconnected: it must be reconnected before its jobs are retried. Nothing was changed.');
  return json(200, { jobId: body.jobId, outcome: 'retried' });
}

/** POST pause_portal / resume_portal. */
export async function portalPause(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof pausePortalBody> | z.infer<typeof resumePortalBody>): Promise<Response> {
  await requireOperator(deps, user);
  const pause = body.action === 'pause_portal';
  const changed = pause
    ? await pausePortal(deps.sql, body.portalId, user.userId, body.reason ?? null)
    : await resumePortal(deps.sql, body.portalId);
  if (changed === null) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal.');
  if (changed && !pause) deps.wakeWorker(); // its held jobs are due now
  deps.log.info(pause ? 'portal_paused' : 'portal_resumed', { portal_id: body.portalId, operator: user.userId, changed });
  return json(200, { portalId: body.portalId, paused: pause, changed });
}

const err = (description: string) => ({ description, json: [errorBody] });
const notOperator = err('NOT_AN_OPERATOR: only users whose app_metadata.queue_operator is true.');

/** The operator operations, for openapi.json (api.ts lists them with the others). */
export const OPERATOR_OPERATIONS: ApiOperation[] = [
  {
    method: 'get', path: '/orchestrator/operator/jobs', operationId: 'listOperatorJobs',
    summary: "Every user's jobs, newest first, with their portal and run (operators only)",
    description: 'Filters by status, portal, kind and creation time; pages by `beforeId`. Act on one with the `retry_job` and `stop_job` actions of POST /orchestrator.',
    query: operatorJobsQuery,
    responses: { 200: { description: 'One page of jobs.', json: [operatorJobsResponse] }, 400: err('INVALID_QUERY.'), 403: notOperator },
  },
  {
    method: 'get', path: '/orchestrator/operator/portals', operationId: 'listOperatorPortals',
    summary: 'Every portal with its pause, active jobs and HubSpot requests (operators only)',
    responses: { 200: { description: 'The portals.', json: [operatorPortalsResponse] }, 403: notOperator },
  },
  {
    method: 'get', path: '/orchestrator/operator/requests', operationId: 'operatorRequestHistory',
    summary: "A portal's HubSpot requests per 10 s, from the budget's own counts (operators only)",
    query: operatorRequestsQuery,
    responses: { 200: { description: 'The windows.', json: [operatorRequestsResponse] }, 400: err('INVALID_QUERY.'), 403: notOperator, 404: err('PORTAL_NOT_FOUND.') },
  },
];
