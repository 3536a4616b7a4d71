// Per-test-file databases cloned from the migrated template, plus helpers to
// act as a user (RLS) and to seed users and portals.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import { cloneDatabase, dropDatabase, withDatabase } from '../../local/postgres.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { connectPrivateAppPortal } from '../../shared/hubspot/portal-connect.ts';
import { testTokenKeys } from '../../local/test-token-keys.ts';

export interface TestDatabase {
  /**
   * Connection URL (superuser, like the service connection of the functions):
   * through the transaction-mode pooler in the `pooler` project, else direct.
   */
  url: string;
  /** The database's direct URL (bypassing any pooler). */
  directUrl: string;
  /** Whether `url` goes through the pooler. */
  pooled: boolean;
  /** A pool on it. */
  sql: Sql;
  /** Opens another pool (own connections), closed at the end of the file. */
  connect(max?: number): Sql;
}

/** Gives the test file its own freshly migrated database. */
export function useTestDatabase(): TestDatabase {
  const adminUrl = inject('pgAdminUrl');
  const template = inject('pgTemplate');
  const poolerUrl = inject('pgPoolerUrl');
  const name = `queue_test_${process.pid}_${randomUUID().slice(0, 8)}`;
  const pools: Sql[] = [];
  const db = {} as TestDatabase;
  beforeAll(async () => {
    db.directUrl = await cloneDatabase(adminUrl, template, name);
    db.pooled = !!poolerUrl;
    db.url = poolerUrl ? withDatabase(poolerUrl, name) : db.directUrl;
    db.connect = (max = 4) => {
      const sql = connectDatabase(db.url, { max });
      pools.push(sql);
      return sql;
    };
    db.sql = db.connect(8);
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
    await dropDatabase(adminUrl, name);
  });
  return db;
}

/** Inserts an auth.users row and returns its id. */
export async function createUser(sql: Sql, email = `${randomUUID()}@example.test`): Promise<string> {
  const id = randomUUID();
  await sql`insert into auth.users (id, email, aud, role) values (${id}, ${email}, 'authenticated', 'authenticated')`;
  return id;
}

let nextHubSpotPortalId = 1000;

/** Creates a user with one connected portal (its token sealed under the test keys, as the orchestrator stores it). */
export async function createUserWithPortal(sql: Sql, opts: { hubspotPortalId?: number; token?: string } = {}) {
  const userId = await createUser(sql);
  const hubspotPortalId = opts.hubspotPortalId ?? nextHubSpotPortalId++ + Math.floor(Math.random() * 1e6) * 1000;
  const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: userId, hubspotPortalId, name: `Portal ${hubspotPortalId}`, accessToken: opts.token ?? `tok-${randomUUID()}` });
  return { userId, portalId, hubspotPortalId };
}
