// The stop reason: why a worker invocation stopped claiming. Set by the
// invocation's budget (functions/worker/budget.ts), logged by
// finish_worker_invocation (shared/sql/invocations.ts) and shown as
// queue_stats().recent_invocations' stop_reason. A type only, in a leaf, so
// the worker and the SQL layer name the same five. (The progress page's labels,
// web/status.js STOP_REASONS, are plain JavaScript and list them on their own.)
export type StopReason = 'queue_empty' | 'time_budget' | 'cpu_budget' | 'shutdown' | 'database_error';
