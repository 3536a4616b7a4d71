// Operations and abuse limits (supabase/schemas/0410, 0420, 0465): the queue's
// statistics for operators, the per-user write limit, the auth.users
// facts the orchestrator checks (operator flag, the user still exists), and
// the cron jobs' self-heal both functions call.
import type { Sql } from '../db.ts';

/** What queue_stats() answers (docs/sql-api.md). */
export async function queueStats(sql: Sql): Promise<Record<string, unknown>> {
  const [row] = await sql`select public.queue_stats() as stats`;
  return row!.stats as Record<string, unknown>;
}

/** Counts one write for the user: 0 = go; otherwise ms until the user may write again (nothing counted). */
export async function takeUserWrite(sql: Sql, userId: string): Promise<number> {
  const [row] = await sql`select public.take_user_write(${userId}) as wait_ms`;
  return Number(row?.wait_ms ?? 0);
}

/** Operators are users whose app_metadata (settable only with the service role) says so. */
export async function isQueueOperator(sql: Sql, userId: string): Promise<boolean> {
  const [row] = await sql`select coalesce((u.raw_app_meta_data -> 'queue_operator') = 'true'::jsonb, false) as operator
    from auth.users u where u.id = ${userId}`;
  return row?.operator === true;
}

/** False when the user was deleted (their token may outlive them). */
export async function userExists(sql: Sql, userId: string): Promise<boolean> {
  const rows = await sql`select 1 from auth.users where id = ${userId}`;
  return rows.length > 0;
}

/** What heal_cron_jobs() did: the schema's cron jobs touched because none ran since they were scheduled (decision 0069). */
export interface CronHeal {
  /** Names of the jobs touched (cron.alter_job … active := true); empty when the touch failed. */
  touched: string[];
  scheduledAt: string;
  noRunForSeconds: number;
  /** Why the touch failed (the jobs are left as they were), or null. */
  error: string | null;
}

/** Touches the schema's cron jobs once when none ran since the cron migration scheduled them; null (one cheap read) otherwise. */
export async function healCronJobs(sql: Sql): Promise<CronHeal | null> {
  const [row] = await sql`select public.heal_cron_jobs() as healed`;
  const h = row?.healed as { touched: string[]; scheduled_at: string; no_run_for_seconds: number; error: string | null } | null | undefined;
  return h ? { touched: h.touched, scheduledAt: h.scheduled_at, noRunForSeconds: Number(h.no_run_for_seconds), error: h.error } : null;
}
