// The worker's maintenance at an invocation's start, in one place: the one
// call invocation.ts makes before its lanes claim. Every maintenance task of
// the queue, what runs it, where and how often, is the table in
// docs/operating.md#maintenance; the tasks that run elsewhere (inside
// claim_jobs, at settlement, on pg_cron) are SQL functions listed there.
//
// At an invocation's start, in this order, each doing only what it must:
// 1. settle_stuck_runs(when_due): every invocation asks; the SQL runs the
//    stuck-run safety net at most every private.settle_stuck_runs_state.every
//    (30 s) between all of them, and answers at once otherwise.
// 2. heal_cron_jobs: touches the schema's pg_cron jobs once when none ran
//    after a deploy (decision 0069); asked at most every CRON_HEAL_EVERY_MS
//    per isolate, as the orchestrator asks it.
// 3. Token-key rotation: one bounded batch of credentials still sealed under
//    another key or in legacy plaintext re-sealed under the current key
//    (shared/hubspot/token-rotation.ts). A batch per invocation while some are left;
//    once a batch finds none, the isolate asks again only after
//    KEY_ROTATION_RECHECK_MS, or at once when its keys change. Rows can come
//    back only from an isolate still on the previous keys during a key
//    change, or unreadable rows offered again after an hour.
// Each is logged when it does something; a failure is logged, never fatal
// (the next invocation asks again).
import type { Sql } from '../../shared/db.ts';
import { healCronJobs } from '../../shared/sql/ops.ts';
import { settleStuckRuns } from '../../shared/sql/runs.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import { rotateCredentialsBatch } from '../../shared/hubspot/token-rotation.ts';
import type { WorkerRuntime } from './runtime.ts';

/** heal_cron_jobs is asked at most this often per isolate (the orchestrator's cadence too). */
export const CRON_HEAL_EVERY_MS = 60_000;
/** After a rotation batch found nothing left to re-seal, the isolate asks again after this long (or when its keys change). */
export const KEY_ROTATION_RECHECK_MS = 5 * 60_000;

/** What an isolate remembers between its invocations' starts. */
export interface MaintenanceMemory {
  /** When heal_cron_jobs was last asked (-Infinity: never). */
  cronHealAskedAt: number;
  /** The keys whose last rotation batch found nothing to re-seal, and when. */
  rotationDone: { keys: TokenKeyring; at: number } | null;
}

/** Which of the gated tasks are due at this start: pure, from the isolate's memory. */
export function dueAtStart(m: MaintenanceMemory, keys: TokenKeyring | null | undefined, now: number): { cronHeal: boolean; keyRotation: boolean } {
  const cronHeal = now - m.cronHealAskedAt >= CRON_HEAL_EVERY_MS;
  const done = m.rotationDone;
  const keyRotation = !!keys && (done === null || done.keys !== keys || now - done.at >= KEY_ROTATION_RECHECK_MS);
  return { cronHeal, keyRotation };
}

const memoryByPool = new WeakMap<Sql, MaintenanceMemory>();

function memoryOf(sql: Sql): MaintenanceMemory {
  let m = memoryByPool.get(sql);
  if (!m) {
    m = { cronHealAskedAt: -Infinity, rotationDone: null };
    memoryByPool.set(sql, m);
  }
  return m;
}

/** Runs what is due at an invocation's start; returns the stuck runs it settled. */
export async function runStartMaintenance(rt: WorkerRuntime): Promise<{ stuckRunsSettled: number }> {
  const stuckRunsSettled = await settleStuckRuns(rt.sql, { whenDue: true });
  const memory = memoryOf(rt.sql); // one pool per isolate
  const due = dueAtStart(memory, rt.tokenKeys, Date.now());
  if (due.cronHeal) {
    memory.cronHealAskedAt = Date.now();
    await healStalledCronJobs(rt);
  }
  if (due.keyRotation && rt.tokenKeys) {
    const left = await rotateSealedTokens(rt, rt.tokenKeys);
    memory.rotationDone = left ? null : { keys: rt.tokenKeys, at: Date.now() };
  }
  return { stuckRunsSettled };
}

/** heal_cron_jobs, logging what it touched. */
async function healStalledCronJobs(rt: Pick<WorkerRuntime, 'sql' | 'log'>): Promise<void> {
  try {
    const healed = await healCronJobs(rt.sql);
    if (!healed) return;
    rt.log.warn(healed.error ? 'cron_jobs_touch_failed' : 'cron_jobs_touched',
      { jobs: healed.touched, scheduledAt: healed.scheduledAt, noRunForSeconds: healed.noRunForSeconds, error: healed.error });
  } catch (e) {
    rt.log.warn('cron_heal_error', { error: e instanceof Error ? e.message : String(e) });
  }
}

/** One bounded rotation batch; true when rows may be left (the batch saw some, or failed). */
async function rotateSealedTokens(rt: Pick<WorkerRuntime, 'sql' | 'log'>, keys: TokenKeyring): Promise<boolean> {
  try {
    const batch = await rotateCredentialsBatch(rt.sql, keys);
    if (batch.seen === 0) return false;
    rt.log.info('token_rotation_batch', { ...batch, unreadablePortals: batch.unreadablePortals.slice(0, 20), key_id: keys.currentKeyId });
    return true;
  } catch (e) {
    rt.log.warn('token_rotation_error', { error: e instanceof Error ? e.message : String(e) });
    return true;
  }
}
