// Starts one real Postgres for the whole run (embedded, or DATABASE_URL) and
// builds a migrated template database that every test file clones.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createMigratedDatabase, startEmbeddedPostgres, type LocalPostgres } from '../../scripts/lib/local-postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
  }
}

let server: LocalPostgres | undefined;
let dataRoot: string | undefined;

export default async function setup(project: TestProject) {
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataRoot = await mkdtemp(path.join(tmpdir(), 'queue-test-pg-'));
    server = await startEmbeddedPostgres({ dataDir: path.join(dataRoot, 'data') });
    adminUrl = server.adminUrl;
  }
  const template = `queue_test_template_${process.pid}`;
  await createMigratedDatabase(adminUrl, template, { recreate: true });
  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);
  return async () => {
    await server?.stop();
    if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
  };
}
