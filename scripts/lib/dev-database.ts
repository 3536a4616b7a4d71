// The local development database used by `npm start` and `npm run db:*`:
// an embedded Postgres whose data lives in the git-ignored .local/ folder
// (or the server named by DATABASE_URL), with a migrated `queue` database.
import path from 'node:path';
import { createMigratedDatabase, PROJECT_ROOT, startEmbeddedPostgres } from '../../local/postgres.ts';

export const DEV_DATA_DIR = path.join(PROJECT_ROOT, '.local/postgres/data');
export const DEV_DATABASE = 'queue';

export interface DevDatabase {
  adminUrl: string;
  /** URL of the migrated `queue` database. */
  url: string;
  stop(): Promise<void>;
}

/** Starts (or reuses the data of) the local Postgres and migrates `queue`; `fresh` recreates it. */
export async function startDevDatabase(opts: { fresh?: boolean; log?: (l: string) => void } = {}): Promise<DevDatabase> {
  let adminUrl = process.env.DATABASE_URL;
  let stop = async () => {};
  if (!adminUrl) {
    // A crashed earlier run can leave a stale lock file; Postgres refuses to start only if that process still lives.
    const pg = await startEmbeddedPostgres({ dataDir: DEV_DATA_DIR, log: opts.log }).catch(async (e) => {
      throw new Error(`Could not start the local Postgres in ${DEV_DATA_DIR} (is another npm start running?): ${e instanceof Error ? e.message : String(e)}`);
    });
    adminUrl = pg.adminUrl;
    stop = () => pg.stop();
  }
  const url = await createMigratedDatabase(adminUrl, DEV_DATABASE, { recreate: opts.fresh });
  return { adminUrl, url, stop };
}
