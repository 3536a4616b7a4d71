// A private embedded Postgres for chaos runs and restart tests: its own data
// directory and port, so it can be stopped and started again mid-run without
// touching the server shared by the rest of the test suite.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createMigratedDatabase, freePort, startEmbeddedPostgres, type LocalPostgres } from '../../local/postgres.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ChaosPostgres {
  /** Superuser URL of the `postgres` database. */
  adminUrl: string;
  /** URL of the migrated queue database. */
  dbUrl: string;
  port: number;
  dataDir: string;
  /** The running server's process id (changes on restart). */
  pid(): number | undefined;
  /** Stops the server (fast shutdown: sessions are terminated, open transactions roll back). */
  stopServer(): Promise<void>;
  /** Starts it again on the same data directory and port. */
  startServer(): Promise<void>;
  /** stopServer, wait `downMs`, startServer. */
  restart(downMs?: number): Promise<void>;
  /** Stops the server and deletes its data directory. */
  destroy(): Promise<void>;
}

export interface ChaosPostgresOptions {
  database?: string;
  maxConnections?: number;
  log?: (line: string) => void;
}

/** Initialises, starts and migrates a throwaway Postgres on 127.0.0.1. */
export async function startChaosPostgres(opts: ChaosPostgresOptions = {}): Promise<ChaosPostgres> {
  const root = await mkdtemp(path.join(tmpdir(), 'queue-chaos-pg-'));
  const dataDir = path.join(root, 'data');
  const port = await freePort();
  const start = () => startEmbeddedPostgres({ dataDir, port, maxConnections: opts.maxConnections ?? 200, log: opts.log });
  let server: LocalPostgres | undefined = await start();
  const adminUrl = server.adminUrl;
  const database = opts.database ?? 'chaos';
  const dbUrl = await createMigratedDatabase(adminUrl, database, { recreate: true });

  const startServer = async () => {
    if (server) return;
    // The port may linger for a moment after the old postmaster exits.
    for (let attempt = 1; ; attempt++) {
      try {
        server = await start();
        return;
      } catch (e) {
        if (attempt >= 20) throw e instanceof Error ? e : new Error(`Postgres did not restart: ${String(e)}`);
        await sleep(250);
      }
    }
  };
  const stopServer = async () => {
    const s = server;
    server = undefined;
    await s?.stop();
  };
  return {
    adminUrl,
    dbUrl,
    port,
    dataDir,
    pid: () => server?.pid,
    stopServer,
    startServer,
    async restart(downMs = 1000) {
      await stopServer();
      await sleep(downMs);
      await startServer();
    },
    async destroy() {
      await stopServer().catch(() => {});
      await rm(root, { recursive: true, force: true });
    },
  };
}
