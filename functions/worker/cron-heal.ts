// The cron jobs' self-heal as one of the worker's maintenance steps: at the
// start of every invocation, public.heal_cron_jobs() touches the schema's
// pg_cron jobs once when none has run since the cron migration scheduled
// them (pg_cron 1.6.4 can miss that change: decision 0069). When nothing is
// due it is one cheap read; a touch, or a touch that failed, is logged.
import { healCronJobs } from '../../shared/sql/ops.ts';
import type { Logger } from '../../shared/log.ts';
import type { Sql } from '../../shared/db.ts';

/** Runs the self-heal and logs what it touched; a failure is logged, never fatal (the next invocation asks again). */
export async function healStalledCronJobs(rt: { sql: Sql; log: Logger }): Promise<void> {
  try {
    const healed = await healCronJobs(rt.sql);
    if (!healed) return;
    rt.log.warn(healed.error ? 'cron_jobs_touch_failed' : 'cron_jobs_touched',
      { jobs: healed.touched, scheduledAt: healed.scheduledAt, noRunForSeconds: healed.noRunForSeconds, error: healed.error });
  } catch (e) {
    rt.log.warn('cron_heal_error', { error: e instanceof Error ? e.message : String(e) });
  }
}
