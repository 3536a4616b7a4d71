// GET /orchestrator/stats: the queue's statistics, for operators only.
import type { VerifiedUser } from '../../shared/auth.ts';
import { HttpError, json } from '../../shared/http.ts';
import { isQueueOperator, queueStats as readQueueStats } from '../../shared/sql/ops.ts';
import type { OrchestratorDeps } from './deps.ts';

export async function queueStats(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  // Operators are users whose app_metadata (settable only with the service role) says so; checked in the database, not the token.
  if (!(await isQueueOperator(deps.sql, user.userId))) throw new HttpError(403, 'NOT_AN_OPERATOR', 'Queue statistics are for operators (app_metadata.queue_operator = true).');
  return json(200, { stats: await readQueueStats(deps.sql) });
}
