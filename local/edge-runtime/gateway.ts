// The local stand-in for a project's API gateway, on 127.0.0.1: serves the
// edge functions at /functions/v1/<name> (through the supervisor's isolates),
// the project's JWKS at /auth/v1/.well-known/jwks.json (and /auth/v1/jwks) and,
// when given the Realtime stand-in (local/realtime/), its websocket at
// /realtime/v1/websocket; other stand-ins by path prefix (the local Auth at
// /auth/v1, local/auth/auth.ts). Everything else a hosted project serves (REST, Auth,
// Storage, ...) answers 501 NOT_SERVED_LOCALLY instead of pretending to be a
// missing function.
//
// Errors as hosted answers them (platform docs, "Status codes" and "Error
// codes"), with the code in the body and in an `sb-error-code` header:
// 404 NOT_FOUND (no such function), 405 (method), 503 BOOT_ERROR, 500
// WORKER_ERROR (the isolate died under the request), 546 WORKER_RESOURCE_LIMIT
// (a CPU, memory or wall-clock limit ended the isolate), 504 IDLE_TIMEOUT.
import type { Duplex } from 'node:stream';
import { Agent, createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { LIMIT_REASONS } from './limits.ts';
import { BootError, type Supervisor } from './supervisor.ts';

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export interface GatewayOptions {
  supervisor: Supervisor;
  jwks: unknown;
  requestIdleTimeoutMs: number;
  /** Other stand-ins by path prefix (e.g. '/auth/v1' -> a local Auth's base URL); the full path is forwarded. */
  upstreams?: Record<string, string>;
  /** The Realtime stand-in: takes websocket upgrades to /realtime/v1/websocket. */
  realtime?: { handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void };
  /** Why Realtime is not served (said in the 501), when it is not. */
  realtimeUnavailable?: string;
}

function fail(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', 'sb-error-code': code }).end(JSON.stringify({ code, message }));
}

/** Headers without the hop-by-hop ones that describe one connection, not the message. */
function hopless(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const { connection: _c, 'keep-alive': _k, 'proxy-connection': _p, ...rest } = headers as IncomingHttpHeaders & { 'proxy-connection'?: string };
  return rest;
}

function notServed(pathname: string, realtimeUnavailable?: string, authServed = false): string {
  const what = pathname.startsWith('/rest/v1')
    ? 'PostgREST (/rest/v1)'
    : pathname.startsWith('/realtime/v1')
      ? 'Realtime (/realtime/v1)'
      : pathname.startsWith('/storage/v1')
        ? 'Storage (/storage/v1)'
        : pathname.startsWith('/auth/v1')
          ? 'Auth (/auth/v1)'
          : pathname.startsWith('/graphql/v1')
            ? 'GraphQL (/graphql/v1)'
            : `${pathname}`;
  const why = pathname.startsWith('/realtime/v1') && realtimeUnavailable ? ` (${realtimeUnavailable})` : '';
  return (
    `${what} is not served by this local stand-in${why}, which serves only /functions/v1/<name>, ` +
    `${authServed ? '/auth/v1 (sign-up, sign-in, refresh, user, sign-out, JWKS)' : '/auth/v1/.well-known/jwks.json'} and /realtime/v1/websocket. ` +
    `For REST${authServed ? '' : ', Auth'} and Storage run the full local stack (\`supabase start\`) and point SUPABASE_URL at it.`
  );
}

export function createGateway(opts: GatewayOptions): Server & { closeUpstreams(): void } {
  // A connection per request: no pooled socket the isolate may be closing as it is reused.
  const agent = new Agent({ keepAlive: false, maxSockets: 256 });
  const jwksBody = JSON.stringify(opts.jwks);
  const upstreams = Object.entries(opts.upstreams ?? {})
    .map(([prefix, base]) => [prefix.replace(/\/$/, ''), new URL(base)] as const)
    .sort((a, b) => b[0].length - a[0].length);
  const authServed = upstreams.some(([prefix]) => prefix === '/auth/v1');
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://gateway');
    const up = upstreams.find(([prefix]) => u.pathname === prefix || u.pathname.startsWith(`${prefix}/`));
    if (up) {
      forward(req, res, up[1], `${u.pathname}${u.search}`);
      return;
    }
    if (u.pathname === '/auth/v1/.well-known/jwks.json' || u.pathname === '/auth/v1/jwks') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(jwksBody);
      return;
    }
    const m = /^\/functions\/v1\/([^/?#]+)(\/.*)?$/.exec(u.pathname);
    if (!m) {
      fail(res, 501, 'NOT_SERVED_LOCALLY', notServed(u.pathname, opts.realtimeUnavailable, authServed));
      return;
    }
    const pool = opts.supervisor.pools.get(m[1]!);
    if (!pool) {
      fail(res, 404, 'NOT_FOUND', 'Requested function was not found');
      return;
    }
    if (!METHODS.has(req.method ?? '')) {
      fail(res, 405, 'METHOD_NOT_ALLOWED', `Edge Functions only support ${[...METHODS].join(', ')}`);
      return;
    }
    void proxy(req, res, pool.name, `/${m[1]}${m[2] ?? ''}${u.search}`);
  });

  // Websocket upgrades: Realtime's, or the same 501 as a plain request gets.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const u = new URL(req.url ?? '/', 'http://gateway');
    if (u.pathname === '/realtime/v1/websocket' && opts.realtime) {
      opts.realtime.handleUpgrade(req, socket, head);
      return;
    }
    const body = JSON.stringify({ code: 'NOT_SERVED_LOCALLY', message: notServed(u.pathname, opts.realtimeUnavailable, authServed) });
    socket.end(
      `HTTP/1.1 501 Not Implemented\r\ncontent-type: application/json\r\nsb-error-code: NOT_SERVED_LOCALLY\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });

  function forward(req: IncomingMessage, res: ServerResponse, base: URL, path: string): void {
    const headers = { ...hopless(req.headers), host: base.host };
    const upstream = httpRequest({ host: base.hostname, port: base.port, method: req.method, path, headers, agent }, (up) => {
      res.writeHead(up.statusCode ?? 502, hopless(up.headers));
      up.pipe(res);
      up.on('error', () => res.destroy());
    });
    upstream.on('error', () => fail(res, 502, 'UPSTREAM_UNAVAILABLE', `${base.origin} did not answer`));
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, name: string, path: string): Promise<void> {
    const pool = opts.supervisor.pools.get(name)!;
    let acquired;
    try {
      acquired = await pool.acquire();
    } catch (e) {
      fail(res, 503, 'BOOT_ERROR', `Function failed to start (please check logs): ${e instanceof BootError ? e.message.split('\n')[0] : String(e)}`);
      req.resume();
      return;
    }
    const { isolate, request } = acquired;
    let finished = false;
    let clientGone = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(idle);
      isolate.end(request);
    };
    const upstream = httpRequest({ host: '127.0.0.1', port: isolate.port, method: req.method, path, headers: hopless(req.headers), agent }, (up) => {
      clearTimeout(idle);
      res.writeHead(up.statusCode ?? 502, hopless(up.headers));
      up.pipe(res);
      up.on('error', () => res.destroy());
      up.on('aborted', () => res.destroy());
    });
    const idle =
      opts.requestIdleTimeoutMs > 0
        ? setTimeout(() => {
            fail(res, 504, 'IDLE_TIMEOUT', `The function did not respond within ${opts.requestIdleTimeoutMs} ms`);
            upstream.destroy();
            finish();
          }, opts.requestIdleTimeoutMs)
        : undefined;
    res.on('close', () => {
      if (!res.writableFinished) {
        clientGone = true;
        upstream.destroy();
      }
      finish();
    });
    upstream.on('error', async () => {
      if (clientGone) return;
      if (res.headersSent || res.writableEnded) {
        res.destroy();
        return;
      }
      // The isolate most likely died under the request: answer by why it died.
      const reason = await Promise.race([isolate.exited, new Promise<null>((r) => setTimeout(() => r(null), 3000))]);
      if (reason && LIMIT_REASONS.includes(reason)) {
        fail(res, 546, 'WORKER_RESOURCE_LIMIT', `Function failed due to not having enough compute resources (please check logs): ${reason}`);
      } else if (reason) {
        fail(res, 500, 'WORKER_ERROR', `Function exited before it responded (please check logs): ${reason}`);
      } else {
        fail(res, 502, 'FUNCTION_UNAVAILABLE', 'The function did not answer');
      }
      finish();
    });
    req.pipe(upstream);
  }

  return Object.assign(server, { closeUpstreams: () => agent.destroy() });
}
