// The orchestrator's HTTP handler: signed-in users list their portals and runs,
// create runs (fetch or export), read a run's progress, stop a run, download
// export files (or list the latest per type: ./latest-exports.ts), connect
// HubSpot portals (a private app's token, or an OAuth install: start, then
// complete with the redirect's code and state) and disconnect them
// (./portal-disconnect.ts); operators read the queue's stats. A signed link
// (./export-links.ts) downloads one file without a token.
// Ownership is decided by RLS: every lookup of a user's rows runs as the user.
// The API is described by openapi.json, generated from ./schemas.ts and ./api.ts.
import type { z } from 'zod';
import type { VerifyUser, VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import type { AccessTokenSource, HubSpotContentClient, RateLimitHeaders } from '../../shared/hubspot/client.ts';
import { HubSpotAccessRemoved, HubSpotAuthError, HubSpotError } from '../../shared/hubspot/errors.ts';
import {
  connectOAuthPortal, connectPrivateAppPortal, knownHubSpotPortalForToken, OAuthTokenError, postOAuthToken, StoredTokenUnreadable,
  type PortalTokenSource,
} from '../../shared/hubspot/oauth-tokens.ts';
import { CORS_HEADERS, HttpError, bearerToken, errorResponse, json, preflightResponse, readJsonBody, requireJsonContentType } from '../../shared/http.ts';
import type { Logger } from '../../shared/log.ts';
import type { HubSpotAuthKind } from '../../shared/hubspot-budget.ts';
import {
  hubspotLimitsOfPortal, hubspotPortalLimits, NO_LIMITS_KNOWN, recordHubSpotRateHeaders, recordHubSpotRequest, recordHubSpotTimeZone, timeZoneLearnedAt,
} from '../../shared/sql/budget.ts';
import { downloadJob } from '../../shared/sql/export.ts';
import { consumeInstallState, createInstallState } from '../../shared/sql/oauth-install.ts';
import { isQueueOperator, queueStats as readQueueStats, takeUserWrite, userExists } from '../../shared/sql/ops.ts';
import { ownPortal as readOwnPortal, ownPortals, portalNameOf } from '../../shared/sql/portals.ts';
import { createdJobs, createRun, inFlightRuns, isOwnRun, runStatus, runWithJobs, stopRun, userRuns, type RunRow } from '../../shared/sql/runs.ts';
import { TokenKeysMissing, type TokenKeyring } from '../../shared/token-crypto.ts';
import { ExportFileGoneError, ExportStoreError, type ExportFiles } from './export-files.ts';
import type { ExportLinks } from './export-links.ts';
import { disconnectOwnPortal } from './portal-disconnect.ts';
import { exportNotDownloadable, latestExports } from './latest-exports.ts';
import { routeOf } from './api.ts';
import { authorizeUrl, installStateHash, newInstallState, pkceChallenge, pkceVerifier, type OAuthInstallConfig } from './oauth-install.ts';
import {
  completeInstallBody, connectPortalBody, createRunBody, disconnectPortalBody, exportJobId, fieldErrors, runQuery, runsQuery, startInstallBody, stopRunBody,
} from './schemas.ts';
import { decodeRunCursor, encodeRunCursor } from './run-cursor.ts';
import {
  changesQuery, deleteScheduleBody, deleteSyncSchedule, getSyncStatus, listChanges, setScheduleBody, setSyncSchedule, syncStatusQuery,
} from './sync.ts';

/** How a HubSpot client authenticates: a connected portal's token source (shared refresh), or a fixed token (a pasted private-app token). */
export type HubSpotAuth = { tokens: AccessTokenSource } | { accessToken: string };

export interface OrchestratorDeps {
  sql: Sql;
  log: Logger;
  verifyUser: VerifyUser;
  /**
   * A HubSpot client; `hubspotPortalId` set when the portal is known (shared
   * budget, its limits learned from the answers); `authKind` how it is
   * connected (default: a private app).
   */
  hubspotClient(
    auth: HubSpotAuth, hubspotPortalId: string | null, authKind?: HubSpotAuthKind,
    /** Also told every answer's rate-limit headers (a connect: the portal is known only from the answer). */
    onRateLimitHeaders?: (h: RateLimitHeaders) => void,
  ): HubSpotContentClient;
  /** A connected portal's tokens (refreshed once for every caller); null when it has none. Throws HubSpotAccessRemoved when disconnected. */
  portalTokens(portalId: string): Promise<PortalTokenSource | null>;
  /** Keys that encrypt stored tokens (HUBSPOT_TOKEN_KEYS); null: connecting answers 503 TOKEN_KEYS_MISSING. */
  tokenKeys: TokenKeyring | null;
  /** The HubSpot app for OAuth installs; without it the install actions answer 501 OAUTH_NOT_CONFIGURED. */
  oauthInstall?: OAuthInstallConfig;
  /** Wakes the worker after jobs were created (fire and forget). */
  wakeWorker(): void;
  maxBodyBytes: number;
  /** Where export files are read from (local directory or Storage); downloads answer 501 without it. */
  exportFiles?: ExportFiles;
  /** Signed links for files the store cannot sign itself (the local directory): `result.url` then works there too. */
  exportLinks?: ExportLinks;
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
      const route = routeOf(req.url);
      // A signed link (result.url of a local export) carries its own proof instead of a bearer token.
      if (req.method === 'GET' && route.length === 2 && route[0] === 'exports' && new URL(req.url).searchParams.has('signature')) {
        return await downloadExport(deps, null, route[1]!, new URL(req.url).searchParams);
      }
      const user = await deps.verifyUser(bearerToken(req));
      if (req.method === 'GET') {
        if (route.length === 0) return await getRun(deps, user, req);
        if (route.length === 1 && route[0] === 'portals') return await listPortals(deps, user);
        if (route.length === 1 && route[0] === 'runs') return await listRuns(deps, user, req);
        if (route.length === 1 && route[0] === 'exports') return await latestExports(deps, user, req);
        if (route.length === 2 && route[0] === 'exports') return await downloadExport(deps, user, route[1]!);
        if (route.length === 1 && route[0] === 'stats') return await queueStats(deps, user);
        if (route.length === 1 && route[0] === 'sync') return await getSyncStatus(deps, user, parseQuery(syncStatusQuery, req, 'Pass portalId (a uuid).'));
        if (route.length === 1 && route[0] === 'changes') {
          return await listChanges(deps, user, parseQuery(changesQuery, req, 'Pass portalId (a uuid), and optionally contentType, limit (1-500) and cursor.'));
        }
        throw notFound();
      }
      if (route.length !== 0) {
        await req.body?.cancel().catch(() => {});
        throw notFound();
      }
      await requireJsonContentType(req);
      const body = await readJsonBody(req, deps.maxBodyBytes);
      const action = body && typeof body === 'object' && !Array.isArray(body) ? (body as { action?: unknown }).action : undefined;
      // Stopping is never limited: it only ends work, and a user at the limit must still be able to.
      if (action === 'stop') return await stop(deps, user, parse(stopRunBody, body));
      // Every other POST is a write: counted per user before it is looked at further.
      const waitMs = await takeUserWrite(deps.sql, user.userId);
      if (waitMs > 0) throw rateLimited(waitMs);
      if (action === 'disconnect_portal') return await disconnectOwnPortal(deps, user, parse(disconnectPortalBody, body));
      if (action === 'connect_portal') return await connect(deps, user, parse(connectPortalBody, body));
      if (action === 'start_hubspot_install') return await startInstall(deps, user, parse(startInstallBody, body));
      if (action === 'complete_hubspot_install') return await completeInstall(deps, user, body);
      if (action === 'set_sync_schedule') return await setSyncSchedule(deps, user, parse(setScheduleBody, body));
      if (action === 'delete_sync_schedule') return await deleteSyncSchedule(deps, user, parse(deleteScheduleBody, body));
      return await create(deps, user, parse(createRunBody, body));
    } catch (e) {
      if (e instanceof HttpError) return e.toResponse();
      if (e instanceof TokenKeysMissing) return keysMissing().toResponse();
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
async function ownPortal(deps: OrchestratorDeps, user: VerifiedUser, portalId: string): Promise<{ id: string; hubspotPortalId: string; disconnectedReason: string | null }> {
  const portal = await readOwnPortal(deps.sql, user.claims, portalId);
  if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return { id: portal.id, hubspotPortalId: String(portal.hubspot_portal_id), disconnectedReason: portal.disconnected_reason ?? null };
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
  let releaseCounts = () => {};
  if (kind === 'fetch') {
    // Disconnected (by its owner, or HubSpot access removed): say so, whether or not tokens are left.
    if (portal.disconnectedReason !== null) {
      throw new HttpError(424, 'HUBSPOT_DISCONNECTED', `HubSpot access was removed: reconnect the portal (${portal.disconnectedReason}).`);
    }
    let tokens: PortalTokenSource | null;
    try {
      tokens = await deps.portalTokens(portal.id);
    } catch (e) {
      throw hubspotFailure(e);
    }
    if (!tokens) throw new HttpError(424, 'HUBSPOT_NOT_CONNECTED', 'This portal has no HubSpot connection: reconnect HubSpot.');
    const client = deps.hubspotClient({ tokens }, tokens.hubspotPortalId, tokens.authKind);
    const countKey = `${portal.id}:${fresh.join(',')}`;
    if (!countsInFlight.has(countKey)) {
      // A burst's requests read no run at first; by now the first of them may have made one: no counting for it.
      const since = await inFlightRuns(deps.sql, portal.id, kind, fresh);
      if (fresh.every((t) => t in since)) throw allDuplicates(requested, { ...active, ...since });
    }
    const shared = sharedCounts(countKey, async () => {
      const counted = await Promise.all(fresh.map((t) => client.countTotal(t)));
      await refreshTimeZone(deps, client, tokens.hubspotPortalId);
      return counted;
    });
    releaseCounts = shared.release;
    try {
      totals = await shared.totals;
    } catch (e) {
      releaseCounts();
      throw hubspotFailure(e);
    }
  }
  let result;
  try {
    result = await createRun(deps.sql, { portalId: portal.id, requestedBy: user.userId, kind, contentTypes: fresh, totals });
  } finally {
    releaseCounts(); // the run exists now (or not at all): later requests see it and answer without counting
  }
  if (!result.runId) throw allDuplicates(requested, { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) });
  deps.wakeWorker();
  const duplicateTypes = [...requested.filter((t) => t in active), ...result.duplicateTypes];
  const duplicateRunIds = { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) };
  const jobs = await createdJobs(deps.sql, result.runId);
  deps.log.info('run_created', { run_id: result.runId, kind, created: result.createdTypes.length, duplicates: duplicateTypes.length });
  return json(201, {
    runId: result.runId,
    kind,
    createdTypes: result.createdTypes,
    duplicateTypes,
    duplicateRunIds,
    jobs,
  });
}

/**
 * Counts in flight in this isolate: concurrent identical requests (a double
 * click, a retry storm) share one set of HubSpot calls. Kept until the first
 * requester's create_run has answered (`release`), so a request arriving
 * between its counts and its run shares them too instead of counting again.
 */
const countsInFlight = new Map<string, Promise<number[]>>();

function sharedCounts(key: string, count: () => Promise<number[]>): { totals: Promise<number[]>; release: () => void } {
  const existing = countsInFlight.get(key);
  if (existing) return { totals: existing, release: () => {} };
  const totals = count();
  countsInFlight.set(key, totals);
  const release = () => {
    if (countsInFlight.get(key) === totals) countsInFlight.delete(key);
  };
  totals.catch(release); // a failed count is never shared past its failure
  return { totals, release };
}

/** How long an account's time zone is trusted before a run's creation asks HubSpot again. */
const TIME_ZONE_MAX_AGE_MS = 7 * 86_400_000;
/** Portals whose time zone this isolate saw fresh, and until when it need not look again. */
const timeZoneCheckedUntil = new Map<string, number>();

/** Asks HubSpot for the account's time zone when it is unknown or a week old (best effort: the run does not depend on it). */
async function refreshTimeZone(deps: OrchestratorDeps, client: HubSpotContentClient, hubspotPortalId: string): Promise<void> {
  if ((timeZoneCheckedUntil.get(hubspotPortalId) ?? 0) > Date.now()) return;
  const learnedAt = await timeZoneLearnedAt(deps.sql, hubspotPortalId);
  if (timeZoneCheckedUntil.size > 10_000) timeZoneCheckedUntil.clear();
  if (learnedAt && Date.now() - learnedAt.getTime() < TIME_ZONE_MAX_AGE_MS) {
    timeZoneCheckedUntil.set(hubspotPortalId, Math.min(learnedAt.getTime() + TIME_ZONE_MAX_AGE_MS, Date.now() + 3_600_000));
    return;
  }
  try {
    await recordHubSpotTimeZone(deps.sql, hubspotPortalId, (await client.accountDetails()).timeZone);
  } catch (e) {
    deps.log.warn('hubspot_time_zone_unknown', { hubspot_portal_id: hubspotPortalId, error: e instanceof Error ? e.message : String(e) });
  }
}

function allDuplicates(types: readonly string[], runIds: Record<string, string>): HttpError {
  return new HttpError(409, 'ALL_DUPLICATE_JOBS', 'Every requested content type is already part of a run in flight for this portal (see duplicateRunIds).', {
    duplicateTypes: types,
    duplicateRunIds: runIds,
  });
}

function hubspotFailure(e: unknown): HttpError {
  if (e instanceof HubSpotAccessRemoved) return new HttpError(424, 'HUBSPOT_DISCONNECTED', e.message);
  if (e instanceof StoredTokenUnreadable) return new HttpError(424, 'HUBSPOT_CREDENTIALS_UNREADABLE', `${e.message} Nothing was created.`);
  if (e instanceof HubSpotAuthError) return new HttpError(424, 'HUBSPOT_AUTH_FAILED', e.message);
  if (e instanceof HubSpotError) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', `${e.message} Nothing was created; try again.`);
  throw e;
}

type Row = Record<string, any>;

function runJson(run: RunRow, itemsDone: number | null, itemsTotal: number | null) {
  return {
    id: run.id, portalId: run.portal_id, kind: run.kind, status: run.status, contentTypes: run.content_types,
    jobsTotal: run.jobs_total, jobsCompleted: run.jobs_completed, jobsFailed: run.jobs_failed, jobsStopped: run.jobs_stopped,
    itemsDone, itemsTotal,
    waitingReason: run.waiting_reason_text ?? null, waitingReasonCode: run.waiting_reason_code ?? null, waitingUntil: run.waiting_until ?? null,
    createdAt: run.created_at, startedAt: run.started_at, finishedAt: run.finished_at,
  };
}

async function getRun(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = parseQuery(runQuery, req, 'Pass ?runId=<uuid>.');
  const found = await runWithJobs(deps.sql, user.claims, q.runId);
  if (!found) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  const { run, jobs } = found;
  const results = await Promise.all(jobs.map((j) => freshResult(deps, j)));
  const itemsDone = jobs.length ? jobs.reduce((s, j) => s + Number(j.progress_done), 0) : null;
  const itemsTotal = jobs.length && jobs.every((j) => j.progress_total !== null) ? jobs.reduce((s, j) => s + Number(j.progress_total), 0) : null;
  return json(200, {
    run: runJson(run, itemsDone, itemsTotal),
    jobs: jobs.map((j, i) => ({
      id: j.id, contentType: j.content_type, status: j.status, attempts: j.attempts, maxAttempts: j.max_attempts,
      done: j.progress_done, total: j.progress_total, lastError: j.last_error, result: results[i],
      waitingReason: j.waiting_reason_text, waitingReasonCode: j.waiting_reason_code, waitingUntil: j.waiting_until,
      startedAt: j.started_at, finishedAt: j.finished_at,
    })),
    hubspotLimits: (await hubspotLimitsOfPortal(deps.sql, run.portal_id as string)) ?? NO_LIMITS_KNOWN,
  });
}

/**
 * A completed export's result with a freshly signed URL when its file is in
 * Storage. When no URL can be given, `url` is null and `urlUnavailable` says
 * why (EXPORT_FILE_GONE, or the store's STORAGE_MISCONFIGURED /
 * STORAGE_UNAVAILABLE): the run itself is still answered.
 */
export async function freshResult(deps: OrchestratorDeps, job: Row): Promise<unknown> {
  const stored = job.result as Record<string, unknown> | null;
  if (job.kind !== 'export' || job.status !== 'completed' || !stored || typeof stored.location !== 'string' || !deps.exportFiles) return stored;
  const result = { ...stored, location: deps.exportFiles.shownLocation(stored.location), fromFetch: job.from_fetch ?? null };
  try {
    const signed = (await deps.exportFiles.signedUrl(stored.location)) ?? (await localLink(deps, job, stored.location));
    return signed ? { ...result, url: signed.url, urlExpiresAt: signed.expiresAt } : result;
  } catch (e) {
    if (e instanceof ExportFileGoneError) return { ...result, url: null, urlUnavailable: { code: FILE_GONE.code, message: FILE_GONE.message } };
    const failure = exportStoreFailure(deps, job.id as string, e);
    return { ...result, url: null, urlUnavailable: { code: failure.code, message: failure.message } };
  }
}

/** A signed link to a file the store cannot sign (the local directory), when links are configured and the file is there. */
async function localLink(deps: OrchestratorDeps, job: Row, location: string): Promise<{ url: string; expiresAt: string } | null> {
  if (!deps.exportLinks || !deps.exportFiles) return null;
  const file = await deps.exportFiles.open(location);
  if (!file) throw new ExportFileGoneError(`${location} is not there`);
  await file.body.cancel();
  return deps.exportLinks.sign(job.id as string);
}

const FILE_GONE = { code: 'EXPORT_FILE_GONE', message: 'The export file is no longer there: export again.' } as const;

/**
 * The answer for an export file the store could not be asked about (logged for
 * the operator, without the key): 503 STORAGE_MISCONFIGURED when Storage
 * refused this server's key or lacks the bucket, 503 STORAGE_UNAVAILABLE when
 * it failed. Never "gone": the file may well be there.
 */
function exportStoreFailure(deps: OrchestratorDeps, jobId: string, e: unknown): HttpError {
  const code = e instanceof ExportStoreError ? e.code : 'STORAGE_UNAVAILABLE';
  const error = e instanceof Error ? e.message : String(e);
  if (code === 'STORAGE_MISCONFIGURED') {
    deps.log.error('export_storage_misconfigured', { job_id: jobId, error });
    return new HttpError(503, code,
      'The export file cannot be read now: the file store refused this server\'s credentials (an operator must fix its Storage key). The file is kept: try again later.');
  }
  deps.log.warn('export_storage_unavailable', { job_id: jobId, error });
  return new HttpError(503, code, 'The export file cannot be read now: the file store did not answer. The file is kept: try again in a minute.');
}

async function listPortals(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  const rows = await ownPortals(deps.sql, user.claims);
  const limits = await hubspotPortalLimits(deps.sql, rows.map((p) => p.hubspot_portal_id));
  return json(200, {
    portals: rows.map((p) => ({
      id: p.id, hubspotPortalId: Number(p.hubspot_portal_id), name: p.name, createdAt: p.created_at,
      authKind: p.auth_kind, disconnectedAt: p.disconnected_at, disconnectedReason: p.disconnected_reason,
      hubspotLimits: limits.get(String(p.hubspot_portal_id)) ?? NO_LIMITS_KNOWN,
    })),
  });
}

async function listRuns(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
  const q = parseQuery(runsQuery, req, 'Optional: ?portalId=<uuid>&kind=fetch|export&limit=1..100&cursor=<nextCursor>.');
  const limit = q.limit ?? 20;
  const after = q.cursor === undefined ? null : decodeRunCursor(q.cursor);
  if (q.cursor !== undefined && !after) {
    throw new HttpError(400, 'INVALID_QUERY', 'cursor must be a nextCursor from a previous page.', { fieldErrors: [{ path: 'cursor', message: 'not a cursor' }] });
  }
  const rows = await userRuns(deps.sql, user.claims, { portalId: q.portalId, kind: q.kind, after, limit });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return json(200, {
    runs: page.map((r) => runJson(r, r.items_done === null ? null : Number(r.items_done), r.items_total === null ? null : Number(r.items_total))),
    nextCursor: rows.length > limit && last ? encodeRunCursor(last.cursor_at, last.id) : null,
  });
}

/**
 * Streams an export job's file: to its owner (`user`, RLS decides), or to
 * whoever holds a current signed link (`link`: the query of result.url).
 */
async function downloadExport(deps: OrchestratorDeps, user: VerifiedUser | null, rawId: string, link?: URLSearchParams): Promise<Response> {
  const id = exportJobId.safeParse(rawId);
  if (!id.success) throw new HttpError(400, 'INVALID_PATH', 'Use /orchestrator/exports/<export job id>.', { fieldErrors: fieldErrors(id.error).map((f) => ({ ...f, path: 'jobId' })) });
  if (!user) {
    if (!deps.exportLinks || !(await deps.exportLinks.verify(id.data, link?.get('expires') ?? null, link?.get('signature') ?? null))) {
      throw new HttpError(403, 'LINK_INVALID', 'This download link is invalid or has expired: get a fresh one (result.url of GET ?runId=), or send your access token.');
    }
  }
  const job = await downloadJob(deps.sql, user ? user.claims : null, id.data);
  if (!job || job.kind !== 'export') throw new HttpError(404, 'EXPORT_NOT_FOUND', 'No such export job among yours.');
  const location = (job.result as { location?: unknown } | null)?.location;
  if (job.status !== 'completed') throw exportNotDownloadable(job);
  if (typeof location !== 'string') throw new HttpError(410, FILE_GONE.code, FILE_GONE.message);
  if (!deps.exportFiles) throw new HttpError(501, 'DOWNLOADS_UNAVAILABLE', 'This orchestrator has no export store configured (EXPORT_DIR, or SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY).');
  let file;
  try {
    file = await deps.exportFiles.open(location);
  } catch (e) {
    if (e instanceof ExportStoreError) throw exportStoreFailure(deps, job.id as string, e);
    throw e;
  }
  if (!file) throw new HttpError(410, FILE_GONE.code, FILE_GONE.message);
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
  if (!(await isQueueOperator(deps.sql, user.userId))) throw new HttpError(403, 'NOT_AN_OPERATOR', 'Queue statistics are for operators (app_metadata.queue_operator = true).');
  return json(200, { stats: await readQueueStats(deps.sql) });
}

async function stop(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof stopRunBody>): Promise<Response> {
  if (!(await isOwnRun(deps.sql, user.claims, body.runId))) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  const stopped = await stopRun(deps.sql, body.runId);
  const status = (await runStatus(deps.sql, body.runId)) ?? undefined;
  deps.log.info('run_stop_requested', { run_id: body.runId, stopped });
  return json(200, { runId: body.runId, stopped, status });
}

function keysMissing(): HttpError {
  return new HttpError(503, 'TOKEN_KEYS_MISSING', 'This orchestrator cannot store HubSpot tokens: HUBSPOT_TOKEN_KEYS is not set. Nothing was stored.');
}

/** The encryption keys, or 503 before anything is asked or written. */
function requireKeys(deps: OrchestratorDeps): TokenKeyring {
  if (!deps.tokenKeys) throw keysMissing();
  return deps.tokenKeys;
}

/** 401 when the signed-in user was deleted since their token was issued (nothing can be connected to them). */
async function requireExistingUser(deps: OrchestratorDeps, user: VerifiedUser): Promise<void> {
  if (!(await userExists(deps.sql, user.userId))) throw new HttpError(401, 'UNAUTHENTICATED', 'Your user no longer exists: sign in again.');
}

async function connect(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof connectPortalBody>): Promise<Response> {
  const keys = requireKeys(deps);
  await requireExistingUser(deps, user);
  // A reconnect with a token this user already stored: its portal is known, so the call waits for the shared budget.
  const known = await knownHubSpotPortalForToken(deps.sql, keys, user.userId, body.accessToken);
  let hubspotPortalId: number;
  let details: Awaited<ReturnType<HubSpotContentClient['accountDetails']>>;
  let firstAnswer: RateLimitHeaders | null = null; // the portal's limits, as HubSpot's first answer says
  try {
    details = await deps.hubspotClient({ accessToken: body.accessToken }, known, 'private_app', (h) => void (firstAnswer ??= h)).accountDetails();
    hubspotPortalId = Number(details.portalId);
  } catch (e) {
    if (e instanceof HubSpotAuthError) throw new HttpError(400, 'HUBSPOT_TOKEN_REJECTED', e.message);
    throw hubspotFailure(e);
  }
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not return a portal id; nothing was stored.');
  }
  // Otherwise the portal was learnt from the answer: the request is counted in its budget now.
  if (known !== String(hubspotPortalId)) await recordHubSpotRequest(deps.sql, hubspotPortalId);
  await recordHubSpotTimeZone(deps.sql, hubspotPortalId, details.timeZone); // where its daily limit resets
  if (firstAnswer && known !== String(hubspotPortalId)) await recordHubSpotRateHeaders(deps.sql, hubspotPortalId, firstAnswer);
  const portalId = await connectPrivateAppPortal(deps.sql, keys, { ownerId: user.userId, hubspotPortalId, name: body.name, accessToken: body.accessToken });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId, auth_kind: 'private_app' });
  return json(201, { portalId, hubspotPortalId, name: body.name });
}

/** The install configuration, or 501 (nothing is done without it). */
function requireInstall(deps: OrchestratorDeps): OAuthInstallConfig {
  if (!deps.oauthInstall) {
    throw new HttpError(501, 'OAUTH_NOT_CONFIGURED',
      'Connecting with HubSpot OAuth is not configured here (HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET, HUBSPOT_REDIRECT_URI). Connect with a private app token instead.');
  }
  return deps.oauthInstall;
}

/** Starts an install: a state bound to the user (stored hashed), and HubSpot's authorize URL with it and the PKCE challenge. */
async function startInstall(deps: OrchestratorDeps, user: VerifiedUser, _body: z.infer<typeof startInstallBody>): Promise<Response> {
  const cfg = requireInstall(deps);
  requireKeys(deps);
  await requireExistingUser(deps, user);
  const state = newInstallState();
  const expiresAt = await createInstallState(deps.sql, user.userId, await installStateHash(state));
  const challenge = await pkceChallenge(await pkceVerifier(cfg.clientSecret, state));
  deps.log.info('hubspot_install_started', { user_id: user.userId });
  return json(200, { authorizeUrl: authorizeUrl(cfg, state, challenge), expiresAt: expiresAt.toISOString() });
}

/**
 * Completes an install with the redirect's parameters: the state must be one
 * this user started, unexpired and unused (consumed here, once); then the code
 * is exchanged at HubSpot's v3 token endpoint with the PKCE verifier, and the
 * portal (hub id from the token answer) is connected to the user with its
 * tokens encrypted. Nothing is written for a refused state or a denied install.
 */
async function completeInstall(deps: OrchestratorDeps, user: VerifiedUser, raw: unknown): Promise<Response> {
  const cfg = requireInstall(deps);
  const body = parse(completeInstallBody, raw);
  const keys = requireKeys(deps);
  await requireExistingUser(deps, user);
  if (!(await consumeInstallState(deps.sql, user.userId, await installStateHash(body.state)))) {
    throw new HttpError(400, 'OAUTH_STATE_INVALID',
      'This install cannot be completed: its state is unknown, expired (an install must finish before the expiresAt its start answered), already used, or was started by another user. Start connecting again. Nothing was connected.');
  }
  if (body.error !== undefined) {
    deps.log.info('hubspot_install_denied', { user_id: user.userId, error: body.error });
    if (body.error === 'access_denied') {
      throw new HttpError(403, 'HUBSPOT_ACCESS_DENIED', 'HubSpot access was not granted: the install was cancelled on HubSpot, so no portal was connected. Start connecting again and approve the app to connect a portal.');
    }
    throw new HttpError(400, 'HUBSPOT_INSTALL_FAILED', `HubSpot did not complete the install (${body.error}): no portal was connected. Start connecting again.`);
  }
  let token;
  try {
    token = await postOAuthToken({ basePath: cfg.tokenBasePath, requestTimeoutMs: cfg.requestTimeoutMs }, {
      grant_type: 'authorization_code',
      client_id: cfg.clientId,
      client_secret: cfg.clientSecret,
      redirect_uri: cfg.redirectUri,
      code: body.code!,
      code_verifier: await pkceVerifier(cfg.clientSecret, body.state),
    });
  } catch (e) {
    throw tokenExchangeFailure(deps, e);
  }
  if (!token.refreshToken) throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot answered the install without a refresh token; nothing was stored. Start connecting again.');
  let hubspotPortalId = token.hubId;
  let timeZone: unknown;
  if (hubspotPortalId === null) {
    // An answer without hub_id: the account details of the new token say which portal it is (counted in its budget).
    try {
      const details = await deps.hubspotClient({ accessToken: token.accessToken }, null).accountDetails();
      hubspotPortalId = Number(details.portalId);
      timeZone = details.timeZone;
    } catch (e) {
      throw hubspotFailure(e);
    }
    if (Number.isSafeInteger(hubspotPortalId) && hubspotPortalId > 0) await recordHubSpotRequest(deps.sql, hubspotPortalId);
  } else if (Number.isSafeInteger(hubspotPortalId) && hubspotPortalId > 0) {
    // The account's time zone (where its daily limit resets): best effort, the install does not depend on it.
    timeZone = await deps.hubspotClient({ accessToken: token.accessToken }, String(hubspotPortalId), 'oauth').accountDetails()
      .then((d) => d.timeZone, () => undefined);
  }
  if (timeZone !== undefined && Number.isSafeInteger(hubspotPortalId) && hubspotPortalId! > 0) await recordHubSpotTimeZone(deps.sql, hubspotPortalId!, timeZone);
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not say which portal was installed; nothing was stored. Start connecting again.');
  }
  const existing = await portalNameOf(deps.sql, user.userId, hubspotPortalId);
  const name = body.name ?? existing ?? `HubSpot portal ${hubspotPortalId}`;
  const portalId = await connectOAuthPortal(deps.sql, keys, {
    ownerId: user.userId,
    hubspotPortalId,
    name,
    accessToken: token.accessToken,
    refreshToken: token.refreshToken,
    expiresInSeconds: token.expiresIn,
    requestedAt: token.requestedAt,
    scopes: token.scopes,
    refreshMarginSeconds: cfg.refreshMarginSeconds,
  });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId, auth_kind: 'oauth', reconnect: existing !== null });
  return json(201, { portalId, hubspotPortalId, name });
}

/** What a failed code exchange tells the caller; the code is spent either way. */
function tokenExchangeFailure(deps: OrchestratorDeps, e: unknown): HttpError {
  if (!(e instanceof OAuthTokenError)) throw e;
  deps.log.warn('hubspot_code_exchange_failed', { status: e.status, code: e.code, retryable: e.retryable, correlation_id: e.correlationId });
  if (e.retryable) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not answer the install in time; nothing was connected. Start connecting again.');
  if (e.code === 'BAD_AUTH_CODE' || e.code === 'invalid_grant') {
    return new HttpError(400, 'HUBSPOT_CODE_REJECTED', 'HubSpot refused the install code (expired or already used); nothing was connected. Start connecting again.');
  }
  // A refused client id, secret or redirect URL is this deployment's configuration, not the user's doing.
  return new HttpError(502, 'HUBSPOT_OAUTH_REJECTED', 'HubSpot refused this app\'s OAuth settings (client id, secret or redirect URL): the operator must check them. Nothing was connected.');
}
