// The HubSpot clients a job uses for its portal (content reads; a publish's
// writes): the portal's token source, the portal's shared request budget (its
// limits learned from HubSpot's answers), waits capped by the invocation's time.
import { createHubSpotClient, type HubSpotContentClient, type HubSpotClientOptions } from '../../shared/hubspot/client.ts';
import { portalTokenSource } from '../../shared/hubspot/portal-tokens.ts';
import type { RateLimitHeaders } from '../../shared/hubspot/transport.ts';
import { createHubSpotWriteClient, type HubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import { rateLimitLearner, sharedRequestBudget } from '../../shared/hubspot/request-budget.ts';
import type { FirstTokenClaim } from '../../shared/sql/credentials.ts';
import { PermanentJobError } from './job-context.ts';
import type { WorkerRuntime } from './runtime.ts';

/**
 * What a schedule probe's claim handed out already (claim_schedule_probe): the
 * token source's first look-up, the requests granted, and where the answers'
 * rate headers go instead of the database (the report records the last one).
 */
export interface ClaimedAccess {
  token: FirstTokenClaim | null;
  granted: number;
  onRateLimitHeaders: (h: RateLimitHeaders) => void;
}

/**
 * The options every HubSpot client of the portal is made with: its token from the
 * portal's token source (sealed in the database, OAuth tokens refreshed once for
 * every worker), every request drawing on the portal's shared request budget,
 * its waits capped by the time left.
 */
async function portalClientOptions(
  rt: WorkerRuntime, portalId: string, workerId: string, timeLeft: () => number, claimed?: ClaimedAccess,
): Promise<HubSpotClientOptions> {
  const s = rt.settings;
  const tokens = await portalTokenSource({
    sql: rt.sql,
    keys: rt.tokenKeys ?? null,
    oauthApp: rt.oauthApp ?? null,
    holderId: workerId,
    basePath: s.hubspotBasePath,
    rateLimit: s.rateLimit,
    timeLeft,
    requestTimeoutMs: s.hubspotRequestTimeoutMs,
    refreshMarginSeconds: s.tokenRefreshMarginSeconds,
    // Once per isolate while HubSpot keeps refusing the app's client id or secret (the operator's to fix).
    onAppRejected: (e) => rt.log.error('hubspot_oauth_app_rejected', { error: e.message, status: e.status, code: e.category }),
  }, portalId, claimed?.token ?? undefined);
  if (!tokens) throw new PermanentJobError('The portal has no HubSpot connection: reconnect HubSpot and try again.');
  return {
    tokens,
    basePath: s.hubspotBasePath,
    requestTimeoutMs: s.hubspotRequestTimeoutMs,
    beforeRequest: sharedRequestBudget(rt.sql, tokens.hubspotPortalId, s.rateLimit, undefined, timeLeft, tokens.authKind, claimed?.granted),
    onRateLimitHeaders: claimed?.onRateLimitHeaders ?? rateLimitLearner(rt.sql, tokens.hubspotPortalId),
    timeLeft,
  } as HubSpotClientOptions;
}

/** A HubSpot content client for the portal (reads: lists, counts, probes). */
export async function hubspotForPortal(
  rt: WorkerRuntime, portalId: string, workerId: string, timeLeft: () => number, claimed?: ClaimedAccess,
): Promise<HubSpotContentClient> {
  const make = rt.hubspot ?? createHubSpotClient;
  return make(await portalClientOptions(rt, portalId, workerId, timeLeft, claimed));
}

/** A HubSpot write client for the portal (a publish's batches), under the same token source and request budget. */
export async function hubspotWritesForPortal(rt: WorkerRuntime, portalId: string, workerId: string, timeLeft: () => number): Promise<HubSpotWriteClient> {
  const make = rt.hubspotWrites ?? createHubSpotWriteClient;
  return make(await portalClientOptions(rt, portalId, workerId, timeLeft));
}
