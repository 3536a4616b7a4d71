// The benchmark's Postgres: an embedded server in a temp dir (or DATABASE_URL),
// database templates and clones, and the server's CPU time from /proc.
import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { createMigratedDatabase, startEmbeddedPostgres, withAdmin, withDatabase } from '../../local/postgres.ts';

export interface BenchPostgres {
  adminUrl: string;
  /** Postmaster pid when the server runs on this machine (for CPU accounting). */
  pid: number | null;
  version: string;
  /**
   * pg_stat_statements is preloaded (the embedded server is restarted once
   * with it; a DATABASE_URL server only if it preloads it already). Tracking
   * is off server-wide ('none'): a diagnostic turns it on for its own session.
   */
  statStatements: boolean;
  /** Prefix of every database this run creates. */
  prefix: string;
  stop(): Promise<void>;
}

/** Starts the embedded server (or uses DATABASE_URL) and notes its postmaster pid. */
export async function startBenchPostgres(log: (s: string) => void): Promise<BenchPostgres> {
  const prefix = `bench_${process.pid}_`;
  let stopServer = async () => {};
  let adminUrl = process.env.DATABASE_URL;
  let dataRoot: string | null = null;
  if (!adminUrl) {
    dataRoot = await mkdtemp(path.join(tmpdir(), 'queue-bench-pg-'));
    const dataDir = path.join(dataRoot, 'data');
    let server = await startEmbeddedPostgres({ dataDir });
    // Preload pg_stat_statements (a restart), with tracking off until a diagnostic session asks for it.
    const preloaded = await withAdmin(server.adminUrl, async (sql) => {
      try {
        await sql.unsafe(`alter system set shared_preload_libraries = 'pg_stat_statements'`);
        await sql.unsafe(`alter system set pg_stat_statements.track = 'none'`);
        return true;
      } catch (e) {
        log(`pg_stat_statements not configured: ${e instanceof Error ? e.message : String(e)}`);
        return false;
      }
    });
    if (preloaded) {
      await server.stop();
      server = await startEmbeddedPostgres({ dataDir });
    }
    adminUrl = server.adminUrl;
    stopServer = () => server.stop();
    log(`embedded Postgres on ${new URL(adminUrl).port} (data under ${dataRoot})`);
  } else {
    log('using DATABASE_URL');
  }
  const url = adminUrl;
  const { version, pid, statStatements } = await withAdmin(url, async (sql) => {
    const [v] = await sql`select current_setting('server_version') as version`;
    // Through pg_settings: a role without pg_read_all_settings (hosted Supabase's `postgres`) sees no row, where current_setting() fails.
    const [pre] = await sql`select setting as libs from pg_settings where name = 'shared_preload_libraries'`;
    const statStatements = String(pre?.libs ?? '').split(',').map((l) => l.trim()).includes('pg_stat_statements');
    let pid: number | null = null;
    try {
      const [p] = await sql`select pg_read_file('postmaster.pid') as text`;
      const candidate = Number(String(p?.text ?? '').split('\n')[0]);
      if (Number.isInteger(candidate) && (await readFile(`/proc/${candidate}/stat`, 'utf8').then(() => true, () => false))) pid = candidate;
    } catch {
      // pg_read_file is for superusers (and pg_read_server_files): hosted Supabase's `postgres` is neither.
      pid = await postmasterOfBackend(sql);
    }
    return { version: String(v?.version), pid, statStatements };
  });
  log(statStatements ? 'pg_stat_statements preloaded (tracking off unless a diagnostic turns it on)' : 'pg_stat_statements not available: no per-statement diagnostic');
  return {
    adminUrl: url,
    pid,
    version,
    statStatements,
    prefix,
    async stop() {
      await withAdmin(url, async (sql) => {
        const dbs = await sql`select datname from pg_database where datname like ${`${prefix}%`}`;
        for (const d of dbs) await sql.unsafe(`drop database if exists "${d.datname as string}" with (force)`);
      }).catch(() => {});
      await stopServer();
      if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
    },
  };
}

/**
 * The postmaster's pid found without a superuser: the parent of this
 * connection's backend, if that backend is a local process (its title names
 * this connection's role and database; a server elsewhere, in a container
 * say, has pids that mean nothing here). Null when not local.
 */
async function postmasterOfBackend(sql: postgres.Sql): Promise<number | null> {
  const [b] = await sql`select pg_backend_pid() as pid, current_user as role, current_database() as db`;
  try {
    const title = (await readFile(`/proc/${b!.pid as number}/cmdline`, 'utf8')).replace(/\0/g, ' ').trim();
    if (!title.startsWith(`postgres: ${b!.role as string} ${b!.db as string} `)) return null;
    const parent = Number(statFields(await readFile(`/proc/${b!.pid as number}/stat`, 'utf8'))[1]);
    return Number.isInteger(parent) && parent > 1 ? parent : null;
  } catch {
    return null;
  }
}

/** A freshly migrated queue database named `<prefix><name>`. */
export async function migratedDatabase(pg: BenchPostgres, name: string): Promise<string> {
  return await createMigratedDatabase(pg.adminUrl, `${pg.prefix}${name}`, { recreate: true, testHelpers: true });
}

/** An empty database `<prefix><name>` (for graphile-worker and pg-boss). */
export async function emptyDatabase(pg: BenchPostgres, name: string): Promise<string> {
  const full = `${pg.prefix}${name}`;
  await withAdmin(pg.adminUrl, async (sql) => {
    await sql.unsafe(`drop database if exists "${full}" with (force)`);
    await sql.unsafe(`create database "${full}"`);
  });
  return withDatabase(pg.adminUrl, full);
}

/** Copies a template database (file copy: fast, identical starting state every repetition). */
export async function cloneDatabase(pg: BenchPostgres, templateUrl: string, name: string): Promise<string> {
  const template = new URL(templateUrl).pathname.slice(1);
  const full = `${pg.prefix}${name}`;
  await withAdmin(pg.adminUrl, async (sql) => {
    await sql.unsafe(`drop database if exists "${full}" with (force)`);
    await sql.unsafe(`create database "${full}" template "${template}" strategy file_copy`);
  });
  return withDatabase(pg.adminUrl, full);
}

export async function dropDatabase(pg: BenchPostgres, url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await withAdmin(pg.adminUrl, (sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
}

/** A pool with exactly `max` connections, configured like shared/db.ts (prepare: false). */
export function pool(url: string, max: number): postgres.Sql {
  return postgres(url, { prepare: false, max, idle_timeout: 20, connect_timeout: 30, onnotice: () => {} });
}

let clkTck: number | null = null;
function ticksPerSecond(): number {
  if (clkTck === null) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

function statFields(text: string): string[] {
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/**
 * CPU ms used so far by the postmaster and every backend: the postmaster's own
 * and reaped children's time plus each live child's (the sum of
 * postgresCpuByKind). Deltas of two readings give the server's CPU over an
 * interval. Null when the server is not local.
 */
export async function postgresCpuMs(pid: number | null): Promise<number | null> {
  return totalCpuMs(await postgresCpuByKind(pid));
}

/** The server's CPU ms in one postgresCpuByKind reading (null stays null). */
export function totalCpuMs(byKind: Record<string, number> | null): number | null {
  return byKind === null ? null : Object.values(byKind).reduce((a, b) => a + b, 0);
}

/**
 * The server's CPU ms so far by process kind, from /proc: the postmaster itself,
 * children already reaped (autovacuum workers, closed connections), and each live
 * child by its process title's kind (client backends, autovacuum, checkpointer, ...).
 * Deltas of two readings say where a window's Postgres CPU went. Null when not local.
 */
export async function postgresCpuByKind(pid: number | null): Promise<Record<string, number> | null> {
  if (pid === null) return null;
  const ms = (ticks: number) => (ticks * 1000) / ticksPerSecond();
  const out: Record<string, number> = {};
  const add = (k: string, v: number) => (out[k] = (out[k] ?? 0) + v);
  try {
    const own = statFields(await readFile(`/proc/${pid}/stat`, 'utf8'));
    add('postmaster', ms(Number(own[11]) + Number(own[12])));
    add('reaped children', ms(Number(own[13]) + Number(own[14])));
  } catch {
    return null;
  }
  const entries = await readdir('/proc');
  await Promise.all(
    entries.filter((e) => /^\d+$/.test(e)).map(async (e) => {
      try {
        const f = statFields(await readFile(`/proc/${e}/stat`, 'utf8'));
        if (Number(f[1]) !== pid) return;
        const title = (await readFile(`/proc/${e}/cmdline`, 'utf8')).replace(/\0/g, ' ').trim();
        const kind = /^postgres: (autovacuum worker|autovacuum launcher|checkpointer|background writer|walwriter|logical replication launcher|pg_cron launcher)/.exec(title)?.[1]
          ?? (/^postgres: \S+ \S+ /.test(title) ? 'client backends' : title.replace(/^postgres: /, '').slice(0, 40));
        add(kind, ms(Number(f[11]) + Number(f[12])));
      } catch {
        // the process ended meanwhile: its time is in the postmaster's cutime once reaped
      }
    }),
  );
  return out;
}

/** Per kind, CPU ms between two `postgresCpuByKind` readings (live children that ended fall to "reaped"). */
export function cpuByKindDelta(from: Record<string, number>, to: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of new Set([...Object.keys(from), ...Object.keys(to)])) out[k] = (to[k] ?? 0) - (from[k] ?? 0);
  return out;
}

/**
 * CPU ms each live backend of one application name has used so far (pid → ms),
 * from /proc: a scenario's own queries, to tell apart from the product's. Empty
 * when the server is not local.
 */
export async function backendCpuMs(sql: postgres.Sql, applicationName: string): Promise<Map<number, number>> {
  const rows = await sql`select pid from pg_stat_activity where application_name = ${applicationName}`;
  const out = new Map<number, number>();
  for (const r of rows) {
    try {
      const f = statFields(await readFile(`/proc/${r.pid as number}/stat`, 'utf8'));
      out.set(r.pid as number, ((Number(f[11]) + Number(f[12])) * 1000) / ticksPerSecond());
    } catch {
      // not on this machine, or ended meanwhile
    }
  }
  return out;
}

/** CPU ms backends used between two `backendCpuMs` readings (a backend started meanwhile counts whole). */
export function backendCpuDelta(from: Map<number, number>, to: Map<number, number>): number {
  let ms = 0;
  for (const [pid, used] of to) ms += used - (from.get(pid) ?? 0);
  return ms;
}

/** Client and server CPU over an interval. */
export async function cpuMeter(pgPid: number | null): Promise<() => Promise<{ clientMs: number; serverMs: number | null }>> {
  const c0 = process.cpuUsage();
  const s0 = await postgresCpuMs(pgPid);
  return async () => {
    const c = process.cpuUsage(c0);
    const s1 = await postgresCpuMs(pgPid);
    return { clientMs: (c.user + c.system) / 1000, serverMs: s0 === null || s1 === null ? null : s1 - s0 };
  };
}

export interface ConnectionPeaks {
  samples: number;
  /** Most client backends on the database at once (the sampler's own excluded). */
  peak: number;
  /** At that moment, by application_name. */
  peakByApp: Record<string, number>;
  /** Most backends at once per application_name (each at its own moment). */
  peakPerApp: Record<string, number>;
  /** Most worker invocation leases held at once (private.worker_invocations with a live lease). */
  peakInvocationLeases: number;
}

/**
 * Samples pg_stat_activity of the database at `url` every `intervalMs` on a
 * connection of its own (not counted), and the worker invocation leases held.
 * stop() ends sampling and returns the peaks.
 */
export function connectionSampler(url: string, intervalMs = 100): { stop(): Promise<ConnectionPeaks> } {
  const sql = postgres(url, { prepare: false, max: 1, onnotice: () => {}, connection: { application_name: 'bench-monitor' } });
  const peaks: ConnectionPeaks = { samples: 0, peak: 0, peakByApp: {}, peakPerApp: {}, peakInvocationLeases: 0 };
  let on = true;
  const loop = (async () => {
    while (on) {
      const rows = await sql`select coalesce(nullif(application_name, ''), 'unnamed') as app, count(*)::int as n,
          (select count(*)::int from private.worker_invocations i where i.lease_expires_at > now()) as leases
        from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()
        group by 1`;
      peaks.samples++;
      const total = rows.reduce((n, r) => n + Number(r.n), 0);
      if (total > peaks.peak) {
        peaks.peak = total;
        peaks.peakByApp = Object.fromEntries(rows.map((r) => [String(r.app), Number(r.n)]));
      }
      for (const r of rows) peaks.peakPerApp[String(r.app)] = Math.max(peaks.peakPerApp[String(r.app)] ?? 0, Number(r.n));
      peaks.peakInvocationLeases = Math.max(peaks.peakInvocationLeases, Number(rows[0]?.leases ?? 0));
      await sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      await sql.end({ timeout: 5 });
      return peaks;
    },
  };
}
