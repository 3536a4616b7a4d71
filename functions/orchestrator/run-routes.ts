// The run routes: create a run (fetch or export; HubSpot's totals counted once
// per burst), read one with its jobs, list the user's runs, stop one. Every
// lookup of the user's rows runs as the user (RLS); create_run decides
// duplicates race-free.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import type { PortalTokenSource } from '../../shared/hubspot/portal-tokens.ts';
import { HttpError, json } from '../../shared/http.ts';
import { hubspotLimitsOfPortal, NO_LIMITS_KNOWN, recordHubSpotTimeZone, timeZoneLearnedAt } from '../../shared/sql/budget.ts';
import { ownPortal as readOwnPortal } from '../../shared/sql/portals.ts';
import { createdJobs, createRun, inFlightRuns, isOwnRun, runStatus, runWithJobs, stopRun, userRuns, type RunRow } from '../../shared/sql/runs.ts';
import type { OrchestratorDeps } from './deps.ts';
import { freshResult } from './export-results.ts';
import { allDuplicates, hubspotFailure, parseQuery } from './route-helpers.ts';
import { decodeRunCursor, encodeRunCursor } from './run-cursor.ts';
import { runQuery, runsQuery, type createRunBody, type stopRunBody } from './schemas.ts';

/** The caller's portal as RLS lets them see it, or 404. */
async function ownPortal(deps: OrchestratorDeps, user: VerifiedUser, portalId: string): Promise<{ id: string; hubspotPortalId: string; disconnectedReason: string | null }> {
  const portal = await readOwnPortal(deps.sql, user.claims, portalId);
  if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return { id: portal.id, hubspotPortalId: String(portal.hubspot_portal_id), disconnectedReason: portal.disconnected_reason ?? null };
}

export async function create(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof createRunBody>): Promise<Response> {
  const kind = body.kind ?? 'fetch';
  const fetchMode = kind === 'fetch' ? (body.fetchMode ?? 'full') : undefined;
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
    const countKey = `${portal.id}:${fetchMode}:${fresh.join(',')}`;
    if (!countsInFlight.has(countKey)) {
      // A burst's requests read no run at first; by now the first of them may have made one: no counting for it.
      const since = await inFlightRuns(deps.sql, portal.id, kind, fresh);
      if (fresh.every((t) => t in since)) throw allDuplicates(requested, { ...active, ...since });
    }
    const shared = sharedCounts(countKey, async () => {
      // Changes only: how many will change is unknown, and HubSpot's totals would be the whole portal's. Not counted.
      const counted = fetchMode === 'incremental' ? null : await Promise.all(fresh.map((t) => client.countTotal(t)));
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
    result = await createRun(deps.sql, { portalId: portal.id, requestedBy: user.userId, kind, contentTypes: fresh, totals, fetchMode });
  } finally {
    releaseCounts(); // the run exists now (or not at all): later requests see it and answer without counting
  }
  if (!result.runId) throw allDuplicates(requested, { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) });
  deps.wakeWorker();
  const duplicateTypes = [...requested.filter((t) => t in active), ...result.duplicateTypes];
  const duplicateRunIds = { ...active, ...(await inFlightRuns(deps.sql, portal.id, kind, result.duplicateTypes)) };
  const jobs = await createdJobs(deps.sql, result.runId);
  deps.log.info('run_created', { run_id: result.runId, kind, fetch_mode: fetchMode ?? null, created: result.createdTypes.length, duplicates: duplicateTypes.length });
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
const countsInFlight = new Map<string, Promise<number[] | null>>();

function sharedCounts(key: string, count: () => Promise<number[] | null>): { totals: Promise<number[] | null>; release: () => void } {
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

function runJson(run: RunRow, itemsDone: number | null, itemsTotal: number | null) {
  return {
    id: run.id, portalId: run.portal_id, kind: run.kind, status: run.status, contentTypes: run.content_types,
    jobsTotal: run.jobs_total, jobsCompleted: run.jobs_completed, jobsFailed: run.jobs_failed, jobsStopped: run.jobs_stopped,
    itemsDone, itemsTotal,
    waitingReason: run.waiting_reason_text ?? null, waitingReasonCode: run.waiting_reason_code ?? null, waitingUntil: run.waiting_until ?? null,
    createdAt: run.created_at, startedAt: run.started_at, finishedAt: run.finished_at,
    trigger: run.trigger, fetchMode: run.fetch_mode ?? null,
  };
}

export async function getRun(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
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
      id: j.id, kind: j.kind, contentType: j.content_type, status: j.status, attempts: j.attempts, maxAttempts: j.max_attempts,
      done: j.progress_done, total: j.progress_total, lastError: j.last_error, result: results[i],
      waitingReason: j.waiting_reason_text, waitingReasonCode: j.waiting_reason_code, waitingUntil: j.waiting_until,
      retryingUntil: j.retrying_until, startedAt: j.started_at, finishedAt: j.finished_at,
    })),
    hubspotLimits: (await hubspotLimitsOfPortal(deps.sql, run.portal_id as string)) ?? NO_LIMITS_KNOWN,
  });
}

export async function listRuns(deps: OrchestratorDeps, user: VerifiedUser, req: Request): Promise<Response> {
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

export async function stop(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof stopRunBody>): Promise<Response> {
  if (!(await isOwnRun(deps.sql, user.claims, body.runId))) throw new HttpError(404, 'RUN_NOT_FOUND', 'No such run among yours.');
  const stopped = await stopRun(deps.sql, body.runId);
  const status = (await runStatus(deps.sql, body.runId)) ?? undefined;
  deps.log.info('run_stop_requested', { run_id: body.runId, stopped });
  return json(200, { runId: body.runId, stopped, status });
}
