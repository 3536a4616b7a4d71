// The orchestrator's HTTP handler, dispatch only: a request is routed by
// method, path and body `action` to its route, which answers it. Routes:
// runs (./run-routes.ts), portals (./portal-routes.ts, ./portal-disconnect.ts),
// the OAuth install (./install-routes.ts), export files (./export-routes.ts;
// a signed link downloads one without a token), sync (./sync.ts), operator
// statistics (./stats-route.ts) and actions (./operator-routes.ts), a portal's
// HubSpot requests (./requests-route.ts), its stored content per type
// (./content-route.ts), publishing edits (./publish-routes.ts, the CSV upload
// ./publish-csv.ts). What the routes are given is ./deps.ts.
// Ownership is decided by RLS: every lookup of a user's rows runs as the user.
// The API is described by openapi.json, generated from ./schemas.ts and ./api.ts.
import { bearerToken, errorResponse, HttpError, preflightResponse, readJsonBody, requireJsonContentType } from '../../shared/http.ts';
import { healCronJobs, takeUserWrite } from '../../shared/sql/ops.ts';
import { TokenKeysMissing } from '../../shared/token-crypto.ts';
import { contentQuery, getStoredContent } from './content-route.ts';
import type { OrchestratorDeps } from './deps.ts';
import { downloadExport, latestExports } from './export-routes.ts';
import { completeInstall, startInstall } from './install-routes.ts';
import { disconnectOwnPortal } from './portal-disconnect.ts';
import { connect, listPortals } from './portal-routes.ts';
import { uploadCsv } from './publish-csv.ts';
import { approvePlan, createPlan, discardPlan, publishRead, rollbackRun } from './publish-routes.ts';
import { approvePlanBody, createPlanBody, discardPlanBody, rollbackRunBody } from './publish-schemas.ts';
import { keysMissing, notFound, parse, parseQuery, rateLimited } from './route-helpers.ts';
import { create, getRun, listRuns, stop } from './run-routes.ts';
import { connectPortalBody, createRunBody, disconnectPortalBody, startInstallBody, stopRunBody } from './schemas.ts';
import {
  jobAction, listOperatorJobs, listOperatorPortals, operatorJobsQuery, operatorRequestHistory, operatorRequestsQuery, pausePortalBody, portalPause,
  resumePortalBody, retryJobBody, stopJobBody,
} from './operator-routes.ts';
import { getRequests, requestsQuery } from './requests-route.ts';
import { queueStats } from './stats-route.ts';
import {
  changesQuery, deleteScheduleBody, deleteSyncSchedule, getSyncStatus, listChanges, setScheduleBody, setSyncSchedule, syncStatusQuery,
} from './sync.ts';

export type { HubSpotAuth, OrchestratorDeps } from './deps.ts';

/** The path segments after the function's name: `/functions/v1/orchestrator/runs` → `['runs']`. */
export function routeOf(url: string): string[] {
  const segments = new URL(url).pathname.split('/').filter(Boolean);
  const at = segments.indexOf('orchestrator');
  return at >= 0 ? segments.slice(at + 1) : segments;
}

/** The orchestrator asks whether the cron jobs need a touch at most this often (the worker asks at every invocation). */
export const CRON_HEAL_INTERVAL_MS = 60_000;

/** Builds the `(Request) => Promise<Response>` orchestrator handler. */
export function createOrchestratorHandler(deps: OrchestratorDeps): (req: Request) => Promise<Response> {
  let cronHealAskedAt = -Infinity;
  /** The cron jobs' self-heal (decision 0069): whatever wakes next touches jobs that never ran; logged, never fatal. */
  const healCron = async () => {
    if (Date.now() - cronHealAskedAt < CRON_HEAL_INTERVAL_MS) return;
    cronHealAskedAt = Date.now();
    try {
      const healed = await healCronJobs(deps.sql);
      if (healed) {
        deps.log.warn(healed.error ? 'cron_jobs_touch_failed' : 'cron_jobs_touched',
          { jobs: healed.touched, scheduledAt: healed.scheduledAt, noRunForSeconds: healed.noRunForSeconds, error: healed.error });
      }
    } catch (e) {
      deps.log.warn('cron_heal_error', { error: e instanceof Error ? e.message : String(e) });
    }
  };
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
      await healCron();
      if (req.method === 'GET') {
        if (route.length === 0) return await getRun(deps, user, req);
        if (route.length === 1 && route[0] === 'portals') return await listPortals(deps, user);
        if (route.length === 1 && route[0] === 'runs') return await listRuns(deps, user, req);
        if (route.length === 1 && route[0] === 'exports') return await latestExports(deps, user, req);
        if (route.length === 2 && route[0] === 'exports') return await downloadExport(deps, user, route[1]!);
        if (route.length === 1 && route[0] === 'stats') return await queueStats(deps, user);
        if (route.length === 1 && route[0] === 'requests') return await getRequests(deps, user, parseQuery(requestsQuery, req, 'Pass portalId (a uuid), optionally since (an ISO time).'));
        if (route.length === 2 && route[0] === 'operator') {
          if (route[1] === 'jobs') return await listOperatorJobs(deps, user, parseQuery(operatorJobsQuery, req, 'Optional: status, portalId, kind, since, until, limit (1-200), beforeId.'));
          if (route[1] === 'portals') return await listOperatorPortals(deps, user);
          if (route[1] === 'requests') return await operatorRequestHistory(deps, user, parseQuery(operatorRequestsQuery, req, 'Pass portalId (a uuid), optionally since.'));
        }
        if (route.length >= 2 && route[0] === 'publish') return await publishRead(deps, user, req, route);
        if (route.length === 1 && route[0] === 'content') return await getStoredContent(deps, user, parseQuery(contentQuery, req, 'Pass portalId (a uuid).'));
        if (route.length === 1 && route[0] === 'sync') return await getSyncStatus(deps, user, parseQuery(syncStatusQuery, req, 'Pass portalId (a uuid).'));
        if (route.length === 1 && route[0] === 'changes') {
          return await listChanges(deps, user, parseQuery(changesQuery, req, 'Pass portalId (a uuid), and optionally contentType, limit (1-500) and cursor.'));
        }
        throw notFound();
      }
      // An edited export, uploaded as text/csv (counted against the write limit there).
      if (route.length === 2 && route[0] === 'publish' && route[1] === 'csv') return await uploadCsv(deps, user, req);
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
      if (action === 'retry_job') return await jobAction(deps, user, parse(retryJobBody, body));
      if (action === 'stop_job') return await jobAction(deps, user, parse(stopJobBody, body));
      if (action === 'pause_portal') return await portalPause(deps, user, parse(pausePortalBody, body));
      if (action === 'resume_portal') return await portalPause(deps, user, parse(resumePortalBody, body));
      if (action === 'create_publish_plan') return await createPlan(deps, user, parse(createPlanBody, body));
      if (action === 'approve_publish_plan') return await approvePlan(deps, user, parse(approvePlanBody, body));
      if (action === 'rollback_publish_run') return await rollbackRun(deps, user, parse(rollbackRunBody, body));
      if (action === 'discard_publish_plan') return await discardPlan(deps, user, parse(discardPlanBody, body));
      return await create(deps, user, parse(createRunBody, body));
    } catch (e) {
      if (e instanceof HttpError) return e.toResponse();
      if (e instanceof TokenKeysMissing) return keysMissing().toResponse();
      deps.log.error('orchestrator_error', { error: e instanceof Error ? e.message : String(e) });
      return errorResponse(500, 'INTERNAL', 'Something went wrong on our side; nothing was changed. Try again.');
    }
  };
}
