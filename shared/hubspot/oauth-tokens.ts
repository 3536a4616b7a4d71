// HubSpot tokens as the functions use them: stored sealed (shared/token-crypto.ts),
// read through a per-portal token source, OAuth access tokens refreshed once per
// expiry for every worker at once.
//
// The database decides who refreshes (public.claim_portal_token, one call under
// the credentials row's lock): a token due for refresh (its expiry minus a
// margin) or refused with a 401 while still current gives the caller the
// portal's refresh lease; everyone else keeps using the still-valid token, or
// polls briefly (one call per poll: no LISTEN, no session locks) until the new
// one is stored. The refresh itself is one POST to HubSpot's v3 token endpoint,
// built by @hubspot/api-client's request builder (the client generates only the
// deprecated v1 OAuth paths) and counted in the portal's shared request budget.
// A refresh token HubSpot refuses (BAD_REFRESH_TOKEN: the app was uninstalled)
// disconnects the portal and fails its fetch jobs for good (public.disconnect_portal).

import { Request } from '@hubspot/api-client/lib/src/services/http/Request.js';
import type { Sql } from '../db.ts';
import { sharedRequestBudget, type RateLimitSettings } from '../hubspot-budget.ts';
import {
  decryptToken, encryptToken, requireTokenKeys, tokenLookupHash, tokenLookupHashes, TokenDecryptionError, TokenKeysMissing,
  type TokenKeyring,
} from '../token-crypto.ts';
import { DeadlineReached, HubSpotAccessRemoved, HubSpotError, HubSpotTransientError } from './errors.ts';
import type { AccessToken, AccessTokenSource } from './transport.ts';

const DEFAULT_BASE_PATH = 'https://api.hubapi.com';

/** Named settings of the shared refresh, with their defaults. */
export const TOKEN_REFRESH_DEFAULTS = {
  /** Refresh this long before expiry (capped at a quarter of the token's lifetime). */
  refreshMarginSeconds: 300,
  /** How long a refresh lease is held before another caller may take over. */
  leaseSeconds: 30,
  /** While another caller refreshes, the current token is still used if it has at least this long left. */
  minValidSeconds: 5,
  /** Timeout of one token request. */
  requestTimeoutMs: 15_000,
} as const;

/** Where a sealed token belongs (the additional data that binds the ciphertext to it). */
export function tokenContext(field: 'access' | 'refresh', hubspotPortalId: number | string): string {
  return `${field}:${String(hubspotPortalId)}`;
}

// ---------------------------------------------------------------------------
// Storing connections

export interface OAuthConnection {
  ownerId: string;
  hubspotPortalId: number | string;
  name: string;
  accessToken: string;
  refreshToken: string;
  /** The access token's lifetime as HubSpot gave it (`expires_in`). */
  expiresInSeconds: number;
  /** When the token request was sent (ms, this clock): the lifetime is counted from then. */
  requestedAt?: number;
  scopes?: readonly string[] | null;
  refreshMarginSeconds?: number;
}

/** Connects (or reconnects) a portal installed through OAuth; its tokens are stored sealed. Returns the portal id. */
export async function connectOAuthPortal(sql: Sql, keys: TokenKeyring | null, c: OAuthConnection): Promise<string> {
  const ring = requireTokenKeys(keys);
  const elapsed = c.requestedAt === undefined ? 0 : Math.max(0, Math.ceil((Date.now() - c.requestedAt) / 1000));
  const lifetime = Math.max(1, Math.floor(c.expiresInSeconds) - elapsed);
  const [accessEnc, refreshEnc, hash] = await Promise.all([
    encryptToken(ring, c.accessToken, tokenContext('access', c.hubspotPortalId)),
    encryptToken(ring, c.refreshToken, tokenContext('refresh', c.hubspotPortalId)),
    tokenLookupHash(ring, c.accessToken),
  ]);
  const [row] = await sql`select public.connect_portal_with_tokens(${c.ownerId}, ${String(c.hubspotPortalId)}, ${c.name}, 'oauth',
    ${ring.currentKeyId}, ${accessEnc}, ${refreshEnc}, ${lifetime}, ${c.refreshMarginSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshMarginSeconds},
    ${hash}, ${c.scopes ? [...c.scopes] : null}::text[]) as id`;
  return row!.id as string;
}

/** Connects (or reconnects) a portal with a private-app token, stored sealed. Returns the portal id. */
export async function connectPrivateAppPortal(
  sql: Sql,
  keys: TokenKeyring | null,
  c: { ownerId: string; hubspotPortalId: number | string; name: string; accessToken: string },
): Promise<string> {
  const ring = requireTokenKeys(keys);
  const [accessEnc, hash] = await Promise.all([
    encryptToken(ring, c.accessToken, tokenContext('access', c.hubspotPortalId)),
    tokenLookupHash(ring, c.accessToken),
  ]);
  const [row] = await sql`select public.connect_portal_with_tokens(${c.ownerId}, ${String(c.hubspotPortalId)}, ${c.name}, 'private_app',
    ${ring.currentKeyId}, ${accessEnc}, null, null, null, ${hash}, null) as id`;
  return row!.id as string;
}

/**
 * The HubSpot portal id of the owner's portal that stores this access token
 * (compared by lookup hash, never in clear), or null. Null without keys.
 */
export async function knownHubSpotPortalForToken(sql: Sql, keys: TokenKeyring | null, ownerId: string, accessToken: string): Promise<string | null> {
  if (!keys) return null;
  const hashes = await tokenLookupHashes(keys, accessToken);
  const [row] = await sql`select public.hubspot_portal_for_token_hash(${ownerId}, ${hashes}::text[])::text as id`;
  return (row?.id as string | null) ?? null;
}

/** Marks the portal disconnected and fails its fetch jobs for good; returns how many jobs failed. */
export async function disconnectPortal(sql: Sql, portalId: string, reason: string): Promise<number> {
  const [row] = await sql`select public.disconnect_portal(${portalId}, ${reason.slice(0, 400)}) as failed`;
  return Number(row?.failed ?? 0);
}

// ---------------------------------------------------------------------------
// HubSpot's v3 token endpoint

export interface OAuthTokenResponse {
  accessToken: string;
  /** The refresh token HubSpot answered (null when it sent none: keep the one you have). */
  refreshToken: string | null;
  expiresIn: number;
  tokenType: string | null;
  /** The portal the token is for (`hub_id`), when HubSpot says. */
  hubId: number | null;
  scopes: string[] | null;
  /** When the request was sent (ms, this clock). */
  requestedAt: number;
}

/** HubSpot's token endpoint refused or failed. Never carries a token, code or secret. */
export class OAuthTokenError extends HubSpotError {
  /** HubSpot's error code (`status` field, e.g. BAD_REFRESH_TOKEN; or the OAuth `error`), when it sent one. */
  readonly code: string | null;
  /** The refresh token is no longer valid (app uninstalled, token revoked): reconnect. */
  readonly revoked: boolean;

  constructor(message: string, opts: { status: number | null; code: string | null; revoked: boolean; retryable: boolean; correlationId?: string | null }) {
    super(message, opts.retryable, { status: opts.status, category: opts.code, correlationId: opts.correlationId ?? null });
    this.code = opts.code;
    this.revoked = opts.revoked;
  }
}

export interface TokenEndpointOptions {
  basePath?: string;
  requestTimeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * POSTs a form to HubSpot's v3 token endpoint (/oauth/v3/token): grant_type
 * refresh_token or authorization_code with the app's client_id and client_secret.
 */
export async function postOAuthToken(opts: TokenEndpointOptions, form: Record<string, string>): Promise<OAuthTokenResponse> {
  const basePath = (opts.basePath ?? DEFAULT_BASE_PATH).replace(/\/+$/, '');
  const request = new Request({ basePath }, {
    method: 'POST',
    path: '/oauth/v3/token',
    body: new URLSearchParams(form).toString(),
    defaultJson: false,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded;charset=utf-8' },
  });
  const secrets = Object.entries(form).filter(([k]) => k !== 'grant_type' && k !== 'client_id' && k !== 'redirect_uri').map(([, v]) => v);
  const redact = (text: string) => secrets.reduce((t, s) => (s ? t.split(s).join('[redacted]') : t), text);
  const timeout = AbortSignal.timeout(opts.requestTimeoutMs ?? TOKEN_REFRESH_DEFAULTS.requestTimeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  const requestedAt = Date.now();
  let status: number;
  let text: string;
  try {
    const response = await fetch(request.getUrl(), { ...(request.getSendData() as RequestInit), signal });
    status = response.status;
    text = await response.text();
  } catch (e) {
    opts.signal?.throwIfAborted();
    const why = timeout.aborted ? 'no answer in time' : 'connection failed';
    throw new OAuthTokenError(`HubSpot's token endpoint is unreachable (${why}).`, { status: null, code: null, revoked: false, retryable: true });
  }
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: judged by status below
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  if (status >= 200 && status < 300) {
    const accessToken = str(body['access_token']);
    const expiresIn = Number(body['expires_in']);
    if (!accessToken || !Number.isFinite(expiresIn) || expiresIn <= 0) {
      throw new OAuthTokenError('HubSpot\'s token endpoint answered without an access token or lifetime.', { status, code: null, revoked: false, retryable: true });
    }
    const hubId = Number(body['hub_id']);
    return {
      accessToken,
      refreshToken: str(body['refresh_token']),
      expiresIn,
      tokenType: str(body['token_type']),
      hubId: Number.isSafeInteger(hubId) && hubId > 0 ? hubId : null,
      scopes: Array.isArray(body['scopes']) ? body['scopes'].filter((s): s is string => typeof s === 'string') : null,
      requestedAt,
    };
  }
  // HubSpot: {status: 'BAD_REFRESH_TOKEN', message, correlationId, category}; RFC 6749: {error: 'invalid_grant'}.
  const code = str(body['status']) !== 'error' ? str(body['status']) ?? str(body['error']) : str(body['error']);
  const correlationId = str(body['correlationId']);
  const retryable = status === 429 || status >= 500;
  const revoked = !retryable && (code === 'BAD_REFRESH_TOKEN' || code === 'invalid_grant') && form['grant_type'] === 'refresh_token';
  const message = str(body['message']);
  throw new OAuthTokenError(
    `HubSpot's token endpoint refused the request with HTTP ${status}${code ? ` ${code}` : ''}${message ? `: ${redact(message).slice(0, 300)}` : ''}.`,
    { status, code, revoked, retryable, correlationId },
  );
}

// ---------------------------------------------------------------------------
// The token source of one portal

export interface PortalTokenDeps {
  sql: Sql;
  keys: TokenKeyring | null;
  /** The OAuth app; without it an OAuth portal's token cannot be refreshed. */
  oauthApp: { clientId: string; clientSecret: string } | null;
  /** Who holds a refresh lease: the worker slot's id, or 'orchestrator'. Made unique per source. */
  holderId: string;
  basePath?: string;
  rateLimit: RateLimitSettings;
  /** Milliseconds the caller has left; no wait or refresh runs past it (DeadlineReached). */
  timeLeft?: () => number;
  requestTimeoutMs?: number;
  refreshMarginSeconds?: number;
  leaseSeconds?: number;
  minValidSeconds?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
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

interface ClaimRow {
  decision: 'use' | 'refresh' | 'wait' | 'disconnected';
  hubspot_portal_id: string;
  auth_kind: 'private_app' | 'oauth';
  access_token_enc: string | null;
  access_token_legacy: string | null;
  refresh_token_enc: string | null;
  token_version: string;
  refresh_in_ms: string | null;
  expires_in_ms: string | null;
  disconnected_reason: string | null;
  wait_ms: number | null;
}

interface Cached extends AccessToken {
  /** This clock's ms after which the token is due for refresh (Infinity: never). */
  refreshAt: number;
}

/**
 * The token source for a portal: null when the portal is unknown or has no
 * credentials. Throws HubSpotAccessRemoved for a disconnected portal.
 */
export async function portalTokenSource(deps: PortalTokenDeps, portalId: string): Promise<PortalTokenSource | null> {
  const source = new PortalTokens(deps, portalId);
  return (await source.start()) ? source : null;
}

class PortalTokens implements PortalTokenSource {
  hubspotPortalId = '';
  authKind: 'private_app' | 'oauth' = 'private_app';
  private cached: Cached | null = null;
  private inFlight: { key: string | null; promise: Promise<AccessToken | null> } | null = null;
  private readonly holder: string;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private budget: (() => Promise<void>) | null = null;

  constructor(private readonly deps: PortalTokenDeps, readonly portalId: string) {
    this.holder = `${deps.holderId.slice(0, 160)}#${crypto.randomUUID().slice(0, 8)}`;
    this.now = deps.now ?? Date.now;
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** First look-up: false when the portal has no credentials. */
  async start(): Promise<boolean> {
    return (await this.obtain(null)) !== null;
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

  /** Asks the database what to do until there is a token to use (or none). `usedVersion`: the token HubSpot refused. */
  private async obtain(usedVersion: string | null, signal?: AbortSignal): Promise<AccessToken | null> {
    const d = this.deps;
    for (;;) {
      signal?.throwIfAborted();
      const askedAt = this.now();
      const [row] = (await d.sql`select * from public.claim_portal_token(${this.portalId}, ${this.holder}, ${usedVersion},
        ${d.leaseSeconds ?? TOKEN_REFRESH_DEFAULTS.leaseSeconds}, ${d.minValidSeconds ?? TOKEN_REFRESH_DEFAULTS.minValidSeconds})`) as unknown as ClaimRow[];
      if (!row) return null;
      this.hubspotPortalId = String(row.hubspot_portal_id);
      this.authKind = row.auth_kind;
      switch (row.decision) {
        case 'disconnected':
          this.cached = null;
          throw new HubSpotAccessRemoved(row.disconnected_reason ?? 'disconnected');
        case 'use':
          return this.remember(row, askedAt, await this.open(row));
        case 'wait': {
          const waitMs = Math.max(20, row.wait_ms ?? 100);
          if (d.timeLeft && d.timeLeft() < waitMs + 1_000) {
            throw new DeadlineReached(`waiting for another worker's token refresh would pass the deadline`, waitMs);
          }
          await this.sleep(waitMs);
          continue;
        }
        case 'refresh': {
          const fresh = await this.refresh(row, askedAt, signal);
          if (fresh) return fresh;
          usedVersion = null; // the lease was lost to another caller: its token is the one to use
          continue;
        }
      }
    }
  }

  private remember(row: ClaimRow, askedAt: number, token: string): AccessToken {
    let refreshAt = Infinity;
    if (row.refresh_in_ms !== null) {
      const dueIn = Number(row.refresh_in_ms);
      // Already due (another caller is refreshing; this token is still valid a while): ask again shortly.
      refreshAt = askedAt + (dueIn > 0 ? dueIn : Math.min(250, Math.max(0, Number(row.expires_in_ms ?? 0)) / 4));
    }
    this.cached = { token, version: String(row.token_version), refreshAt };
    return this.cached;
  }

  private async open(row: ClaimRow): Promise<string> {
    if (row.access_token_enc === null) {
      if (row.access_token_legacy !== null) return row.access_token_legacy; // a legacy row, sealed by the next rotation step
      throw new StoredTokenUnreadable('The portal has no HubSpot token stored: reconnect HubSpot and try again.');
    }
    return this.unseal(row.access_token_enc, 'access');
  }

  private async unseal(sealed: string, field: 'access' | 'refresh'): Promise<string> {
    try {
      return await decryptToken(requireTokenKeys(this.deps.keys), sealed, tokenContext(field, this.hubspotPortalId));
    } catch (e) {
      if (e instanceof TokenDecryptionError || e instanceof TokenKeysMissing) throw new StoredTokenUnreadable(e.message);
      throw e;
    }
  }

  /** Refreshes as the lease holder; null when the lease was lost meanwhile. Gives the lease back on any failure. */
  private async refresh(row: ClaimRow, askedAt: number, signal?: AbortSignal): Promise<AccessToken | null> {
    const d = this.deps;
    let stored = false;
    try {
      if (!d.oauthApp) {
        throw new StoredTokenUnreadable('The portal is connected through the HubSpot app, but HUBSPOT_CLIENT_ID / HUBSPOT_CLIENT_SECRET are not set: its token cannot be refreshed.');
      }
      const refreshToken = await this.unseal(row.refresh_token_enc!, 'refresh');
      this.budget ??= sharedRequestBudget(d.sql, this.hubspotPortalId, d.rateLimit, this.sleep, d.timeLeft);
      await this.budget();
      const leaseMs = (d.leaseSeconds ?? TOKEN_REFRESH_DEFAULTS.leaseSeconds) * 1000;
      const timeoutMs = Math.min(d.requestTimeoutMs ?? TOKEN_REFRESH_DEFAULTS.requestTimeoutMs, leaseMs - 1_000, d.timeLeft ? d.timeLeft() - 1_000 : Infinity);
      if (timeoutMs < 500) throw new DeadlineReached('no time left for a token refresh before the deadline');
      let answer: OAuthTokenResponse;
      try {
        answer = await postOAuthToken({ basePath: d.basePath, requestTimeoutMs: timeoutMs, signal }, {
          grant_type: 'refresh_token',
          client_id: d.oauthApp.clientId,
          client_secret: d.oauthApp.clientSecret,
          refresh_token: refreshToken,
        });
      } catch (e) {
        if (e instanceof OAuthTokenError && e.revoked) {
          const reason = `the app was uninstalled or its access revoked; HubSpot refused the refresh token (${e.code})`;
          await disconnectPortal(d.sql, this.portalId, reason);
          stored = true; // disconnect_portal released the lease
          this.cached = null;
          throw new HubSpotAccessRemoved(reason, { status: e.status, category: e.code, correlationId: e.correlationId });
        }
        if (e instanceof OAuthTokenError && e.retryable) throw new HubSpotTransientError(e.message.replace(/\.$/, ''), e.status, e.correlationId);
        throw e;
      }
      const keys = requireTokenKeys(d.keys);
      const [accessEnc, refreshEnc, hash] = await Promise.all([
        encryptToken(keys, answer.accessToken, tokenContext('access', this.hubspotPortalId)),
        encryptToken(keys, answer.refreshToken ?? refreshToken, tokenContext('refresh', this.hubspotPortalId)),
        tokenLookupHash(keys, answer.accessToken),
      ]);
      const marginSeconds = d.refreshMarginSeconds ?? TOKEN_REFRESH_DEFAULTS.refreshMarginSeconds;
      const lifetime = Math.floor(answer.expiresIn);
      const [done] = await d.sql`select public.complete_token_refresh(${this.portalId}, ${this.holder}, ${keys.currentKeyId},
        ${accessEnc}, ${refreshEnc}, ${lifetime}, ${marginSeconds}, ${hash})::text as version`;
      stored = true;
      if (done?.version == null) return null;
      // Counted from before the lease was taken, as the database counts it from the lease.
      const refreshAt = askedAt + (lifetime - Math.min(marginSeconds, lifetime / 4)) * 1000;
      this.cached = { token: answer.accessToken, version: String(done.version), refreshAt };
      return this.cached;
    } finally {
      if (!stored) {
        await d.sql`select public.abandon_token_refresh(${this.portalId}, ${this.holder})`.catch(() => undefined);
      }
    }
  }
}
