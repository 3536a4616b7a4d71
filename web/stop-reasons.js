// The stop reasons: why a worker invocation stopped taking work, each with the
// words the Operator view shows for it. The one list of them: the worker's
// type is this object's keys (shared/stop-reason.ts imports it, type only),
// the database's CHECK on stop_reason (supabase/schemas/0210, 0211) is held to
// the same list by tests/stop-reasons.test.ts. Plain JavaScript with no
// imports, so the page loads it as it is and TypeScript reads its keys.

/** The worker's stop reasons (queue_stats stop_reason) and their words for operators. */
export const STOP_REASONS = Object.freeze({
  queue_empty: 'queue empty',
  time_budget: 'time budget used',
  cpu_budget: 'CPU budget used',
  shutdown: 'runtime shut down',
  database_error: 'database error',
});
