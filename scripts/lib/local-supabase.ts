// A local stand-in for a Supabase project's HTTP surface, on 127.0.0.1 only:
// the edge functions run under real Deno, behind a gateway that serves them at
// /functions/v1/<name> and the project's JWKS at /auth/v1/.well-known/jwks.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { freePort, PROJECT_ROOT } from './local-postgres.ts';

const DENO_BIN = path.join(PROJECT_ROOT, 'node_modules/.bin/deno');

export interface SigningKeys {
  jwks: { keys: JWK[] };
  /** Signs a user access token the way Supabase Auth does (ES256, aud authenticated). */
  signUserToken(userId: string, opts?: { expiresInSeconds?: number; extraClaims?: Record<string, unknown> }): Promise<string>;
}

/** Generates an ES256 key pair and a signer for user tokens. */
export async function createSigningKeys(): Promise<SigningKeys> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: `local-${Date.now()}`, alg: 'ES256', use: 'sig' };
  return {
    jwks: { keys: [jwk] },
    signUserToken: (userId, opts = {}) =>
      new SignJWT({ role: 'authenticated', aal: 'aal1', ...opts.extraClaims })
        .setProtectedHeader({ alg: 'ES256', kid: jwk.kid, typ: 'JWT' })
        .setSubject(userId)
        .setAudience('authenticated')
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + (opts.expiresInSeconds ?? 3600))
        .sign(privateKey),
  };
}

export interface LocalFunctions {
  /** The stand-in SUPABASE_URL (gateway base URL). */
  url: string;
  functionUrl(name: string): string;
  /** The Deno process of each function, by name. */
  processes: Map<string, ChildProcess>;
  /** Lines each function printed (stdout and stderr). */
  output: Map<string, string[]>;
  /** Kills a function's process with `signal` and starts a new one on the same port. */
  restart(name: string, signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

export interface StartFunctionsOptions {
  names: readonly string[];
  /** Environment for the functions; SUPABASE_URL is filled in with the gateway's URL. */
  env: Record<string, string>;
  jwks: { keys: JWK[] };
  onLine?: (fn: string, line: string) => void;
  port?: number;
}

/** Starts each function under Deno and the gateway in front of them. */
export async function startLocalFunctions(opts: StartFunctionsOptions): Promise<LocalFunctions> {
  const gatewayPort = opts.port ?? (await freePort());
  const url = `http://127.0.0.1:${gatewayPort}`;
  const processes = new Map<string, ChildProcess>();
  const output = new Map<string, string[]>();
  const ports = new Map<string, number>();
  const spawnFunction = (name: string) => {
    const port = ports.get(name)!;
    const child = spawn(
      DENO_BIN,
      ['run', '-A', '--config', 'deno.json', 'scripts/deno/serve-function.ts', `supabase/functions/${name}/index.ts`, String(port)],
      { cwd: PROJECT_ROOT, env: { ...minimalEnv(), ...opts.env, SUPABASE_URL: url }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    processes.set(name, child);
    const lines = output.get(name)!;
    const onData = (buf: Buffer) => {
      for (const line of buf.toString('utf8').split('\n')) {
        if (!line) continue;
        lines.push(line);
        if (lines.length > 5000) lines.shift();
        opts.onLine?.(name, line);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
  };
  for (const name of opts.names) {
    ports.set(name, await freePort());
    output.set(name, []);
    spawnFunction(name);
  }
  const gateway = createGateway(ports, opts.jwks);
  await new Promise<void>((resolve) => gateway.listen(gatewayPort, '127.0.0.1', resolve));
  await Promise.all([...ports].map(([name, port]) => waitForListen(name, port, processes.get(name)!, output.get(name)!)));
  return {
    url,
    functionUrl: (name) => `${url}/functions/v1/${name}`,
    processes,
    output,
    async restart(name, signal = 'SIGKILL') {
      const old = processes.get(name);
      if (!old) throw new Error(`no function ${name}`);
      await new Promise<void>((resolve) => {
        if (old.exitCode !== null || old.signalCode !== null) return resolve();
        old.once('exit', () => resolve());
        old.kill(signal);
      });
      const lines = output.get(name)!;
      lines.length = 0;
      spawnFunction(name);
      await waitForListen(name, ports.get(name)!, processes.get(name)!, lines);
    },
    async stop() {
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
      await Promise.all([...processes.values()].map(stopProcess));
    },
  };
}

function minimalEnv(): Record<string, string> {
  const keep = ['PATH', 'HOME', 'TMPDIR', 'DENO_DIR', 'LANG', 'TZ'];
  return Object.fromEntries(keep.filter((k) => process.env[k]).map((k) => [k, process.env[k]!]));
}

function createGateway(ports: Map<string, number>, jwks: { keys: JWK[] }): Server {
  return createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://gateway');
    if (u.pathname === '/auth/v1/.well-known/jwks.json') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
      return;
    }
    const m = /^\/functions\/v1\/([a-z0-9_-]+)(\/.*)?$/.exec(u.pathname);
    const port = m ? ports.get(m[1]!) : undefined;
    if (!port) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'NOT_FOUND', message: 'No such function' }));
      return;
    }
    const upstream = httpRequest(
      { host: '127.0.0.1', port, method: req.method, path: `/${m![1]}${m![2] ?? ''}${u.search}`, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'FUNCTION_UNAVAILABLE', message: 'The function is not running' }));
    });
    req.pipe(upstream);
  });
}

async function waitForListen(name: string, port: number, child: ChildProcess, lines: string[]): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (lines.some((l) => l.includes(`listening ${port}`))) return;
    if (child.exitCode !== null) throw new Error(`function ${name} exited (${child.exitCode}): ${lines.slice(-20).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`function ${name} did not start: ${lines.slice(-20).join('\n')}`);
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const t = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
