// A transaction-mode PgBouncer in front of a local Postgres, on 127.0.0.1 only:
// the stand-in for Supabase's transaction pooler (port 6543) in tests. Every
// database of the upstream server is reachable through it (`* =` fallback), as
// the user of the upstream URL; no prepared statements survive a transaction,
// no session state either — exactly what the functions must cope with.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { freePort } from './postgres.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** How to get PgBouncer when it is missing (Debian's package). */
export const PGBOUNCER_INSTALL_HINT = 'apt-get install -y pgbouncer (or set PGBOUNCER_BIN to its path)';

/** The pgbouncer binary: PGBOUNCER_BIN, else the first on PATH or in /usr/sbin; null when absent. */
export function findPgBouncer(): string | null {
  const candidates = [
    process.env.PGBOUNCER_BIN,
    ...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean).map((d) => path.join(d, 'pgbouncer')),
    '/usr/sbin/pgbouncer',
    '/usr/local/sbin/pgbouncer',
  ].filter((p): p is string => !!p);
  for (const p of candidates) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return null;
}

export interface PgBouncer {
  port: number;
  /** The upstream URL with host and port replaced by the pooler's (any database name works). */
  urlFor(upstreamUrl: string): string;
  /** Runs a statement on PgBouncer's admin console (SHOW POOLS, SHOW CLIENTS, ...). */
  admin(command: string): Promise<Record<string, unknown>[]>;
  /** Lines PgBouncer logged. */
  log: string[];
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Superuser URL of the upstream server (its user and password are used for both sides). */
  upstreamUrl: string;
  bin?: string;
  /** Server connections per database+user (default 20). */
  poolSize?: number;
  maxClientConnections?: number;
}

/** Starts PgBouncer (pool_mode = transaction) in front of `upstreamUrl`. */
export async function startPgBouncer(opts: PgBouncerOptions): Promise<PgBouncer> {
  const bin = opts.bin ?? findPgBouncer();
  if (!bin) throw new Error(`pgbouncer not found: ${PGBOUNCER_INSTALL_HINT}`);
  const upstream = new URL(opts.upstreamUrl);
  const user = decodeURIComponent(upstream.username);
  const password = decodeURIComponent(upstream.password);
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'queue-pgbouncer-'));
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  const ini = [
    '[databases]',
    `* = host=${upstream.hostname} port=${upstream.port || 5432}`,
    '',
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'pool_mode = transaction',
    `default_pool_size = ${opts.poolSize ?? 20}`,
    `max_client_conn = ${opts.maxClientConnections ?? 2000}`,
    'auth_type = scram-sha-256',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    `admin_users = ${user}`,
    `stats_users = ${user}`,
    // Drivers send these at startup; a transaction pooler cannot keep them per client.
    'ignore_startup_parameters = extra_float_digits,options',
    'server_reset_query =',
    'server_check_delay = 1',
    'log_connections = 0',
    'log_disconnections = 0',
    '',
  ].join('\n');
  await writeFile(path.join(dir, 'pgbouncer.ini'), ini);
  await writeFile(path.join(dir, 'userlist.txt'), `${quote(user)} ${quote(password)}\n`);
  const isRoot = userInfo().uid === 0;
  if (isRoot) {
    // PgBouncer refuses to run as root: it runs as `postgres` (the embedded server's OS user) or `nobody`, which must read its files.
    await chmod(dir, 0o755);
    await chmod(path.join(dir, 'pgbouncer.ini'), 0o644);
    await chmod(path.join(dir, 'userlist.txt'), 0o644);
  }
  const args = [...(isRoot ? ['-u', await unprivilegedUser()] : []), path.join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const log: string[] = [];
  const onData = (b: Buffer) => {
    for (const line of b.toString('utf8').split('\n')) if (line) log.push(line);
    if (log.length > 2000) log.splice(0, log.length - 2000);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited (${child.exitCode}): ${log.slice(-10).join('\n')}`);
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`pgbouncer did not listen on ${port}: ${log.slice(-10).join('\n')}`);
    }
    await sleep(50);
  }

  const urlFor = (upstreamUrl: string) => {
    const u = new URL(upstreamUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  return {
    port,
    urlFor,
    log,
    async admin(command) {
      const sql = postgres(urlFor(withDb(opts.upstreamUrl, 'pgbouncer')), { max: 1, prepare: false, onnotice: () => {}, fetch_types: false });
      try {
        return [...(await sql.unsafe(command, [], { prepare: false }))] as Record<string, unknown>[];
      } finally {
        await sql.end({ timeout: 2 });
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `postgres` when that OS user exists (the embedded server creates it), else `nobody`. */
async function unprivilegedUser(): Promise<string> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  return /^postgres:/m.test(passwd) ? 'postgres' : 'nobody';
}

function withDb(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

/**
 * Whether the pooler test suite can run, from QUEUE_TEST_POOLER ('1': must run,
 * '0': skip, unset: run when pgbouncer is installed). Throws when it must run and cannot.
 */
export function poolerSuitePlan(env: NodeJS.ProcessEnv = process.env): { run: true; bin: string } | { run: false; reason: string } {
  const mode = env.QUEUE_TEST_POOLER;
  if (mode === '0') return { run: false, reason: 'QUEUE_TEST_POOLER=0 was set' };
  const bin = findPgBouncer();
  if (bin) return { run: true, bin };
  if (mode === '1') throw new Error(`QUEUE_TEST_POOLER=1 but pgbouncer was not found: ${PGBOUNCER_INSTALL_HINT}`);
  return { run: false, reason: 'pgbouncer is not installed' };
}

/** The plain sentence `npm test` prints when the pooler suite did not run. */
export function poolerSkippedNotice(reason: string): string {
  return [
    `POOLER SUITE NOT RUN (${reason}): the SQL and end-to-end suites ran against Postgres directly only,`,
    reason.startsWith('QUEUE_TEST_POOLER=0')
      ? 'not through a transaction-mode pooler. To run it: unset QUEUE_TEST_POOLER, then npm test'
      : `not through a transaction-mode pooler. To run it: ${PGBOUNCER_INSTALL_HINT}, then npm test`,
    '(QUEUE_TEST_POOLER=1 makes a missing pgbouncer an error).',
  ].join('\n');
}
