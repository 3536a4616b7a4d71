// Scenario 1 diagnostic (not a figure's run): Postgres time per job by SQL
// statement, and plans per call, from pg_stat_statements. One worker drains
// jobs in mode (a) (claim_next_job → complete_job as the worker calls them)
// with tracking on for its session only: every statement, nested ones inside
// the SQL functions included, and planning. With one worker and no waits,
// statement time is the backend's CPU time. Tracking adds its own overhead,
// which is why this is a separate run.
import postgres from 'postgres';
import { claimJobs, claimNextJob, completeJob, completeJobs } from '../../shared/sql/jobs.ts';
import { pool } from '../lib/pg.ts';
import type { Checks } from '../lib/result.ts';

export interface StatementCost {
  /** The statement text, normalised by pg_stat_statements, whitespace collapsed, cut to 160 characters. */
  query: string;
  toplevel: boolean;
  callsPerJob: number;
  plansPerCall: number;
  execUsPerJob: number;
  planUsPerJob: number;
}

export interface StatementsResult {
  jobs: number;
  /** Time of the two top-level calls per job (claim and complete), execution + planning. */
  totalUsPerJob: number;
  /** Plans ÷ calls over the statements inside the functions (0 when all run generic plans). */
  nestedPlansPerCall: number;
  /** Plans ÷ calls of the top-level calls (1: unnamed statements are planned each time; no prepared statements). */
  toplevelPlansPerCall: number;
  statements: StatementCost[];
}

export async function statementCosts(url: string, jobs: number, checks: Checks, scenario: string, label: string): Promise<StatementsResult> {
  const admin = pool(url, 1);
  await admin`create extension if not exists pg_stat_statements`;
  const sql = postgres(url, {
    prepare: false, max: 1, onnotice: () => {},
    connection: { 'pg_stat_statements.track': 'all', 'pg_stat_statements.track_planning': 'on' },
  });
  try {
    await sql`select 1`;
    await admin`select pg_stat_statements_reset()`;
    let done = 0;
    for (; done < jobs; done++) {
      const job = await claimNextJob(sql, 'bench-w-statements');
      if (!job) break;
      if (!(await completeJob(sql, job))) checks.expect(scenario, `${label}: completion accepted`, false, `job ${job.id}`);
    }
    checks.equal(scenario, `${label}: jobs drained`, done, jobs);
    const rows = await admin`
      select s.toplevel, s.calls, s.plans, s.total_exec_time, s.total_plan_time,
             left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) as query
        from pg_stat_statements s
       where s.dbid = (select oid from pg_database where datname = current_database())
         and s.userid = (select oid from pg_roles where rolname = current_user)
         and s.calls > 0
       order by s.total_exec_time + s.total_plan_time desc`;
    const n = Math.max(1, done);
    const ours = rows.filter((r) => !/pg_stat_statements|pg_catalog\.|pg_type/.test(r.query as string));
    const statements = ours.map((r) => ({
      query: r.query as string,
      toplevel: r.toplevel as boolean,
      callsPerJob: Number(r.calls) / n,
      plansPerCall: Number(r.plans) / Number(r.calls),
      execUsPerJob: (Number(r.total_exec_time) * 1000) / n,
      planUsPerJob: (Number(r.total_plan_time) * 1000) / n,
    }));
    const sum = (xs: StatementCost[], f: (x: StatementCost) => number) => xs.reduce((a, x) => a + f(x), 0);
    const top = statements.filter((x) => x.toplevel && /claim_|complete_job/.test(x.query));
    const nested = ours.filter((r) => !r.toplevel);
    const toplevel = ours.filter((r) => r.toplevel && /claim_|complete_job/.test(r.query as string));
    const ratio = (rs: typeof ours) => rs.reduce((a, r) => a + Number(r.plans), 0) / Math.max(1, rs.reduce((a, r) => a + Number(r.calls), 0));
    return {
      jobs: done,
      totalUsPerJob: sum(top, (x) => x.execUsPerJob + x.planUsPerJob),
      nestedPlansPerCall: ratio(nested),
      toplevelPlansPerCall: ratio(toplevel),
      statements,
    };
  } finally {
    await sql.end({ timeout: 5 });
    await admin.end({ timeout: 5 });
  }
}

/** How the holder's job row is reached by the completion statements' generic plans. */
export interface HolderPlans {
  /** Index (or "seq scan") the jobs UPDATE inside complete_job reads, null when not seen. */
  completeJob: string | null;
  /** Same for complete_jobs. */
  completeJobs: string | null;
}

/**
 * Scenario 1 diagnostic: the plans of the UPDATEs that finish a held job, from
 * auto_explain (nested statements, reported as notices to this session only).
 * They must reach the row by jobs_pkey; a partial index of running jobs read
 * whole (filtered by id) costs a completion O(running jobs). Null when
 * auto_explain cannot be loaded (a DATABASE_URL server without it, or not as superuser).
 */
export async function holderPlans(url: string): Promise<HolderPlans | null> {
  const notices: string[] = [];
  const sql = postgres(url, { prepare: false, max: 1, onnotice: (n) => notices.push(String(n.message)) });
  try {
    try {
      await sql`load 'auto_explain'`;
    } catch {
      return null;
    }
    await sql`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
      set_config('auto_explain.log_level', 'notice', false)`;
    const one = await claimNextJob(sql, 'bench-w-plans');
    if (one) await completeJob(sql, one);
    const some = await claimJobs(sql, 'bench-w-plans', 3);
    if (some.length) await completeJobs(sql, some);
    const scanOf = (marker: RegExp): string | null => {
      const plan = notices.find((n) => marker.test(n));
      const m = plan?.slice(plan.indexOf('CTE done')).match(/(?:Index|Index Only) Scan using (\w+) on jobs j|(Seq Scan) on jobs j/);
      return m ? (m[1] ?? 'seq scan') : null;
    };
    return {
      completeJob: scanOf(/set status = 'completed'[\s\S]*where j\.id = p_job_id/),
      completeJobs: scanOf(/set status = 'completed'[\s\S]*from unnest\(p_job_ids, p_fencing_tokens\)/),
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
