// How the orchestrator reaches HubSpot, built in one place for the entrypoint
// (from-env.ts) and for tests: clients that wait for the portal's shared request
// budget and teach it the portal's limits from HubSpot's answers, connected portals' token sources (stored sealed, refreshed once for
// every caller) and the keys that seal tokens.
import type { Sql } from '../../shared/db.ts';
import { createHubSpotClient, type HubSpotClientOptions } from '../../shared/hubspot/client.ts';
import { portalTokenSource } from '../../shared/hubspot/portal-tokens.ts';
import { rateLimitLearner, sharedRequestBudget, type RateLimitSettings } from '../../shared/hubspot/request-budget.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import type { OrchestratorDeps } from './deps.ts';

export interface HubSpotDepsOptions {
  sql: Sql;
  /** HubSpot's API base (default https://api.hubapi.com). */
  basePath?: string;
  rateLimit: RateLimitSettings;
  /** HUBSPOT_TOKEN_KEYS, parsed; null: no token can be stored (connecting answers 503). */
  tokenKeys: TokenKeyring | null;
  /** The OAuth app that refreshes OAuth portals' tokens; null: only private-app portals work. */
  oauthApp: { clientId: string; clientSecret: string } | null;
  requestTimeoutMs?: number;
  refreshMarginSeconds?: number;
  /** Further client options (tests: fewer retries, shorter sleeps). */
  client?: Pick<HubSpotClientOptions, 'maxTransientRetries' | 'sleep'>;
}

/** The orchestrator's HubSpot dependencies. */
export function hubspotDeps(o: HubSpotDepsOptions): Pick<OrchestratorDeps, 'hubspotClient' | 'portalTokens' | 'tokenKeys'> {
  return {
    hubspotClient: (auth, hubspotPortalId, authKind = 'private_app', onRateLimitHeaders) => {
      const learn = hubspotPortalId ? rateLimitLearner(o.sql, hubspotPortalId) : undefined;
      return createHubSpotClient({
        ...o.client,
        ...auth,
        basePath: o.basePath,
        requestTimeoutMs: o.requestTimeoutMs,
        // The portal's learned limits; its answers' rate-limit headers teach the budget.
        beforeRequest: hubspotPortalId ? sharedRequestBudget(o.sql, hubspotPortalId, o.rateLimit, undefined, undefined, authKind) : undefined,
        onRateLimitHeaders: learn || onRateLimitHeaders
          ? async (h) => {
            onRateLimitHeaders?.(h);
            await learn?.(h);
          }
          : undefined,
      });
    },
    portalTokens: (portalId) =>
      portalTokenSource(
        {
          sql: o.sql,
          keys: o.tokenKeys,
          oauthApp: o.oauthApp,
          holderId: 'orchestrator',
          basePath: o.basePath,
          rateLimit: o.rateLimit,
          requestTimeoutMs: o.requestTimeoutMs,
          refreshMarginSeconds: o.refreshMarginSeconds,
          sleep: o.client?.sleep,
        },
        portalId,
      ),
    tokenKeys: o.tokenKeys,
  };
}
