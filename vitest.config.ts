import { defineConfig } from 'vitest/config';
import { poolerSkippedNotice, poolerSuitePlan } from './local/pgbouncer.ts';
import { isPostgresTypeFetchFailure } from './scripts/lib/known-upstream-errors.ts';

// The SQL suite and the end-to-end tests run a second time through a real
// transaction-mode pooler (PgBouncer) when it is installed; see tests/support/global-setup.ts.
const POOLER_SUITE = [
  'tests/queue-*.test.ts',
  'tests/publish-*.test.ts',
  'tests/sql-input-validation.test.ts',
  'tests/rls.test.ts',
  'tests/sync-schedules.test.ts',
  'tests/storage-bucket.test.ts',
  'tests/orchestrator-handler.test.ts',
  'tests/orchestrator-publish.test.ts',
  'tests/orchestrator-publish-csv.test.ts',
  'tests/e2e-deno.test.ts',
  'tests/auth-deno.test.ts',
  'tests/oauth-tokens.test.ts',
  'tests/oauth-install.test.ts',
  'tests/oauth-refresh-safety.test.ts',
];

const pooler = poolerSuitePlan();
if (!pooler.run) console.warn(`\n${poolerSkippedNotice(pooler.reason)}\n`);

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // A dependency's own unhandled rejection, known upstream, is not a failure (scripts/lib/known-upstream-errors.ts).
    onUnhandledError: (e) => !isPostgresTypeFetchFailure(e),
    projects: [
      { extends: true, test: { name: 'direct', include: ['tests/**/*.test.ts'], globalSetup: ['tests/support/global-setup.ts'] } },
      ...(pooler.run
        ? [{ extends: true as const, test: { name: 'pooler', include: POOLER_SUITE, globalSetup: ['tests/support/global-setup.ts'], env: { PGBOUNCER_BIN: pooler.bin } } }]
        : []),
    ],
  },
});
