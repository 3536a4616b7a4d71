// The orchestrator's HTTP handler: signed-in users list their portals and runs,
// create runs (fetch or export), read a run's progress, stop a run, download
// export files and connect HubSpot portals; operators read the queue's stats.
// Ownership is decided by RLS: every lookup of a user's rows runs as the user.
// The API is described by openapi.json, generated from ./schemas.ts and ./api.ts.
import type { z } from 'zod';
import type { VerifyUser, VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import { asUser, type Sql } from '../../shared/db.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import { HubSpotAuthError, HubSpotError } from '../../shared/hubspot/errors.ts';
import { CORS_HEADERS, HttpError, bearerToken, errorResponse, json, preflightResponse, readJsonBody, requireJsonContentType } from '../../shared/http.ts';
import type { Logger } from '../../shared/log.ts';
import { connectPortal, createRun, portalCredentials, stopRun } from '../../shared/queue.ts';
import type { ExportFiles } from './export-files.ts';
import { routeOf } from './api.ts';
import { connectPortalBody, createRunBody, exportJobId, fieldErrors, runQuery, runsQuery, stopRunBody } from './schemas.ts';
import { decodeRunCursor, encodeRunCursor, recordHubSpotRequest, takeUserWrite } from './sql.ts';

export interface OrchestratorDeps {
  sql: Sql;
  log: Logger;
  verifyUser: VerifyUser;
  /** A HubSpot client for a token; `hubspotPortalId` set when the portal is known (shared budget). */
  hubspotClient(accessToken: string, hubspotPortalId: string | null): HubSpotContentClient;
  /** Wakes the worker after jobs were created (fire and forget). */
  wakeWorker(): void;
  maxBodyBytes: number;
  /** Where export files are read from (local directory or Storage); downloads answer 501 without it. */
  exportFiles?: ExportFiles;
}

/** Builds the `(Request) => Promise<Response>` orchestrator handler. */
export function createOrchestratorHandler(deps: OrchestratorDeps): (req: Request) => Promise<Response> {
  return async (req) => {
    try {
      if (req.method === 'OPTIONS') return preflightResponse(req);
      if (req.method !== 'GET' && req.method !== 'POST') {
        await req.body?.cancel().catch(() => {});
        throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'Use GET to read, POST to create, stop or connect.');
      }
      const user = await deps.verifyUser(bearerToken(req));
      const route = routeOf(req.url);
      if (req.method === 'GET') {
        if (route.length === 0) return await getRun(deps, user, req);
        if (route.length === 1 && route[0] === 'portals') return await listPortals(deps, user);
        if (route.length === 1 && route[0] === 'runs') return await listRuns(deps, user, req);
        if (route.length === 2 && route[0] === 'exports') return await downloadExport(deps, user, route[1]!);
        if (route.length === 1 && route[0] === 'stats') return await queueStats(deps, user);
        throw notFound();
      }
      if (route.length !== 0) {
        await req.body?.cancel().catch(() => {});
        throw notFound();
      }
      // Every POST is a write: counted per user before anything else is looked at.
      const waitMs = await takeUserWrite(deps.sql, user.userId);
      if (waitMs > 0) {
        await req.body?.cancel().catch(() => {});
        throw rateLimited(waitMs);
      }
      await requireJsonContentType(req);
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

function notFound(): HttpError {
  return new HttpError(404, 'ROUTE_NOT_FOUND', 'No such endpoint: see openapi.json for the ones there are.');
}

function rateLimited(waitMs: number): HttpError {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  return new HttpError(429, 'RATE_LIMITED', `Too many changes in a short time: try again in ${seconds} s.`, { retryAfterSeconds: seconds }, { 'Retry-After': String(seconds) });
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw new HttpError(400, 'INVALID_BODY', 'The request body is not valid.', { fieldErrors: fieldErrors(r.error) });
  return r.data;
}

function parseQuery<T extends z.ZodType>(schema: T, req: Request, hint: string): z.infer<T> {
  const r = schema.safeParse(Object.fromEntries(new URL(req.url).searchParams));
  if (!r.success) throw new HttpError(400, 'INVALID_QUERY', hint, { fieldErrors: fieldErrors(r.error) });
  return r.data;
}

/** The caller's portal as RLS lets them see it, or 404. */
async function ownPortal(deps: OrchestratorDeps, user: VerifiedUser, portalId: string): Promise<{ id: string; hubspotPortalId: string }> {
  const rows = await asUser(deps.sql, user.claims, (tx) => tx`select id, hubspot_portal_id from public.portals where id = ${portalId}`);
  if (!rows[0]) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return { id: rows[0].id as string, hubspotPortalId: String(rows[0].hubspot_portal_id) };
}

/** Content type → run id of the portal's in-flight jobs of `kind` among `types`. */
async function inFlightRuns(sql: Sql, portalId: string, kind: string, types: readonly string[]): Promise<Record<string, string>> {
  if (types.length === 0) return {};
  const rows = await sql`select content_type, run_id from public.jobs
    where portal_id = ${portalId} and kind = ${kind} and status in ('pending', 'running') and content_type = any(${types as string[]})`;
  return Object.fromEntries(rows.map((r) => [r.content_type as string, r.run_id as string]));
}

async function create(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof createRunBody>): Promise<Response> {
  const kind = body.kind ?? 'fetch';
  const requested: ContentType[] = body.contentTypes ?? [...CONTENT_TYPES];
  const portal = await ownPortal(deps, user, body.portalId);

  // Cheap early answer before asking HubSpot anything; create_run decides race-free below.
  const active = await inFlightRuns(deps.sql, portal.id, kind, requested);
  const fresh = requested.filter((t) => !(t in active));
  if (fresh.length === 0) throw allDuplicates(requested, active);

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
  if (!result.runId) throw allDuplicates(requested, { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) });
  deps.wakeWorker();
  const duplicateTypes = [...requested.filter((t) => t in active), ...result.duplicateTypes];
  const duplicateRunIds = { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) };
  const jobs = await deps.sql`select id::text, content_type, status, progress_total from public.jobs where run_id = ${result.runId} order by id`;
  deps.log.info('run_created', { run_id: result.runId, kind, created: result.createdTypes.length, duplicates: duplicateTypes.length });
  return json(201, {
    runId: result.runId,
    kind,
    createdTypes: result.createdTypes,
    duplicateTypes,
    duplicateRunIds,
    jobs: jobs.map((j) => ({ id: j.id, contentType: j.content_type, status: j.status, total: j.progress_total })),
  });
}

function allDuplicates(types: readonly string[], runIds: Record<string, string>): HttpError {
  return new HttpError(409, 'ALL_DUPLICATE_JOBS', 'Every requested content type already has a job in flight for this portal.', {
    duplicateTypes: types,
    duplicateRunIds: runIds,
  });
}

function hubspotFailure(e: unknown): HttpError {
  if (e instanceof HubSpotAuthError) return new HttpError(424, 'HUBSPOT_AUTH_FAILED', e.message);
  if (e instanceof HubSpotError) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', `${e.message} Nothing was created; try again.`);
  throw e;
}

type Row = Record<string, any>;

function runJson(run: Row, itemsDone: number | null, itemsTotal: number | null) {
  return {
    id: run.id, portalId: run.portal_id, kind: run.kind, status: run.status, contentTypes: run.content_types,
    jobsTotal: run.jobs_total, jobsCompleted: run.jobs_completed, jobsFailed: run.jobs_failed, jobsStopped: run.jobs_stopped,
    itemsDone, itemsTotal,
    createdAt: run.created_at, startedAt: run.started_at, finishedAt: run.finished_at,
  };
}

async function getRun(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = parseQuery(runQuery, req, 'Pass ?runId=<uuid>.');
  const { run, jobs } = await asUser(deps.sql, user.claims, async (tx) => {
    const [run] = await tx`select id, portal_id, kind, status, content_types, jobs_total, jobs_completed, jobs_failed, jobs_stopped,
        created_at, started_at, finished_at from public.runs where id = ${q.runId}`;
    const jobs = run
      ? await tx`select id::text, kind, content_type, status, attempts, max_attempts, progress_done, progress_total, last_error, result,
          started_at, finished_at from public.jobs where run_id = ${q.runId} order by id`
      : [];
    return { run, jobs };
  });
  if (!run) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  const results = await Promise.all(jobs.map((j) => freshResult(deps, j)));
  const itemsDone = jobs.length ? jobs.reduce((s, j) => s + Number(j.progress_done), 0) : null;
  const itemsTotal = jobs.length && jobs.every((j) => j.progress_total !== null) ? jobs.reduce((s, j) => s + Number(j.progress_total), 0) : null;
  return json(200, {
    run: runJson(run, itemsDone, itemsTotal),
    jobs: jobs.map((j, i) => ({
      id: j.id, contentType: j.content_type, status: j.status, attempts: j.attempts, maxAttempts: j.max_attempts,
      done: j.progress_done, total: j.progress_total, lastError: j.last_error, result: results[i],
      startedAt: j.started_at, finishedAt: j.finished_at,
    })),
  });
}

/** A completed export's result with a freshly signed URL when its file is in Storage. */
async function freshResult(deps: OrchestratorDeps, job: Row): Promise<unknown> {
  const result = job.result as Record<string, unknown> | null;
  if (job.kind !== 'export' || job.status !== 'completed' || !result || typeof result.location !== 'string' || !deps.exportFiles) return result;
  try {
    const signed = await deps.exportFiles.signedUrl(result.location);
    return signed ? { ...result, url: signed.url, urlExpiresAt: signed.expiresAt } : result;
  } catch (e) {
    deps.log.warn('export_sign_failed', { job_id: job.id, error: e instanceof Error ? e.message : String(e) });
    return { ...result, url: null };
  }
}

async function listPortals(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  const rows = await asUser(deps.sql, user.claims, (tx) => tx`select id, hubspot_portal_id, name, created_at from public.portals
    order by created_at, id limit 1000`);
  return json(200, { portals: rows.map((p) => ({ id: p.id, hubspotPortalId: Number(p.hubspot_portal_id), name: p.name, createdAt: p.created_at })) });
}

async function listRuns(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = parseQuery(runsQuery, req, 'Optional: ?portalId=<uuid>&kind=fetch|export&limit=1..100&cursor=<nextCursor>.');
  const limit = q.limit ?? 20;
  const after = q.cursor === undefined ? null : decodeRunCursor(q.cursor);
  if (q.cursor !== undefined && !after) {
    throw new HttpError(400, 'INVALID_QUERY', 'cursor must be a nextCursor from a previous page.', { fieldErrors: [{ path: 'cursor', message: 'not a cursor' }] });
  }
  const rows = await asUser(deps.sql, user.claims, (tx) => tx`
    select r.id, r.portal_id, r.kind, r.status, r.content_types, r.jobs_total, r.jobs_completed, r.jobs_failed, r.jobs_stopped,
           r.created_at, r.started_at, r.finished_at,
           to_char(r.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at,
           j.items_done, j.items_total
      from public.runs r
      cross join lateral (
        select sum(jj.progress_done)::bigint as items_done,
               case when count(*) > 0 and count(jj.progress_total) = count(*) then sum(jj.progress_total)::bigint end as items_total
          from public.jobs jj where jj.run_id = r.id) j
     where true
       -- ::text first: a parameter typed timestamptz would pass through a JS Date and lose the microseconds.
       ${q.portalId ? tx`and r.portal_id = ${q.portalId}` : tx``}
       ${q.kind ? tx`and r.kind = ${q.kind}` : tx``}
       ${after ? tx`and (r.created_at, r.id) < (${after.at}::text::timestamptz, ${after.id}::uuid)` : tx``}
     order by r.created_at desc, r.id desc
     limit ${limit + 1}`);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return json(200, {
    runs: page.map((r) => runJson(r, r.items_done === null ? null : Number(r.items_done), r.items_total === null ? null : Number(r.items_total))),
    nextCursor: rows.length > limit && last ? encodeRunCursor(last.cursor_at as string, last.id as string) : null,
  });
}

async function downloadExport(deps: OrchestratorDeps, user: VerifiedUser, rawId: string): Promise<Response> {
  const id = exportJobId.safeParse(rawId);
  if (!id.success) throw new HttpError(400, 'INVALID_PATH', 'Use /orchestrator/exports/<export job id>.', { fieldErrors: fieldErrors(id.error).map((f) => ({ ...f, path: 'jobId' })) });
  const [job] = await asUser(deps.sql, user.claims, (tx) => tx`select id::text, run_id, kind, status, content_type, result from public.jobs where id = ${id.data}`);
  if (!job || job.kind !== 'export') throw new HttpError(404, 'EXPORT_NOT_FOUND', 'No such export job among yours.');
  const location = (job.result as { location?: unknown } | null)?.location;
  if (job.status !== 'completed' || typeof location !== 'string') {
    throw new HttpError(409, 'EXPORT_NOT_READY', `This export job is ${job.status}; its file can be downloaded once it has completed.`);
  }
  if (!deps.exportFiles) throw new HttpError(501, 'DOWNLOADS_UNAVAILABLE', 'This orchestrator has no export store configured (EXPORT_DIR, or SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY).');
  const file = await deps.exportFiles.open(location);
  if (!file) throw new HttpError(410, 'EXPORT_FILE_GONE', 'The export file is no longer there: export again.');
  const headers: Record<string, string> = {
    ...CORS_HEADERS,
    'Content-Type': 'text/csv; charset=utf-8',
    'Content-Disposition': `attachment; filename="${job.content_type}-${String(job.run_id).slice(0, 8)}.csv"`,
    'Cache-Control': 'private, no-store',
    'X-Content-Type-Options': 'nosniff',
  };
  if (file.size !== undefined) headers['Content-Length'] = String(file.size);
  deps.log.info('export_downloaded', { job_id: job.id, run_id: job.run_id });
  return new Response(file.body, { status: 200, headers });
}

async function queueStats(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  // Operators are users whose app_metadata (settable only with the service role) says so; checked in the database, not the token.
  const [row] = await deps.sql`select coalesce((u.raw_app_meta_data -> 'queue_operator') = 'true'::jsonb, false) as operator
    from auth.users u where u.id = ${user.userId}`;
  if (!row?.operator) throw new HttpError(403, 'NOT_AN_OPERATOR', 'Queue statistics are for operators (app_metadata.queue_operator = true).');
  const [stats] = await deps.sql`select public.queue_stats() as stats`;
  return json(200, { stats: stats!.stats });
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
  const exists = await deps.sql`select 1 from auth.users where id = ${user.userId}`;
  if (!exists[0]) throw new HttpError(401, 'UNAUTHENTICATED', 'Your user no longer exists: sign in again.');
  // A reconnect with a token this user already stored: its portal is known, so the call waits for the shared budget.
  const [known] = await deps.sql`select p.hubspot_portal_id::text as id from public.portals p
    join private.portal_credentials c on c.portal_id = p.id
    where p.owner_id = ${user.userId} and c.access_token = ${body.accessToken} limit 1`;
  let hubspotPortalId: number;
  try {
    const details = await deps.hubspotClient(body.accessToken, (known?.id as string | undefined) ?? null).accountDetails();
    hubspotPortalId = Number(details.portalId);
  } catch (e) {
    if (e instanceof HubSpotAuthError) throw new HttpError(400, 'HUBSPOT_TOKEN_REJECTED', e.message);
    throw hubspotFailure(e);
  }
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not return a portal id; nothing was stored.');
  }
  // Otherwise the portal was learnt from the answer: the request is counted in its budget now.
  if (known?.id !== String(hubspotPortalId)) await recordHubSpotRequest(deps.sql, hubspotPortalId);
  const portalId = await connectPortal(deps.sql, { ownerId: user.userId, hubspotPortalId, name: body.name, accessToken: body.accessToken });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId });
  return json(201, { portalId, hubspotPortalId, name: body.name });
}
