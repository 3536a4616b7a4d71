// The orchestrator's HTTP handler: signed-in users create runs (fetch or
// export), read a run's progress, stop a run and connect HubSpot portals.
// Ownership is decided by RLS: every lookup runs as the user.
import type { z } from 'zod';
import type { VerifyUser, VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import { asUser, type Sql } from '../../shared/db.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import { HubSpotAuthError, HubSpotError } from '../../shared/hubspot/errors.ts';
import { CORS_HEADERS, HttpError, bearerToken, errorResponse, json, readJsonBody } from '../../shared/http.ts';
import type { Logger } from '../../shared/log.ts';
import { connectPortal, createRun, portalCredentials, stopRun } from '../../shared/queue.ts';
import { connectPortalBody, createRunBody, fieldErrors, runQuery, stopRunBody } from './schemas.ts';

export interface OrchestratorDeps {
  sql: Sql;
  log: Logger;
  verifyUser: VerifyUser;
  /** A HubSpot client for a token; `hubspotPortalId` set when the portal is known (shared budget). */
  hubspotClient(accessToken: string, hubspotPortalId: string | null): HubSpotContentClient;
  /** Wakes the worker after jobs were created (fire and forget). */
  wakeWorker(): void;
  maxBodyBytes: number;
}

/** Builds the `(Request) => Promise<Response>` orchestrator handler. */
export function createOrchestratorHandler(deps: OrchestratorDeps): (req: Request) => Promise<Response> {
  return async (req) => {
    try {
      if (req.method === 'OPTIONS') return new Response(null, { status: 204, headers: CORS_HEADERS });
      if (req.method !== 'GET' && req.method !== 'POST') {
        await req.body?.cancel().catch(() => {});
        throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'Use GET to read a run, POST to create, stop or connect.');
      }
      const user = await deps.verifyUser(bearerToken(req));
      if (req.method === 'GET') return await getRun(deps, user, req);
      const body = await readJsonBody(req, deps.maxBodyBytes);
      const action = body && typeof body === 'object' && !Array.isArray(body) ? (body as { action?: unknown }).action : undefined;
      if (action === 'stop') return await stop(deps, user, parse(stopRunBody, body));
      if (action === 'connect_portal') return await connect(deps, user, parse(connectPortalBody, body));
      return await create(deps, user, parse(createRunBody, body));
    } catch (e) {
      if (e instanceof HttpError) return e.toResponse();
      deps.log.error('orchestrator_error', { error: e instanceof Error ? e.message : String(e) });
      return errorResponse(500, 'INTERNAL', 'Something went wrong on our side; nothing was changed. Try again.');
    }
  };
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw new HttpError(400, 'INVALID_BODY', 'The request body is not valid.', { fieldErrors: fieldErrors(r.error) });
  return r.data;
}

/** The caller's portal as RLS lets them see it, or 404. */
async function ownPortal(deps: OrchestratorDeps, user: VerifiedUser, portalId: string): Promise<{ id: string; hubspotPortalId: string }> {
  const rows = await asUser(deps.sql, user.claims, (tx) => tx`select id, hubspot_portal_id from public.portals where id = ${portalId}`);
  if (!rows[0]) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return { id: rows[0].id as string, hubspotPortalId: String(rows[0].hubspot_portal_id) };
}

async function create(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof createRunBody>): Promise<Response> {
  const kind = body.kind ?? 'fetch';
  const requested: ContentType[] = body.contentTypes ?? [...CONTENT_TYPES];
  const portal = await ownPortal(deps, user, body.portalId);

  // Cheap early answer before asking HubSpot anything; create_run decides race-free below.
  const active = await deps.sql`select content_type from public.jobs
    where portal_id = ${portal.id} and kind = ${kind} and status in ('pending', 'running')`;
  const activeTypes = new Set(active.map((r) => r.content_type as string));
  const fresh = requested.filter((t) => !activeTypes.has(t));
  if (fresh.length === 0) throw allDuplicates(requested);

  let totals: number[] | null = null;
  if (kind === 'fetch') {
    const creds = await portalCredentials(deps.sql, portal.id);
    if (!creds) throw new HttpError(424, 'HUBSPOT_NOT_CONNECTED', 'This portal has no HubSpot connection: reconnect HubSpot.');
    const client = deps.hubspotClient(creds.accessToken, creds.hubspotPortalId);
    try {
      totals = await Promise.all(fresh.map((t) => client.countTotal(t)));
    } catch (e) {
      throw hubspotFailure(e);
    }
  }
  const result = await createRun(deps.sql, { portalId: portal.id, requestedBy: user.userId, kind, contentTypes: fresh, totals });
  if (!result.runId) throw allDuplicates(requested);
  deps.wakeWorker();
  const duplicateTypes = [...requested.filter((t) => activeTypes.has(t)), ...result.duplicateTypes];
  const jobs = await deps.sql`select id::text, content_type, status, progress_total from public.jobs where run_id = ${result.runId} order by id`;
  deps.log.info('run_created', { run_id: result.runId, kind, created: result.createdTypes.length, duplicates: duplicateTypes.length });
  return json(201, {
    runId: result.runId,
    kind,
    createdTypes: result.createdTypes,
    duplicateTypes,
    jobs: jobs.map((j) => ({ id: j.id, contentType: j.content_type, status: j.status, total: j.progress_total })),
  });
}

function allDuplicates(types: readonly string[]): HttpError {
  return new HttpError(409, 'ALL_DUPLICATE_JOBS', 'Every requested content type already has a job in flight for this portal.', { duplicateTypes: types });
}

function hubspotFailure(e: unknown): HttpError {
  if (e instanceof HubSpotAuthError) return new HttpError(424, 'HUBSPOT_AUTH_FAILED', e.message);
  if (e instanceof HubSpotError) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', `${e.message} Nothing was created; try again.`);
  throw e;
}

async function getRun(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = runQuery.safeParse(Object.fromEntries(new URL(req.url).searchParams));
  if (!q.success) throw new HttpError(400, 'INVALID_QUERY', 'Pass ?runId=<uuid>.', { fieldErrors: fieldErrors(q.error) });
  const { run, jobs } = await asUser(deps.sql, user.claims, async (tx) => {
    const [run] = await tx`select id, portal_id, kind, status, content_types, jobs_total, jobs_completed, jobs_failed, jobs_stopped,
        created_at, started_at, finished_at from public.runs where id = ${q.data.runId}`;
    const jobs = run
      ? await tx`select id::text, content_type, status, attempts, max_attempts, progress_done, progress_total, last_error, result,
          started_at, finished_at from public.jobs where run_id = ${q.data.runId} order by id`
      : [];
    return { run, jobs };
  });
  if (!run) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  return json(200, {
    run: {
      id: run.id, portalId: run.portal_id, kind: run.kind, status: run.status, contentTypes: run.content_types,
      jobsTotal: run.jobs_total, jobsCompleted: run.jobs_completed, jobsFailed: run.jobs_failed, jobsStopped: run.jobs_stopped,
      createdAt: run.created_at, startedAt: run.started_at, finishedAt: run.finished_at,
    },
    jobs: jobs.map((j) => ({
      id: j.id, contentType: j.content_type, status: j.status, attempts: j.attempts, maxAttempts: j.max_attempts,
      done: j.progress_done, total: j.progress_total, lastError: j.last_error, result: j.result,
      startedAt: j.started_at, finishedAt: j.finished_at,
    })),
  });
}

async function stop(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof stopRunBody>): Promise<Response> {
  const rows = await asUser(deps.sql, user.claims, (tx) => tx`select id from public.runs where id = ${body.runId}`);
  if (!rows[0]) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  const stopped = await stopRun(deps.sql, body.runId);
  const [run] = await deps.sql`select status from public.runs where id = ${body.runId}`;
  deps.log.info('run_stop_requested', { run_id: body.runId, stopped });
  return json(200, { runId: body.runId, stopped, status: run?.status });
}

async function connect(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof connectPortalBody>): Promise<Response> {
  let hubspotPortalId: number;
  try {
    const details = await deps.hubspotClient(body.accessToken, null).accountDetails();
    hubspotPortalId = Number(details.portalId);
  } catch (e) {
    if (e instanceof HubSpotAuthError) throw new HttpError(400, 'HUBSPOT_TOKEN_REJECTED', e.message);
    throw hubspotFailure(e);
  }
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not return a portal id; nothing was stored.');
  }
  const exists = await deps.sql`select 1 from auth.users where id = ${user.userId}`;
  if (!exists[0]) throw new HttpError(401, 'UNAUTHENTICATED', 'Your user no longer exists: sign in again.');
  const portalId = await connectPortal(deps.sql, { ownerId: user.userId, hubspotPortalId, name: body.name, accessToken: body.accessToken });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId });
  return json(201, { portalId, hubspotPortalId, name: body.name });
}
