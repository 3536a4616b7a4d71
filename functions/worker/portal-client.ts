// The HubSpot client a job uses for its portal: the portal's token source,
// the portal's shared request budget (its limits learned from HubSpot's
// answers), waits capped by the invocation's time.
import { createHubSpotClient, type HubSpotContentClient, type HubSpotClientOptions } from '../../shared/hubspot/client.ts';
import { portalTokenSource } from '../../shared/hubspot/oauth-tokens.ts';
import type { RateLimitHeaders } from '../../shared/hubspot/transport.ts';
import { rateLimitLearner, sharedRequestBudget } from '../../shared/hubspot-budget.ts';
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
 * A HubSpot client for the portal: its token from the portal's token source (sealed
 * in the database, OAuth tokens refreshed once for every worker), every request
 * drawing on the portal's shared request budget, its waits capped by the time left.
 */
export async function hubspotForPortal(
  rt: WorkerRuntime, portalId: string, workerId: string, timeLeft: () => number, claimed?: ClaimedAccess,
): Promise<HubSpotContentClient> {
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
  const make = rt.hubspot ?? createHubSpotClient;
  return make({
    tokens,
    basePath: s.hubspotBasePath,
    requestTimeoutMs: s.hubspotRequestTimeoutMs,
    beforeRequest: sharedRequestBudget(rt.sql, tokens.hubspotPortalId, s.rateLimit, undefined, timeLeft, tokens.authKind, claimed?.granted),
    onRateLimitHeaders: claimed?.onRateLimitHeaders ?? rateLimitLearner(rt.sql, tokens.hubspotPortalId),
    timeLeft,
  } as HubSpotClientOptions);
}
