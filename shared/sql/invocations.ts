// Worker invocations (supabase/schemas/0400-0403): invocation leases, capped
// by private.worker_settings, and the log of how each invocation ended.
import type { Sql } from '../db.ts';
import type { StopReason } from '../stop-reason.ts';

/** Takes an invocation lease for `invocationLeaseSeconds`; false when the cap on concurrent invocations is reached. */
export async function beginInvocation(sql: Sql, invocationId: string, source: string, invocationLeaseSeconds: number): Promise<boolean> {
  const [row] = await sql`select public.begin_worker_invocation(${invocationId}, ${source}, ${invocationLeaseSeconds}) as ok`;
  return row?.ok === true;
}

/** How an invocation ended, as operators see it in queue_stats().recent_invocations. */
export interface InvocationRecord {
  stopReason: StopReason;
  shutdownReason?: string | null;
  claimed: number;
  completed: number;
  released: number;
  failed: number;
  cpuMs?: number | null;
}

/** Gives the invocation lease back and logs how the invocation ended; true when work is claimable right now. */
export async function finishInvocation(sql: Sql, invocationId: string, record: InvocationRecord): Promise<boolean> {
  const [row] = await sql`select public.finish_worker_invocation(${invocationId}, ${sql.json(record as never)}) as more`;
  return row?.more === true;
}

/** Invocation leases held now and the cap. */
export async function invocationLeases(sql: Sql): Promise<{ active: number; cap: number }> {
  const [row] = await sql`select * from public.worker_invocation_leases()`;
  return { active: Number(row?.active ?? 0), cap: Number(row?.cap ?? 0) };
}
