// Serves the progress page (web/index.html and its modules) on 127.0.0.1 for
// `npm start -- --serve` and the browser tests, with a config.json telling the
// page where the project is. With an anon key it also serves supabase-js (the
// pinned UMD build from node_modules, wrapped as an ES module) so the page signs
// in through the local Auth and follows runs through the local Realtime
// stand-in. config.json is answered only to the page of this start: a request
// must carry the page key (a secret made per start, given to the page in its
// URL's fragment, sent back as the X-Page-Key header), and every request must
// name 127.0.0.1 or localhost as its Host, so a web page elsewhere cannot read
// it even by DNS rebinding. It never holds a HubSpot token. The page itself is
// static: deployed, host the files anywhere (see web/README.md).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { freePort, PROJECT_ROOT } from './postgres.ts';

export interface PageConfig {
  /** The (stand-in) SUPABASE_URL the page calls /functions/v1/orchestrator on. */
  supabaseUrl: string;
  /** A user's access token to start signed in with (tests); without it the page signs in through Auth. */
  accessToken?: string;
  /** Prefills the connect form's name. */
  demoPortal?: { name: string };
  /** The project's anon key: with it the page loads supabase-js (served here) to sign in and subscribe to Realtime. */
  anonKey?: string;
  /** Whether the project serves Realtime (default: when there is an anon key). */
  realtime?: boolean;
}

export interface WebServer {
  /** The page to open: its address with the page key in the fragment. */
  url: string;
  /** The page with a query string (e.g. '?poll=off'), the page key still in the fragment. */
  urlWith(search: string): string;
  close(): Promise<void>;
}

/** The header the page sends its page key in. */
export const PAGE_KEY_HEADER = 'x-page-key';
/** Host names this server answers to (it listens on 127.0.0.1 only). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost']);

const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'web/index.html', type: 'text/html; charset=utf-8' },
  '/index.html': { file: 'web/index.html', type: 'text/html; charset=utf-8' },
  // Every module of the page (web/*.js).
  ...Object.fromEntries(readdirSync(path.join(PROJECT_ROOT, 'web')).filter((f) => /^[a-z-]+\.js$/.test(f))
    .map((f) => [`/${f}`, { file: `web/${f}`, type: 'text/javascript; charset=utf-8' }])),
};

const SUPABASE_UMD = path.join(PROJECT_ROOT, 'node_modules/@supabase/supabase-js/dist/umd/supabase.js');

/** Starts the page server on a free loopback port. */
export async function startWebServer(config: PageConfig, port?: number): Promise<WebServer> {
  const pageKey = randomBytes(24).toString('base64url');
  const keyMatches = (given: unknown) =>
    typeof given === 'string' && given.length === pageKey.length && timingSafeEqual(Buffer.from(given), Buffer.from(pageKey));
  const server: Server = createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://page').pathname;
    const headers = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' };
    const refuse = (status: number, code: string, message: string) =>
      res.writeHead(status, { ...headers, 'Content-Type': 'application/json' }).end(JSON.stringify({ code, message }));
    // A name resolving to 127.0.0.1 that is not ours (DNS rebinding) gets nothing at all.
    const host = /^([^:[\]]+|\[[^\]]*\])(?::\d+)?$/.exec(req.headers.host ?? '')?.[1]?.toLowerCase();
    if (!host || !LOOPBACK_HOSTS.has(host)) return refuse(421, 'HOST_NOT_ALLOWED', 'This local server answers only to Host 127.0.0.1 or localhost.');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...headers, Allow: 'GET, HEAD' }).end();
      return;
    }
    if (pathname === '/config.json') {
      if (!keyMatches(req.headers[PAGE_KEY_HEADER])) {
        return refuse(401, 'PAGE_KEY_REQUIRED', 'Open the page with the address npm start printed: its #pageKey=… is what this needs.');
      }
      // Field by field: nothing else a caller put in the config (say a HubSpot token) can leave here.
      const body = {
        mode: 'local',
        supabaseUrl: config.supabaseUrl,
        accessToken: config.accessToken,
        anonKey: config.anonKey,
        demoPortal: config.demoPortal ? { name: config.demoPortal.name } : undefined,
        realtime: config.realtime ?? Boolean(config.anonKey),
        supabaseJsUrl: config.anonKey ? './supabase-js.mjs' : undefined,
      };
      res.writeHead(200, { ...headers, 'Content-Type': 'application/json' }).end(JSON.stringify(body));
      return;
    }
    if (pathname === '/supabase-js.mjs') {
      // The UMD build assigns `var supabase`; as a module it only needs its exports named.
      readFile(SUPABASE_UMD, 'utf8').then(
        (umd) => res.writeHead(200, { ...headers, 'Content-Type': 'text/javascript; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : `${umd}\nexport const { createClient } = supabase;\nexport default supabase;\n`),
        () => res.writeHead(500).end(),
      );
      return;
    }
    const entry = FILES[pathname];
    if (!entry) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' }).end('not found');
      return;
    }
    readFile(path.join(PROJECT_ROOT, entry.file)).then(
      (body) => res.writeHead(200, { ...headers, 'Content-Type': entry.type }).end(req.method === 'HEAD' ? undefined : body),
      () => res.writeHead(500).end(),
    );
  });
  const p = port ?? (await freePort());
  await new Promise<void>((resolve) => server.listen(p, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${p}/#pageKey=${pageKey}`,
    urlWith: (search) => `http://127.0.0.1:${p}/${search}#pageKey=${pageKey}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
