// Serves the progress page (web/index.html and its modules) on 127.0.0.1 for
// `npm start -- --serve` and the browser test, with a config.json telling the
// page where the functions are and which access token to use. With an anon
// key it also serves supabase-js (the pinned UMD build from node_modules,
// wrapped as an ES module) so the page follows the run through the local
// Realtime stand-in. The page itself is static: deployed, host the two files
// anywhere (see the README).
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { freePort, PROJECT_ROOT } from './local-postgres.ts';

export interface PageConfig {
  /** The (stand-in) SUPABASE_URL the page calls /functions/v1/orchestrator on. */
  supabaseUrl: string;
  /** The signed-in user's access token (locally: the demo user's). */
  accessToken: string;
  /** Prefills the connect form (a local simulator token, never a real one). */
  demoPortal?: { name: string; token: string };
  /** The project's anon key: with it the page loads supabase-js (served here) and subscribes to Realtime. */
  anonKey?: string;
}

export interface WebServer {
  url: string;
  close(): Promise<void>;
}

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
  const server: Server = createServer((req, res) => {
    const pathname = new URL(req.url ?? '/', 'http://page').pathname;
    const headers = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...headers, Allow: 'GET, HEAD' }).end();
      return;
    }
    if (pathname === '/config.json') {
      const realtime = config.anonKey ? { realtime: true, supabaseJsUrl: './supabase-js.mjs' } : {};
      res.writeHead(200, { ...headers, 'Content-Type': 'application/json' }).end(JSON.stringify({ mode: 'local', ...config, ...realtime }));
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
    url: `http://127.0.0.1:${p}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
