// Errors of a dependency's own that a test process or a chaos worker sees
// unhandled, known upstream and not a failure of the code under test
// (vitest.config.ts, scripts/chaos/worker-main.ts).

// postgres.js 3.4.9 drops the promise of the array-type query it opens each
// connection with: a connection cut off during it (the restart and chaos suites
// cut many) rejects it unhandled (porsager/postgres#1192; docs/reliability.md).
const TYPE_FETCH = /from pg_catalog\.pg_type a\s+left join pg_catalog\.pg_type b on b\.oid = a\.typelem/;

/** Whether an unhandled error is postgres.js's own array-type query failing. */
export function isPostgresTypeFetchFailure(e: unknown): boolean {
  const query = (e as { query?: unknown } | null)?.query;
  return typeof query === 'string' && TYPE_FETCH.test(query);
}
