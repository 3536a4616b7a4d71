// A portal's token source: its stored token, opened for each request (a
// private-app token as stored; an OAuth access token refreshed once per expiry
// for every worker at once).
//
// The database decides who refreshes (claim_portal_token, one call under
// the credentials row's lock): a token due for refresh (its expiry minus a
// margin) or refused with a 401 while still current gives the caller the
// portal's refresh lease; everyone else keeps using the still-valid token, or
// polls briefly (one call per poll: no LISTEN, no session locks) until the new
// one is stored. The refresh itself is one POST to HubSpot's v3 token endpoint
// (oauth-http.ts), counted in the portal's shared request budget.
// A refresh token HubSpot refuses (BAD_REFRESH_TOKEN / invalid_grant, or any other
// refusal after which the v3 introspection endpoint calls it inactive: the app was
// uninstalled) disconnects the portal and fails its fetch jobs for good
// (disconnect_portal), but only while this caller still holds the refresh lease: a
// portal reconnected meanwhile, or a refresh lease taken over, is left alone.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../db.ts';
import { requireTokenKeys, TokenDecryptionError, TokenKeysMissing, type TokenKeyring } from '../token-crypto.ts';
import { DeadlineReached, HubSpotAccessRemoved, HubSpotError, HubSpotOAuthAppRejected, HubSpotTransientError } from './errors.ts';
import {
  introspectOAuthToken, OAUTH_DEFAULT_BASE_PATH, OAuthTokenError, postOAuthToken, TOKEN_REQUEST_TIMEOUT_MS, type OAuthTokenResponse,
} from './oauth-http.ts';
import { sharedRequestBudget, type RateLimitSettings } from './request-budget.ts';
import { openStoredToken, sealToken, type TokenPlace } from './token-sealing.ts';
import type { AccessToken, AccessTokenSource } from './transport.ts';
import {
  abandonTokenRefresh, claimPortalToken, completeTokenRefresh, disconnectPortal, holderOf, type FirstTokenClaim, type TokenClaim,
} from '../sql/credentials.ts';

/** Named settings of the shared refresh, with their defaults. */
export const TOKEN_REFRESH_DEFAULTS = {
  /** Refresh this long before expiry (capped at a quarter of the token's lifetime). */
  refreshMarginSeconds: 300,
  /** How long a refresh lease is held before another caller may take over. */
  refreshLeaseSeconds: 30,
  /** While another caller refreshes, the current token is still used if it has at least this long left. */
  minValidSeconds: 5,
  /** Timeout of one token request. */
  requestTimeoutMs: TOKEN_REQUEST_TIMEOUT_MS,
  /** A token request must end this long before the refresh lease does. */
  refreshLeaseMarginMs: 1_000,
  /** A token request gets at least this long, or the refresh lease is given back and claimed again. */
  minRequestMs: 500,
  /** After HubSpot refused the app's client id or secret, refreshes in this isolate fail at once for this long. */
  appRejectedHoldMs: 60_000,
} as const;

export interface PortalTokenDeps {
  sql: Sql;
  keys: TokenKeyring | null;
  /** The OAuth app; without it an OAuth portal's token cannot be refreshed. */
  oauthApp: { clientId: string; clientSecret: string } | null;
  /** Who holds a refresh lease: the worker lane's id, or 'orchestrator'. Made unique per source. */
  holderId: string;
  basePath?: string;
  rateLimit: RateLimitSettings;
  /** Milliseconds the caller has left; no wait or refresh runs past it (DeadlineReached). */
  timeLeft?: () => number;
  requestTimeoutMs?: number;
  refreshMarginSeconds?: number;
  refreshLeaseSeconds?: number;
  minValidSeconds?: number;
  /** Waits (polling for another caller's refresh, the request budget); ends early with the signal. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  now?: () => number;
  /** Called once per isolate and hold period when HubSpot refuses the app's client id or secret. */
  onAppRejected?: (error: HubSpotOAuthAppRejected) => void;
}

export interface PortalTokenSource extends AccessTokenSource {
  readonly portalId: string;
  readonly hubspotPortalId: string;
  readonly authKind: 'private_app' | 'oauth';
}

/** The stored credentials cannot be read (no keys, wrong or removed key). Permanent until fixed or reconnected. */
export class StoredTokenUnreadable extends HubSpotError {
  constructor(message: string) {
    super(message, false, { status: null });
  }
}

interface Cached extends AccessToken {
  /** This clock's ms after which the token is due for refresh (Infinity: never). */
  refreshAt: number;
}

/** What a refresh attempt came to, short of a new token. */
type RefreshMiss =
  | { kind: 'lost' } // the refresh lease is not ours any more (reconnected, taken over): ask again
  | { kind: 'disconnected' } // this call disconnected the portal: ask again to read the message
  | { kind: 'retry'; afterMs: number }; // the refresh lease was too short for the budget wait or the request: given back

/**
 * HubSpot refused the app's client id or secret (per app and token endpoint):
 * until when refreshes in this isolate fail at once, and the error they throw.
 */
const appRejections = new Map<string, { until: number; error: HubSpotOAuthAppRejected }>();

/**
 * The token source for a portal: null when the portal is unknown or has no
 * credentials. Throws HubSpotAccessRemoved for a disconnected portal.
 */
export async function portalTokenSource(deps: PortalTokenDeps, portalId: string, first?: FirstTokenClaim): Promise<PortalTokenSource | null> {
  const source = new PortalTokens(deps, portalId, first);
  return (await source.start()) ? source : null;
}

class PortalTokens implements PortalTokenSource {
  hubspotPortalId = '';
  authKind: 'private_app' | 'oauth' = 'private_app';
  private ownerId = '';
  private cached: Cached | null = null;
  private inFlight: { key: string | null; promise: Promise<AccessToken | null> } | null = null;
  private readonly holder: string;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(private readonly deps: PortalTokenDeps, readonly portalId: string, private readonly first?: FirstTokenClaim) {
    this.holder = first?.holder ?? holderOf(deps.holderId);
    this.now = deps.now ?? Date.now;
    this.sleep = deps.sleep ?? ((ms, signal) => sleep(ms, undefined, { signal }));
  }

  /** First look-up: false when the portal has no credentials. */
  async start(): Promise<boolean> {
    return (await this.obtain(null, undefined, this.first)) !== null;
  }

  async current(signal?: AbortSignal): Promise<AccessToken> {
    if (this.cached && this.now() < this.cached.refreshAt) return this.cached;
    const access = await this.shared(null, () => this.obtain(null, signal));
    if (!access) throw new StoredTokenUnreadable('The portal has no HubSpot connection any more: reconnect HubSpot and try again.');
    return access;
  }

  async renewAfterRejection(rejected: AccessToken, signal?: AbortSignal): Promise<boolean> {
    if (rejected.version === null) return false;
    if (this.cached && this.cached.version !== rejected.version) return true; // already renewed here
    const access = await this.shared(rejected.version, () => this.obtain(rejected.version, signal));
    return access !== null && access.version !== rejected.version;
  }

  // Callers of one source share one look-up at a time (a renewal after a 401 waits for a plain look-up, then asks itself).
  private async shared(key: string | null, run: () => Promise<AccessToken | null>): Promise<AccessToken | null> {
    while (this.inFlight) {
      const other = this.inFlight;
      if (other.key === key) return other.promise;
      await other.promise.catch(() => undefined);
      if (key !== null && this.cached && this.cached.version !== key) return this.cached;
    }
    const promise = run().finally(() => {
      this.inFlight = null;
    });
    this.inFlight = { key, promise };
    return promise;
  }

  /** Waits `ms` (shortened by the signal), unless that would pass the caller's deadline. */
  private async pause(ms: number, what: string, signal?: AbortSignal): Promise<void> {
    const d = this.deps;
    if (d.timeLeft && d.timeLeft() < ms + 1_000) throw new DeadlineReached(`${what} would pass the deadline`, ms);
    await this.sleep(ms, signal);
  }

  /** Asks the database what to do until there is a token to use (or none). `usedVersion`: the token HubSpot refused; `first`: its first answer, given already. */
  private async obtain(usedVersion: string | null, signal?: AbortSignal, first?: FirstTokenClaim): Promise<AccessToken | null> {
    const d = this.deps;
    for (;;) {
      signal?.throwIfAborted();
      const askedAt = first?.askedAt ?? this.now();
      const row = first ? first.claim : await claimPortalToken(d.sql, this.portalId, this.holder, usedVersion,
        d.refreshLeaseSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshLeaseSeconds, d.minValidSeconds ?? TOKEN_REFRESH_DEFAULTS.minValidSeconds);
      first = undefined;
      if (!row) return null;
      this.hubspotPortalId = String(row.hubspot_portal_id);
      this.ownerId = String(row.owner_id);
      this.authKind = row.auth_kind;
      switch (row.decision) {
        case 'disconnected':
          this.cached = null;
          throw new HubSpotAccessRemoved(row.disconnected_reason ?? 'disconnected', row.disconnected_message ?? 'HubSpot access was removed: reconnect the portal.');
        case 'use':
          return this.remember(row, askedAt, await this.open(row));
        case 'wait':
          await this.pause(Math.max(20, row.wait_ms ?? 100), 'waiting for another worker\'s token refresh', signal);
          continue;
        case 'refresh': {
          const fresh = await this.refresh(row, askedAt, signal);
          if (!('kind' in fresh)) return fresh;
          if (fresh.kind === 'retry' && fresh.afterMs > 0) await this.pause(fresh.afterMs, 'waiting for room for a token refresh', signal);
          // The refresh lease was lost or given back, or the portal disconnected: the database says what now.
          usedVersion = fresh.kind === 'retry' ? usedVersion : null;
          continue;
        }
      }
    }
  }

  private remember(row: TokenClaim, askedAt: number, token: string): AccessToken {
    let refreshAt = Infinity;
    if (row.refresh_in_ms !== null) {
      const dueIn = Number(row.refresh_in_ms);
      // Already due (another caller is refreshing; this token is still valid a while): ask again shortly.
      refreshAt = askedAt + (dueIn > 0 ? dueIn : Math.min(250, Math.max(0, Number(row.expires_in_ms ?? 0)) / 4));
    }
    this.cached = { token, version: String(row.token_version), refreshAt };
    return this.cached;
  }

  private async open(row: TokenClaim): Promise<string> {
    if (row.access_token_enc === null) {
      if (row.access_token_legacy !== null) return row.access_token_legacy; // a legacy row, sealed by the next rotation step
      throw new StoredTokenUnreadable('The portal has no HubSpot token stored: reconnect HubSpot and try again.');
    }
    return this.unseal(row.access_token_enc, 'access');
  }

  private place(): TokenPlace {
    return { ownerId: this.ownerId, hubspotPortalId: this.hubspotPortalId };
  }

  private async unseal(sealed: string, field: 'access' | 'refresh'): Promise<string> {
    try {
      return await openStoredToken(requireTokenKeys(this.deps.keys), sealed, field, this.place());
    } catch (e) {
      if (e instanceof TokenDecryptionError || e instanceof TokenKeysMissing) throw new StoredTokenUnreadable(e.message);
      throw e;
    }
  }

  /**
   * Refreshes as the refresh lease holder. Everything HubSpot is asked happens inside
   * the refresh lease: the budget wait is capped at what is left of it, and each request's
   * timeout ends a margin before it, so no second refresh can start while this
   * one may still be answered. Gives the refresh lease back on any failure.
   */
  private async refresh(row: TokenClaim, askedAt: number, signal?: AbortSignal): Promise<AccessToken | RefreshMiss> {
    const d = this.deps;
    const app = d.oauthApp;
    let released = false;
    // The refresh lease started after askedAt (the database's clock at the claim), so it lasts at least its length from then here.
    const refreshLeaseEnd = askedAt + (d.refreshLeaseSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshLeaseSeconds) * 1000 - TOKEN_REFRESH_DEFAULTS.refreshLeaseMarginMs;
    const refreshLeaseLeft = () => refreshLeaseEnd - this.now();
    const deadlineLeft = () => (d.timeLeft ? d.timeLeft() - 1_000 : Infinity);
    /** A request timeout that ends inside the refresh lease and before the deadline; null when too little is left. */
    const requestTimeout = (): number | null => {
      if (deadlineLeft() < TOKEN_REFRESH_DEFAULTS.minRequestMs) throw new DeadlineReached('no time left for a token refresh before the deadline');
      const ms = Math.min(d.requestTimeoutMs ?? TOKEN_REFRESH_DEFAULTS.requestTimeoutMs, refreshLeaseLeft(), deadlineLeft());
      return ms < TOKEN_REFRESH_DEFAULTS.minRequestMs ? null : ms;
    };
    try {
      if (!app) {
        throw new StoredTokenUnreadable('The portal is connected through the HubSpot app, but HUBSPOT_CLIENT_ID / HUBSPOT_CLIENT_SECRET are not set: its token cannot be refreshed.');
      }
      const appKey = `${d.basePath ?? OAUTH_DEFAULT_BASE_PATH}|${app.clientId}`;
      const rejected = appRejections.get(appKey);
      if (rejected && rejected.until > this.now()) throw rejected.error;
      const refreshToken = await this.unseal(row.refresh_token_enc!, 'refresh');
      const budget = sharedRequestBudget(d.sql, this.hubspotPortalId, d.rateLimit, (ms) => this.sleep(ms, signal),
        () => Math.min(refreshLeaseLeft() - TOKEN_REFRESH_DEFAULTS.minRequestMs, d.timeLeft ? d.timeLeft() : Infinity));
      try {
        await budget();
      } catch (e) {
        // The budget asks for a longer wait than the refresh lease has left (not the caller's deadline): give it back, wait, claim again.
        if (e instanceof DeadlineReached && e.waitMs !== null && !(d.timeLeft && e.waitMs >= d.timeLeft())) {
          return { kind: 'retry', afterMs: Math.min(e.waitMs, 1_000) };
        }
        throw e;
      }
      const timeoutMs = requestTimeout();
      if (timeoutMs === null) return { kind: 'retry', afterMs: 0 };
      let answer: OAuthTokenResponse;
      try {
        answer = await postOAuthToken({ basePath: d.basePath, requestTimeoutMs: timeoutMs, signal }, {
          grant_type: 'refresh_token',
          client_id: app.clientId,
          client_secret: app.clientSecret,
          refresh_token: refreshToken,
        });
      } catch (e) {
        if (!(e instanceof OAuthTokenError)) throw e;
        const outcome = await this.refusalOutcome(e, app, refreshToken, requestTimeout, signal);
        if (outcome === 'revoked') {
          const reason = `the app was uninstalled or its access revoked; HubSpot refused the refresh token${e.code ? ` (${e.code})` : ''}`;
          const failed = await disconnectPortal(d.sql, this.portalId, reason, this.holder);
          released = true; // disconnect_portal released the lease, or it was not ours any more
          this.cached = null;
          return { kind: failed === null ? 'lost' : 'disconnected' };
        }
        if (outcome === 'app-rejected') {
          const error = new HubSpotOAuthAppRejected(e.code, e.status, e.correlationId);
          d.onAppRejected?.(error); // once per hold: until it ends, refreshes here fail above without asking HubSpot
          appRejections.set(appKey, { until: this.now() + TOKEN_REFRESH_DEFAULTS.appRejectedHoldMs, error });
          throw error;
        }
        throw new HubSpotTransientError(e.message.replace(/\.$/, ''), e.status, e.correlationId);
      }
      const keys = requireTokenKeys(d.keys);
      const [accessEnc, refreshEnc] = await Promise.all([
        sealToken(keys, answer.accessToken, 'access', this.place()),
        sealToken(keys, answer.refreshToken ?? refreshToken, 'refresh', this.place()),
      ]);
      const marginSeconds = d.refreshMarginSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshMarginSeconds;
      const lifetime = Math.floor(answer.expiresIn);
      const version = await completeTokenRefresh(d.sql, this.portalId, this.holder, {
        keyId: keys.currentKeyId, accessEnc, refreshEnc, expiresInSeconds: lifetime, refreshMarginSeconds: marginSeconds,
      });
      released = true;
      if (version === null) return { kind: 'lost' };
      // Counted from before the refresh lease was taken, as the database counts it from the refresh lease.
      const refreshAt = askedAt + (lifetime - Math.min(marginSeconds, lifetime / 4)) * 1000;
      this.cached = { token: answer.accessToken, version, refreshAt };
      return this.cached;
    } finally {
      if (!released) {
        await abandonTokenRefresh(d.sql, this.portalId, this.holder).catch(() => undefined);
      }
    }
  }

  /**
   * What a refused refresh means. A known code decides (BAD_REFRESH_TOKEN /
   * invalid_grant: revoked; BAD_CLIENT_ID / BAD_CLIENT_SECRET / invalid_client:
   * the app's configuration). Any other non-retryable refusal (HubSpot's v3 error
   * body has no such code) is settled by introspecting the refresh token:
   * inactive means revoked; introspection refusing the app means the app's
   * configuration; an active token or no answer is a transient failure.
   */
  private async refusalOutcome(
    e: OAuthTokenError,
    app: { clientId: string; clientSecret: string },
    refreshToken: string,
    requestTimeout: () => number | null,
    signal?: AbortSignal,
  ): Promise<'revoked' | 'app-rejected' | 'transient'> {
    if (e.retryable) return 'transient';
    if (e.clientRejected) return 'app-rejected';
    if (e.revoked) return 'revoked';
    const timeoutMs = requestTimeout();
    if (timeoutMs === null) return 'transient';
    try {
      const info = await introspectOAuthToken({ basePath: this.deps.basePath, requestTimeoutMs: timeoutMs, signal },
        { clientId: app.clientId, clientSecret: app.clientSecret, token: refreshToken, tokenTypeHint: 'refresh_token' });
      return info.active ? 'transient' : 'revoked';
    } catch (ie) {
      if (ie instanceof OAuthTokenError && !ie.retryable) return 'app-rejected';
      if (ie instanceof OAuthTokenError) return 'transient';
      throw ie;
    }
  }
}
