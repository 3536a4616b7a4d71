// Operations and abuse limits (supabase/schemas/0410, 0420): the queue's
// statistics for operators, the per-user write limit, and the auth.users
// facts the orchestrator checks (operator flag, the user still exists).
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
