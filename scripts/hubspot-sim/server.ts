// HubSpot CMS v3 HTTP simulator on 127.0.0.1: auth, scopes, rate limits, paging and fault injection.

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ContentType } from '../../shared/hubspot/content-types.ts';
import { FaultInjector, type FaultOptions } from './faults.ts';
import { Portal, type ItemSummary, type PortalOptions } from './portal.ts';
import { RateLimiter } from './rate-limit.ts';
import { missingScopes, notFound, rateLimited, send, serverError, unauthorized, type SimResponse } from './responses.ts';
import { handleRoute, matchRoute } from './routes.ts';

export { REALISTIC_PORTAL_SIZES, SMALL_PORTAL_SIZES, type ItemSummary, type PortalOptions } from './portal.ts';
export type { FaultOptions } from './faults.ts';

export interface SimulatorOptions {
  port?: number;
  rateLimit?: { maxPer10s?: number; daily?: number; windowMs?: number };
  seed?: number; // seeds fault injection (default 1)
  maxLogEntries?: number; // request log cap (default 100_000, oldest half dropped when full)
}

export interface SimulatorStats {
  requests: number;
  byEndpoint: Record<string, number>;
  rateLimited: number;
  errorsInjected: number;
  dropped: number;
  peakPer10s: number; // most admitted requests of one token inside any rolling window (windowMs, default 10 s)
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
  touchItems(portalId: number, type: ContentType, which: number | string[]): string[];
  items(portalId: number, type: ContentType): ItemSummary[];
  revokeToken(token: string): void;
  setFaults(options: FaultOptions): void;
  failNext(count: number, status?: number | 'drop'): void;
  clearFaults(): void;
  stats(): SimulatorStats;
  resetStats(): void;
  /** Forgets every token's daily usage, as HubSpot's daily limit resets at midnight. */
  resetDailyLimits(): void;
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
  const limiter = new RateLimiter({
    maxPer10s: options.rateLimit?.maxPer10s ?? 190,
    daily: options.rateLimit?.daily ?? 1_000_000,
    windowMs: options.rateLimit?.windowMs ?? 10_000,
  });
  const faults = new FaultInjector(options.seed ?? 1);
  const maxLog = options.maxLogEntries ?? 100_000;
  const timers = new Set<NodeJS.Timeout>();
  let log: RequestLogEntry[] = [];
  let stats = emptyStats();
  let baseUrl = '';

  const portalOf = (portalId: number): Portal => {
    const portal = portals.get(portalId);
    if (!portal) throw new Error(`unknown portal ${portalId}`);
    return portal;
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', baseUrl);
    const method = req.method ?? 'GET';
    const route = matchRoute(method, url.pathname);
    const endpoint = route?.key ?? `${method} (unknown)`;
    stats.requests++;
    stats.byEndpoint[endpoint] = (stats.byEndpoint[endpoint] ?? 0) + 1;
    const token = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim() ?? null;
    const auth = token ? tokens.get(token) : undefined;
    const entry: RequestLogEntry = {
      at: Date.now(), method, path: url.pathname, endpoint,
      after: url.searchParams.get('after'), limit: url.searchParams.get('limit'),
      offset: url.searchParams.get('offset'), archived: url.searchParams.get('archived'),
      status: 0, tokenHash: token ? (auth?.hash ?? tokenHash(token)) : null, portalId: auth?.portal.portalId ?? null,
    };
    if (log.length >= maxLog) log = log.slice(Math.floor(maxLog / 2));
    log.push(entry);
    const finish = (response: SimResponse, headers: Record<string, string> = {}): void => {
      entry.status = response.status;
      if (response.status === 429) stats.rateLimited++;
      send(res, response, headers);
    };

    if (!route) return finish(notFound());
    if (!auth) return finish(unauthorized(token !== null));
    const decision = limiter.take(auth.hash);
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
      if (route.scope && !auth.portal.scopes.has(route.scope)) return finish(missingScopes(route.scope), decision.headers);
      finish(handleRoute(route, auth.portal, url.searchParams, url.pathname, baseUrl), decision.headers);
    };
    if (fault.delayMs <= 0) return respond();
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (!res.destroyed) respond();
    }, fault.delayMs);
    timers.add(timer);
  };

  const server = createServer((req, res) => {
    try {
      handle(req, res);
    } catch (error) {
      if (!res.headersSent) send(res, serverError(500), {});
      console.error('hubspot-sim handler error', error);
    }
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
      portals.set(portal.portalId, portal);
      tokens.set(portalOptions.token, { portal, hash: tokenHash(portalOptions.token) });
    },
    addItems: (portalId, type, count) => portalOf(portalId).addItems(type, count),
    deleteItems: (portalId, type, which) => portalOf(portalId).deleteItems(type, which),
    touchItems: (portalId, type, which) => portalOf(portalId).touchItems(type, which),
    items: (portalId, type) => portalOf(portalId).items(type),
    revokeToken(token) {
      tokens.delete(token);
    },
    setFaults: (faultOptions) => faults.set(faultOptions),
    failNext: (count, status) => faults.failNext(count, status),
    clearFaults: () => faults.clear(),
    stats: () => ({ ...stats, byEndpoint: { ...stats.byEndpoint } }),
    resetDailyLimits() {
      limiter.resetDaily();
    },
    resetStats() {
      stats = emptyStats();
      limiter.peak = 0;
      log = [];
    },
    requestLog: () => [...log],
  };
}

function emptyStats(): SimulatorStats {
  return { requests: 0, byEndpoint: {}, rateLimited: 0, errorsInjected: 0, dropped: 0, peakPer10s: 0 };
}
