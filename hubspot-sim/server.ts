// HubSpot CMS v3 HTTP simulator on 127.0.0.1: auth (private-app and OAuth tokens), scopes, rate limits,
// paging, fault injection, and HubSpot's OAuth endpoints (oauth.ts).

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ContentType } from '../shared/hubspot/content-types.ts';
import { FaultInjector, type FaultOptions } from './faults.ts';
import {
  OAuthServer, matchOAuthRoute, type InstallDecision, type OAuthAppConfig, type OAuthLogEntry, type OAuthOptions,
  type OAuthErrorStyle, type OAuthRoute,
} from './oauth.ts';
import { Portal, type ItemSummary, type PortalOptions } from './portal.ts';
import { OAUTH_APP_LIMIT_PER_10S, PRIVATE_APP_LIMITS, RateLimiter, type BucketLimits } from './rate-limit.ts';
import {
  badRequest, expiredAuthentication, missingScopes, notFound, rateLimited, send, serverError, unauthorized, type SimResponse,
} from './responses.ts';
import { handleRoute, matchRoute } from './routes.ts';
import { integrationUser, oauthUser, personUser, type AuditEvent, type SimUser } from './audit-log.ts';
import { editInHubSpot } from './hubspot-edits.ts';
import { handleWrite, matchWriteRoute, parseBody, type WriteRoute } from './write-routes.ts';
import { isVersioned, PortalWrites, type Fields, type QueuedEdit } from './write-state.ts';

export { REALISTIC_PORTAL_SIZES, SMALL_PORTAL_SIZES, type ItemSummary, type PortalOptions } from './portal.ts';
export { OAUTH_APP_LIMIT_PER_10S, PRIVATE_APP_LIMITS, type AccountTier, type BucketLimits } from './rate-limit.ts';
export type { FaultOptions } from './faults.ts';
export { integrationUser, oauthUser, personUser, type AuditEvent, type SimUser } from './audit-log.ts';
export {
  pkceChallenge, type InstallDecision, type OAuthAppConfig, type OAuthErrorStyle, type OAuthLogEntry, type OAuthOptions, type OAuthOutcome,
} from './oauth.ts';

export interface SimulatorOptions {
  port?: number;
  /**
   * Overrides of HubSpot's documented limits (each portal's tier and auth kind,
   * PortalOptions): maxPer10s for every bucket (private and OAuth), daily for
   * private apps, windowMs the interval for all (default 10 000).
   */
  rateLimit?: { maxPer10s?: number; daily?: number; windowMs?: number };
  seed?: number; // seeds fault injection (default 1)
  maxLogEntries?: number; // request log and OAuth log cap (default 100_000, oldest half dropped when full)
  oauth?: OAuthOptions;
  /**
   * Every CMS answer is sent this long after the request arrived (a timer, so
   * the event loop keeps serving): a remote API's round trip. Default 0.
   */
  latencyMs?: number;
}

/** Per-portal counters (portals reached by a private-app or an OAuth token). */
export interface PortalStats {
  requests: number; // CMS requests whose token resolved to this portal
  tokenRefreshes: number;
  expiredTokenRequests: number;
}

export interface SimulatorStats {
  requests: number;
  byEndpoint: Record<string, number>;
  rateLimited: number;
  errorsInjected: number;
  dropped: number;
  peakPer10s: number; // most admitted requests of one rate-limit key inside any rolling window (windowMs, default 10 s)
  oauthRequests: number; // requests to /oauth/* endpoints
  codeExchanges: number; // successful authorization_code grants
  tokenRefreshes: number; // successful refresh_token grants
  expiredTokenRequests: number; // CMS requests made with an OAuth access token past its expiry
  byPortal: Record<string, PortalStats>;
  rateLimitedByPortal: Record<string, number>; // 429s answered per portal (limits and injected faults)
}

export interface RequestLogEntry {
  at: number;
  method: string;
  path: string;
  endpoint: string;
  after: string | null;
  limit: string | null;
  offset: string | null;
  archived: string | null;
  status: number; // 0 = socket dropped
  tokenHash: string | null; // first 12 hex chars of sha256(token)
  portalId: number | null;
}

export interface HubSpotSimulator {
  url: string;
  close(): Promise<void>;
  addPortal(options: PortalOptions): void;
  addItems(portalId: number, type: ContentType, count: number): string[];
  deleteItems(portalId: number, type: ContentType, which: number | string[]): string[];
  /** Stamps items updated now (or all at `atMs`: items sharing one updatedAt, or a stamp older than the write). */
  touchItems(portalId: number, type: ContentType, which: number | string[], atMs?: number): string[];
  /** Removes items for good: no listing shows them again, archived or not. */
  purgeItems(portalId: number, type: ContentType, which: number | string[]): string[];
  /** Renames and publishes a HubDB table (by id or name): the table's updatedAt moves, its rows' do not. */
  renameTable(portalId: number, idOrName: string, name: string): string;
  /**
   * Called before each CMS list request of any portal is answered (after auth
   * and rate limiting): a test changes the portal mid-read from here. One hook at a time; null removes it.
   */
  onList(hook: ((request: { portalId: number; type: ContentType; query: URLSearchParams }) => void) | null): void;
  items(portalId: number, type: ContentType): ItemSummary[];
  /** Revokes a private-app token or an OAuth access token (CMS calls with it answer 401). */
  revokeToken(token: string): void;
  registerApp(config: OAuthAppConfig): void;
  /** Lifetime of access tokens issued from now on, for every app. */
  setAccessTokenTtl(seconds: number): void;
  /** Decides the next GET /oauth/authorize (FIFO). */
  queueInstall(decision: InstallDecision): void;
  /** Decision used when no install is queued (null: answer 409). */
  setAutoInstall(decision: InstallDecision | null): void;
  /** GETs an authorize URL (its path and query, whatever its origin) and returns the redirect Location. */
  authorize(url: string): Promise<URL>;
  /** Moves the OAuth clock (access-token and auth-code expiry) forward. */
  advanceClock(seconds: number): void;
  /** The app (every app unless clientId) is uninstalled from the portal: refresh and access tokens stop working. */
  uninstall(portalId: number, clientId?: string): void;
  /** The portal's OAuth installs and its private-app token lose the scope. */
  removeScope(portalId: number, scope: string): void;
  /** Deletes one refresh token (as POST /oauth/v3/token/revoke does). */
  revokeRefreshToken(token: string): void;
  /** Makes the next `count` /oauth/* requests fail with `status` (429 -> rate limited) or drop the socket. */
  failNextOAuth(count: number, status?: number | 'drop'): void;
  /** Token endpoint error bodies from now on: 'v1' (with HubSpot's `status` code) or 'v3' (the spec's Error, no code). */
  setOAuthErrorStyle(style: OAuthErrorStyle): void;
  /** Every OAuth access and refresh token issued so far (tests search output for them; never logged). */
  issuedOAuthTokens(): string[];
  oauthLog(): OAuthLogEntry[];
  setFaults(options: FaultOptions): void;
  /** The per-request latency of CMS answers from now on (SimulatorOptions.latencyMs). */
  setLatency(ms: number): void;
  /** The next `count` CMS requests fail: with `status`, a dropped socket, or ('lost') a socket dropped after the request was carried out. */
  failNext(count: number, status?: number | 'drop' | 'lost'): void;
  clearFaults(): void;
  /**
   * Edits an item "in HubSpot" as a person (default personUser): the fields
   * change (sparse; a HubDB row's `values` by column, then its table is
   * published), its update time moves, pages and posts get a revision, the
   * audit log an event by that person. Returns the new update time (ISO).
   */
  editInHubSpot(portalId: number, type: ContentType, idOrKey: string, fields: Fields, options?: { user?: SimUser }): string;
  /**
   * Queues such an edit to land right after the next read that returns the
   * item (a batch read, a draft or redirect GET; not a list), before anything
   * else is answered: between a re-read and the write that follows it.
   */
  editAfterNextRead(portalId: number, type: ContentType, idOrKey: string, fields: Fields, options?: { user?: SimUser }): void;
  /** Queues such an edit to land right before the next read of the item (that read sees it). */
  editBeforeNextRead(portalId: number, type: ContentType, idOrKey: string, fields: Fields, options?: { user?: SimUser }): void;
  /** How many times the API wrote each item of a type (keys as items() reports them); `endpoint` counts one endpoint's writes only. */
  writeCounts(portalId: number, type: ContentType, endpoint?: string): Record<string, number>;
  /** The portal's audit log, oldest first. */
  auditLog(portalId: number): AuditEvent[];
  /** A page's or post's revisions, oldest first (the first: the item before any change the simulator saw). */
  revisions(portalId: number, type: ContentType, id: string): { id: string; updatedAt: string; user: SimUser; object: Record<string, unknown> }[];
  /** Moves HubSpot's content clock forward (update times, audit times, scheduled publishing), for every portal. */
  advanceContentClock(seconds: number): void;
  stats(): SimulatorStats;
  resetStats(): void;
  /** Forgets every bucket's daily usage, as HubSpot's daily limit resets at midnight (it also resets on its own at midnight in each account's time zone). */
  resetDailyLimits(): void;
  /** The limits HubSpot applies to the portal's private apps (one bucket for all of them) or to one OAuth app's install. */
  limitsOf(portalId: number, kind: 'private_app' | 'oauth'): BucketLimits;
  /** Another app of the account spends this share (0..1) of its private apps' interval limit from now on. */
  setOtherAppsShare(portalId: number, share: number): void;
  requestLog(): RequestLogEntry[];
}

// sha256 prefix so logs can tell tokens apart without containing them.
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}

// Starts the simulator; resolves once it listens on 127.0.0.1.
export async function startHubSpotSimulator(options: SimulatorOptions = {}): Promise<HubSpotSimulator> {
  const portals = new Map<number, Portal>();
  const tokens = new Map<string, { portal: Portal; hash: string }>();
  const limiter = new RateLimiter();
  const windowMs = options.rateLimit?.windowMs ?? 10_000;
  // HubSpot's limits for a portal's bucket: private apps by the account's tier, OAuth apps 110 and no daily limit.
  const limitsOf = (portal: Portal, kind: 'private_app' | 'oauth'): BucketLimits => {
    if (kind === 'oauth') {
      return { maxPerWindow: options.rateLimit?.maxPer10s ?? OAUTH_APP_LIMIT_PER_10S, windowMs, daily: null, timeZone: portal.timeZone, otherAppsShare: 0 };
    }
    const tier = PRIVATE_APP_LIMITS[portal.apiLimitIncrease ? 'api_limit_increase' : portal.tier];
    return {
      maxPerWindow: options.rateLimit?.maxPer10s ?? tier.maxPer10s, windowMs, daily: options.rateLimit?.daily ?? tier.daily,
      timeZone: portal.timeZone, otherAppsShare: portal.otherAppsShare,
    };
  };
  const faults = new FaultInjector(options.seed ?? 1);
  const oauthFaults = new FaultInjector(options.seed ?? 1);
  const maxLog = options.maxLogEntries ?? 100_000;
  const timers = new Set<NodeJS.Timeout>();
  let log: RequestLogEntry[] = [];
  let oauthLog: OAuthLogEntry[] = [];
  let stats = emptyStats();
  let baseUrl = '';
  let listHook: Parameters<HubSpotSimulator['onList']>[0] = null;
  const checkLatency = (ms: number): number => {
    if (!Number.isFinite(ms) || ms < 0 || ms > 60_000) throw new Error('latencyMs: 0 to 60000');
    return ms;
  };
  let latencyMs = checkLatency(options.latencyMs ?? 0);

  const portalOf = (portalId: number): Portal => {
    const portal = portals.get(portalId);
    if (!portal) throw new Error(`unknown portal ${portalId}`);
    return portal;
  };
  const portalStats = (portalId: number): PortalStats =>
    (stats.byPortal[portalId] ??= { requests: 0, tokenRefreshes: 0, expiredTokenRequests: 0 });

  const oauth = new OAuthServer(options.oauth ?? {}, (portalId) => portals.get(portalId), (entry) => {
    if (oauthLog.length >= maxLog) oauthLog = oauthLog.slice(Math.floor(maxLog / 2));
    oauthLog.push(entry);
    if (entry.outcome !== 'ok' || entry.portalId === null) return;
    if (entry.grantType === 'refresh_token') {
      stats.tokenRefreshes++;
      portalStats(entry.portalId).tokenRefreshes++;
    } else if (entry.grantType === 'authorization_code') {
      stats.codeExchanges++;
    }
  });

  // Who a bearer token speaks for: a private-app token, or an OAuth access token (valid, expired or revoked).
  type Caller =
    | { kind: 'valid'; portal: Portal; hash: string; rateKey: string; scopes: ReadonlySet<string>; authKind: 'private_app' | 'oauth'; userId: number }
    | { kind: 'expired'; portal: Portal; hash: string; expiredMs: number }
    | { kind: 'unknown'; portal: Portal | null; hash: string };
  const resolveCaller = (token: string): Caller => {
    const privateApp = tokens.get(token);
    // Every private app of an account shares the account's bucket.
    if (privateApp) {
      return {
        kind: 'valid', portal: privateApp.portal, hash: privateApp.hash, rateKey: `private:${privateApp.portal.portalId}`,
        scopes: privateApp.portal.scopes, authKind: 'private_app', userId: 0,
      };
    }
    const check = oauth.checkAccessToken(token);
    if (!check) return { kind: 'unknown', portal: null, hash: tokenHash(token) };
    const portal = portalOf(check.portalId);
    if (check.kind === 'valid') return { kind: 'valid', portal, hash: check.hash, rateKey: check.rateKey, scopes: check.scopes, authKind: 'oauth', userId: check.userId };
    if (check.kind === 'expired') return { kind: 'expired', portal, hash: check.hash, expiredMs: check.expiredMs };
    return { kind: 'unknown', portal, hash: check.hash };
  };

  // `bodyText`: a write's request body, read before (null: none).
  const handle = (req: IncomingMessage, res: ServerResponse, bodyText: string | null): void => {
    const url = new URL(req.url ?? '/', baseUrl);
    const method = req.method ?? 'GET';
    const oauthRoute = matchOAuthRoute(method, url.pathname);
    const route = oauthRoute ? null : matchRoute(method, url.pathname);
    const writeRoute = oauthRoute || route ? null : matchWriteRoute(method, url.pathname);
    const endpoint = oauthRoute?.key ?? route?.key ?? writeRoute?.key ?? `${method} (unknown)`;
    stats.requests++;
    stats.byEndpoint[endpoint] = (stats.byEndpoint[endpoint] ?? 0) + 1;
    const token = oauthRoute ? null : (/^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim() ?? null);
    const caller = token ? resolveCaller(token) : null;
    const entry: RequestLogEntry = {
      // v1 token metadata paths carry the token: log the route template instead.
      at: Date.now(), method, path: oauthRoute?.kind === 'metadata' ? endpoint.slice(method.length + 1) : url.pathname, endpoint,
      after: url.searchParams.get('after'), limit: url.searchParams.get('limit'),
      offset: url.searchParams.get('offset'), archived: url.searchParams.get('archived'),
      status: 0, tokenHash: caller?.hash ?? null, portalId: caller?.portal?.portalId ?? null,
    };
    if (log.length >= maxLog) log = log.slice(Math.floor(maxLog / 2));
    log.push(entry);
    const finish = (response: SimResponse, headers: Record<string, string> = {}): void => {
      entry.status = response.status;
      if (response.status === 429) {
        stats.rateLimited++;
        if (entry.portalId !== null) stats.rateLimitedByPortal[entry.portalId] = (stats.rateLimitedByPortal[entry.portalId] ?? 0) + 1;
      }
      send(res, response, headers);
    };

    if (oauthRoute) {
      stats.oauthRequests++;
      handleOAuth(req, res, url, oauthRoute, finish);
      return;
    }
    if (!route && !writeRoute) return finish(notFound());
    if (bodyText === TOO_LARGE) return finish(badRequest('Request body too large'));
    if (caller?.kind === 'expired') {
      stats.expiredTokenRequests++;
      portalStats(caller.portal.portalId).expiredTokenRequests++;
      return finish(expiredAuthentication(caller.expiredMs));
    }
    if (caller?.kind !== 'valid') return finish(unauthorized(token !== null));
    const auth = caller;
    portalStats(auth.portal.portalId).requests++;
    const decision = limiter.take(auth.rateKey, Date.now(), limitsOf(auth.portal, auth.authKind));
    stats.peakPer10s = Math.max(stats.peakPer10s, limiter.peak);
    if (!decision.allowed) return finish(rateLimited(decision.policy, auth.portal.portalId), decision.headers);
    const fault = faults.decide();
    const respond = (): void => {
      const action = fault.action;
      if (action.kind === 'drop') {
        stats.dropped++;
        stats.errorsInjected++;
        req.socket.destroy();
        return;
      }
      if (action.kind === 'error') {
        stats.errorsInjected++;
        return finish(serverError(action.status), decision.headers);
      }
      if (action.kind === 'rate_limit') {
        stats.errorsInjected++;
        const retryAfter = faults.retryAfterSeconds();
        return finish(rateLimited('TEN_SECONDLY_ROLLING', auth.portal.portalId),
          retryAfter === null ? decision.headers : { ...decision.headers, 'Retry-After': String(retryAfter) });
      }
      const answer = (): SimResponse => {
        const scope = route ? route.scope : writeRoute!.endpoint.scope;
        if (scope && !auth.scopes.has(scope)) return missingScopes(scope);
        writeStates.get(auth.portal.portalId)?.publishDue();
        if (!route) return answerWrite(writeRoute!, auth, url, bodyText);
        if (route.type !== null && listHook) listHook({ portalId: auth.portal.portalId, type: route.type, query: url.searchParams });
        return handleRoute(route, auth.portal, url.searchParams, url.pathname, baseUrl);
      };
      if (action.kind === 'lost') {
        answer();
        stats.dropped++;
        stats.errorsInjected++;
        req.socket.destroy();
        return;
      }
      finish(answer(), decision.headers);
    };
    const delayMs = fault.delayMs + latencyMs;
    if (delayMs <= 0) return respond();
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (!res.destroyed) respond();
    }, delayMs);
    timers.add(timer);
  };

  const writeStates = new Map<number, PortalWrites>();
  const writesOf = (portal: Portal): PortalWrites => {
    let state = writeStates.get(portal.portalId);
    if (!state) writeStates.set(portal.portalId, (state = new PortalWrites(portal)));
    return state;
  };
  const landEdit = (state: PortalWrites) => (edit: QueuedEdit) =>
    editInHubSpot(state, edit.type, edit.item, edit.fields, edit.user);
  // A write-side request of a caller whose token is valid (its user: the private app's, or the OAuth install's).
  const answerWrite = (writeRoute: WriteRoute, auth: { portal: Portal; authKind: 'private_app' | 'oauth'; userId: number }, url: URL, bodyText: string | null): SimResponse => {
    const parsed = parseBody(bodyText ?? '');
    if (!parsed.ok) return parsed.response;
    const portal = auth.portal;
    const state = writesOf(portal);
    return handleWrite(writeRoute, {
      portal, state, user: auth.authKind === 'oauth' ? oauthUser(portal.portalId, auth.userId) : integrationUser(portal.portalId),
      query: url.searchParams, params: writeRoute.params, body: parsed.body, pathname: url.pathname, baseUrl, endpoint: writeRoute.key,
      read(items, answer) {
        state.land('before', items, landEdit(state));
        const response = answer();
        state.land('after', items, landEdit(state));
        return response;
      },
    });
  };
  // The item a test hook names (after the portal's due scheduled publishes).
  const hookItem = (portalId: number, type: ContentType, idOrKey: string) => {
    const portal = portalOf(portalId);
    const state = writesOf(portal);
    state.publishDue();
    const item = portal.findItem(type, idOrKey);
    if (!item) throw new Error(`no live ${type} ${idOrKey} in portal ${portalId}`);
    return { state, item };
  };
  let contentClockOffsetMs = 0;

  // /oauth/* requests: scripted faults first, then the form body (POST) and the OAuth server.
  const handleOAuth = (
    req: IncomingMessage, res: ServerResponse, url: URL, route: OAuthRoute,
    finish: (response: SimResponse, headers?: Record<string, string>) => void,
  ): void => {
    const action = oauthFaults.decide().action;
    if (action.kind !== 'none') {
      stats.errorsInjected++;
      if (action.kind === 'drop') {
        stats.dropped++;
        oauth.logFault(route.key, 0);
        req.socket.destroy();
        return;
      }
      const response = action.kind === 'error' ? serverError(action.status) : rateLimited('TEN_SECONDLY_ROLLING', 0);
      oauth.logFault(route.key, response.status);
      return finish(response);
    }
    if (route.kind === 'authorize') {
      const result = oauth.authorize(url.searchParams, route.key);
      return finish(result.response, result.headers);
    }
    if (route.kind === 'metadata') return finish(oauth.metadata(route.tokenKind, route.token, route.key).response);
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/x-www-form-urlencoded') {
      req.resume();
      return finish(oauth.badRequest(route.key, 'Content-Type must be application/x-www-form-urlencoded').response);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_FORM_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (res.destroyed) return;
      if (size > MAX_FORM_BYTES) return finish(oauth.badRequest(route.key, 'Request body too large').response);
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const result = route.kind === 'token' ? oauth.token(form, route.key)
        : route.kind === 'introspect' ? oauth.introspect(form, route.key)
        : oauth.revoke(form, route.key);
      finish(result.response, result.headers);
    });
  };

  const server = createServer((req, res) => {
    const run = (bodyText: string | null): void => {
      try {
        handle(req, res, bodyText);
      } catch (error) {
        if (!res.headersSent) send(res, serverError(500), {});
        console.error('hubspot-sim handler error', error);
      }
    };
    // A write's body is read first (the OAuth endpoints read their forms themselves).
    if ((req.method === 'POST' || req.method === 'PATCH') && matchWriteRoute(req.method, (req.url ?? '/').split('?')[0]!)) readBody(req, run);
    else run(null);
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;

  return {
    url: baseUrl,
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
    addPortal(portalOptions) {
      if (portals.has(portalOptions.portalId)) throw new Error(`portal ${portalOptions.portalId} already exists`);
      const portal = new Portal(portalOptions);
      portal.clockOffsetMs = contentClockOffsetMs;
      portals.set(portal.portalId, portal);
      tokens.set(portalOptions.token, { portal, hash: tokenHash(portalOptions.token) });
    },
    addItems: (portalId, type, count) => portalOf(portalId).addItems(type, count),
    deleteItems: (portalId, type, which) => portalOf(portalId).deleteItems(type, which),
    touchItems: (portalId, type, which, atMs) => portalOf(portalId).touchItems(type, which, atMs),
    purgeItems: (portalId, type, which) => portalOf(portalId).purgeItems(type, which),
    renameTable: (portalId, idOrName, name) => portalOf(portalId).renameTable(idOrName, name),
    onList(hook) {
      listHook = hook;
    },
    items(portalId, type) {
      writeStates.get(portalId)?.publishDue();
      return portalOf(portalId).items(type);
    },
    editInHubSpot(portalId, type, idOrKey, fields, hookOptions) {
      const { state, item } = hookItem(portalId, type, idOrKey);
      return editInHubSpot(state, type, item, fields, hookOptions?.user ?? personUser(portalId));
    },
    editAfterNextRead(portalId, type, idOrKey, fields, hookOptions) {
      const { state, item } = hookItem(portalId, type, idOrKey);
      state.queueEdit({ when: 'after', type, item, fields, user: hookOptions?.user ?? personUser(portalId) });
    },
    editBeforeNextRead(portalId, type, idOrKey, fields, hookOptions) {
      const { state, item } = hookItem(portalId, type, idOrKey);
      state.queueEdit({ when: 'before', type, item, fields, user: hookOptions?.user ?? personUser(portalId) });
    },
    writeCounts: (portalId, type, endpoint) => writesOf(portalOf(portalId)).writeCounts(type, endpoint),
    auditLog: (portalId) => writesOf(portalOf(portalId)).audit.all(),
    revisions(portalId, type, id) {
      if (!isVersioned(type)) throw new Error(`${type} keeps no revisions`);
      const { state, item } = hookItem(portalId, type, id);
      return state.revisions.of(state.key(type, item), item, state.creator).map((r) => ({
        id: r.id, updatedAt: new Date(r.updatedAtMs).toISOString(), user: { ...r.user }, object: structuredClone(r.object),
      }));
    },
    advanceContentClock(seconds) {
      if (!(seconds >= 0)) throw new Error('advanceContentClock: seconds >= 0');
      contentClockOffsetMs += seconds * 1000;
      for (const portal of portals.values()) portal.clockOffsetMs = contentClockOffsetMs;
    },
    revokeToken(token) {
      if (!tokens.delete(token)) oauth.revokeAccessToken(token);
    },
    registerApp: (config) => oauth.registerApp(config),
    setAccessTokenTtl: (seconds) => oauth.setAccessTokenTtl(seconds),
    queueInstall: (decision) => oauth.queueInstall(decision),
    setAutoInstall: (decision) => oauth.setAutoInstall(decision),
    async authorize(authorizeUrl) {
      const target = new URL(authorizeUrl);
      const response = await fetch(`${baseUrl}${target.pathname}${target.search}`, { redirect: 'manual' });
      const body = await response.text();
      const location = response.headers.get('location');
      if (response.status !== 302 || !location) throw new Error(`authorize answered ${response.status}: ${body}`);
      return new URL(location);
    },
    advanceClock: (seconds) => oauth.advanceClock(seconds),
    uninstall: (portalId, clientId) => {
      portalOf(portalId);
      oauth.uninstall(portalId, clientId);
    },
    removeScope(portalId, scope) {
      portalOf(portalId).removeScope(scope);
      oauth.removeScope(portalId, scope);
    },
    revokeRefreshToken(token) {
      oauth.revokeRefreshToken(token);
    },
    failNextOAuth: (count, status) => oauthFaults.failNext(count, status),
    setOAuthErrorStyle: (style) => oauth.setErrorStyle(style),
    issuedOAuthTokens: () => oauth.issuedTokens(),
    oauthLog: () => [...oauthLog],
    setFaults: (faultOptions) => faults.set(faultOptions),
    setLatency(ms) {
      latencyMs = checkLatency(ms);
    },
    failNext: (count, status) => faults.failNext(count, status),
    clearFaults() {
      faults.clear();
      oauthFaults.clear();
    },
    stats: () => ({
      ...stats,
      byEndpoint: { ...stats.byEndpoint },
      byPortal: Object.fromEntries(Object.entries(stats.byPortal).map(([k, v]) => [k, { ...v }])),
      rateLimitedByPortal: { ...stats.rateLimitedByPortal },
    }),
    limitsOf: (portalId, kind) => limitsOf(portalOf(portalId), kind),
    setOtherAppsShare(portalId, share) {
      if (!(share >= 0 && share < 1)) throw new Error('setOtherAppsShare: a share in [0, 1)');
      portalOf(portalId).otherAppsShare = share;
    },
    resetDailyLimits() {
      limiter.resetDaily();
    },
    resetStats() {
      stats = emptyStats();
      limiter.peak = 0;
      log = [];
      oauthLog = [];
    },
    requestLog: () => [...log],
  };
}

const MAX_FORM_BYTES = 64 * 1024;
const MAX_WRITE_BODY_BYTES = 16 * 1024 * 1024;

const TOO_LARGE = '\u0000too large';

// A write's request body as text (TOO_LARGE: over MAX_WRITE_BODY_BYTES).
function readBody(req: IncomingMessage, done: (text: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_WRITE_BODY_BYTES) chunks.push(chunk);
  });
  req.on('end', () => done(size > MAX_WRITE_BODY_BYTES ? TOO_LARGE : Buffer.concat(chunks).toString('utf8')));
}

function emptyStats(): SimulatorStats {
  return {
    requests: 0, byEndpoint: {}, rateLimited: 0, errorsInjected: 0, dropped: 0, peakPer10s: 0,
    oauthRequests: 0, codeExchanges: 0, tokenRefreshes: 0, expiredTokenRequests: 0, byPortal: {}, rateLimitedByPortal: {},
  };
}
