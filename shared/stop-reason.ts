// The stop reason: why a worker invocation stopped claiming. Set by the
// invocation's budget (functions/worker/budget.ts), logged by
// finish_worker_invocation (shared/sql/invocations.ts) and shown as
// queue_stats().recent_invocations' stop_reason. A type only, in a leaf, so
// the worker and the SQL layer name the same five. Its one list is the
// progress page's labels (web/stop-reasons.js, plain JavaScript the page loads
// as it is): the type is their keys, so a reason added there is one here, and
// the database's CHECK is held to the same list (tests/stop-reasons.test.ts).
import type { STOP_REASONS } from '../web/stop-reasons.js';

export type StopReason = keyof typeof STOP_REASONS;
