// Scenario 1 diagnostic (not a figure): where a job's database time goes in
// mode (a). One worker, track_functions = 'all' on its session only, then
// pg_stat_user_functions per job. Function timing adds overhead, which is why
// this is a separate run and never part of the throughput figures.
import postgres from 'postgres';
import { claimNextJob, completeJob } from '../../shared/sql/jobs.ts';
import { pool } from '../lib/pg.ts';
import type { Checks } from '../lib/result.ts';

export interface FunctionCost {
  function: string;
  callsPerJob: number;
  selfMsPerJob: number;
  totalMsPerJob: number;
}

export interface ProfileResult {
  jobs: number;
  claimMsPerJob: number;
  completeMsPerJob: number;
  functions: FunctionCost[];
  /** Why `functions` is empty: track_functions may be set by a superuser only (or a role granted SET on it). */
  functionsUnavailable?: string;
}

export async function profileSingleClaim(url: string, jobs: number, checks: Checks): Promise<ProfileResult> {
  const sql = postgres(url, { prepare: false, max: 1, onnotice: () => {} });
  const reader = pool(url, 1);
  try {
    let functionsUnavailable: string | undefined;
    await sql`set track_functions = 'all'`.catch((e: unknown) => {
      if ((e as { code?: string }).code !== '42501') throw e;
      functionsUnavailable = `no function timing: ${(e as Error).message} (not a superuser, as hosted Supabase's postgres)`;
    });
    // A fresh clone has no function statistics yet; pg_stat_reset() would need a superuser.
    const stats = async () => new Map((await reader`select n.nspname || '.' || f.funcname as name, f.calls, f.self_time, f.total_time
      from pg_stat_user_functions f join pg_namespace n on n.nspname = f.schemaname`).map((r) => [r.name as string, r]));
    const before = await stats();
    let claimMs = 0;
    let completeMs = 0;
    let done = 0;
    for (; done < jobs; done++) {
      const t0 = performance.now();
      const job = await claimNextJob(sql, 'bench-w-profile');
      const t1 = performance.now();
      if (!job) break;
      if (!(await completeJob(sql, job))) checks.expect('1', 'profile run: completion accepted', false, `job ${job.id}`);
      claimMs += t1 - t0;
      completeMs += performance.now() - t1;
    }
    await sql`select pg_stat_force_next_flush()`;
    await sql`select 1`; // the flush happens at the end of the next transaction
    const since = (r: postgres.Row, k: string) => Number(r[k]) - Number(before.get(r.name as string)?.[k] ?? 0);
    const rows = [...(await stats()).values()].sort((a, b) => since(b, 'self_time') - since(a, 'self_time'));
    return {
      jobs: done,
      claimMsPerJob: claimMs / Math.max(1, done),
      completeMsPerJob: completeMs / Math.max(1, done),
      functions: rows.map((r) => ({
        function: r.name as string,
        callsPerJob: since(r, 'calls') / Math.max(1, done),
        selfMsPerJob: since(r, 'self_time') / Math.max(1, done),
        totalMsPerJob: since(r, 'total_time') / Math.max(1, done),
      })).filter((f) => f.callsPerJob > 0),
      ...(functionsUnavailable ? { functionsUnavailable } : {}),
    };
  } finally {
    await sql.end({ timeout: 5 });
    await reader.end({ timeout: 5 });
  }
}
