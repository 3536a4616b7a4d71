// Starts one real Postgres per vitest project (embedded, or DATABASE_URL) and
// builds a migrated template database that every test file clones. The
// `pooler` project also starts a transaction-mode PgBouncer in front of it:
// its test files (and the functions they start) connect through the pooler.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createMigratedDatabase, startEmbeddedPostgres, type LocalPostgres } from '../../local/postgres.ts';
import { poolerSkippedNotice, poolerSuitePlan, startPgBouncer, type PgBouncer } from '../../local/pgbouncer.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    /** The pooler's URL (any database name) in the pooler project; '' elsewhere. */
    pgPoolerUrl: string;
  }
}

export const POOLER_PROJECT = 'pooler';

export default async function setup(project: TestProject) {
  const pooled = project.name === POOLER_PROJECT;
  let server: LocalPostgres | undefined;
  let dataRoot: string | undefined;
  let bouncer: PgBouncer | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataRoot = await mkdtemp(path.join(tmpdir(), 'queue-test-pg-'));
    server = await startEmbeddedPostgres({ dataDir: path.join(dataRoot, 'data') });
    adminUrl = server.adminUrl;
  }
  const template = `queue_test_template_${process.pid}_${pooled ? 'pooler' : 'direct'}`;
  // With the test-only functions (schema queue_test) the suites call besides the API.
  await createMigratedDatabase(adminUrl, template, { recreate: true, testHelpers: true });
  if (pooled) bouncer = await startPgBouncer({ upstreamUrl: adminUrl });
  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);
  project.provide('pgPoolerUrl', bouncer ? bouncer.urlFor(adminUrl) : '');
  return async () => {
    await bouncer?.stop();
    await server?.stop();
    if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
    if (!pooled) {
      const plan = poolerSuitePlan();
      if (!plan.run) console.warn(`\n${poolerSkippedNotice(plan.reason)}\n`);
    }
  };
}
