// Scenario 1 (a, b, c) and the loop scenario 2 reuses: our queue driven as the
// worker drives it (shared/queue.ts over postgres.js, prepare: false), with
// no-op jobs, one connection per worker.
import type postgres from 'postgres';
import { claimJobs, claimNextJob, completeJob, completeJobs, type ClaimedJob } from '../../shared/sql/jobs.ts';
import { completeJobAndClaimNext } from '../../scripts/lib/queue-test-helpers.ts';
import { cpuMeter, pool } from '../lib/pg.ts';
import { ExactlyOnce, queueRunResult, type Checks, type QueueRunResult } from '../lib/result.ts';

export type OursMode =
  | { kind: 'single' } // claim_next_job → complete_job: two round trips per job
  | { kind: 'chained' } // complete_job_and_claim_next: one round trip per job
  | { kind: 'batch'; size: number }; // claim_jobs(n) → complete_jobs(n)

export function oursLabel(mode: OursMode): string {
  return mode.kind === 'single' ? 'ours (a) claim_next_job + complete_job'
    : mode.kind === 'chained' ? 'ours (b) complete_job_and_claim_next'
    : `ours (c) claim_jobs + complete_jobs, batch ${mode.size}`;
}

export interface OursRunOptions {
  url: string;
  workers: number;
  mode: OursMode;
  expectedJobs: number;
  /** Runs the jobs belong to (default: one per job). */
  expectedRuns?: number;
  pgPid: number | null;
  recordLatency?: boolean;
  checks: Checks;
  scenario: string;
  label: string;
}

/** Drains the queue with `workers` connections; checks exactly-once and the final database state. */
export async function runOurs(o: OursRunOptions): Promise<QueueRunResult> {
  const conns = Array.from({ length: o.workers }, () => pool(o.url, 1));
  try {
    await Promise.all(conns.map((c) => c`select 1`)); // connect before the clock starts
    const once = new ExactlyOnce();
    const latencies: number[] = [];
    let notHeld = 0;
    const meter = await cpuMeter(o.pgPid);
    const t0 = performance.now();
    await Promise.all(conns.map((sql, i) => workerLoop(sql, `bench-w${i}`, o.mode, once, latencies, o.recordLatency === true, () => notHeld++)));
    // Like the other queues: from the first job in hand to the last completion.
    const elapsed = performance.now() - (once.firstAt ?? t0);
    const cpu = await meter();
    once.check(o.checks, o.scenario, o.label, o.expectedJobs);
    o.checks.equal(o.scenario, `${o.label}: every completion was accepted (still held)`, notHeld, 0);
    await verifyDrained(conns[0]!, o.checks, o.scenario, o.label, o.expectedJobs, o.expectedRuns ?? o.expectedJobs);
    return queueRunResult(once.total, elapsed, cpu, o.recordLatency ? latencies : undefined);
  } finally {
    await Promise.all(conns.map((c) => c.end({ timeout: 5 })));
  }
}

async function workerLoop(
  sql: postgres.Sql, workerId: string, mode: OursMode, once: ExactlyOnce, latencies: number[], recordLatency: boolean, lost: () => void,
): Promise<void> {
  if (mode.kind === 'single') {
    for (;;) {
      const t = performance.now();
      const job = await claimNextJob(sql, workerId);
      if (!job) return;
      once.record(job.id);
      if (!(await completeJob(sql, job))) lost();
      if (recordLatency) latencies.push(performance.now() - t);
    }
  }
  if (mode.kind === 'chained') {
    let t = performance.now();
    let job: ClaimedJob | null = await claimNextJob(sql, workerId);
    while (job) {
      once.record(job.id);
      const r = await completeJobAndClaimNext(sql, job, workerId);
      if (!r.completed) lost();
      const now = performance.now();
      if (recordLatency) latencies.push(now - t);
      t = now;
      job = r.next;
    }
    return;
  }
  if (mode.kind === 'batch') {
    for (;;) {
      const jobs = await claimJobs(sql, workerId, mode.size);
      if (jobs.length === 0) return;
      for (const j of jobs) once.record(j.id);
      const n = await completeJobs(sql, jobs);
      for (let i = n; i < jobs.length; i++) lost();
    }
  }
}

/** Nothing left pending or running, each bench job completed on its first attempt, every run settled once. */
async function verifyDrained(sql: postgres.Sql, checks: Checks, scenario: string, label: string, expected: number, runs: number): Promise<void> {
  const [row] = await sql`select
      (select count(*)::int from public.jobs where status in ('pending', 'running')) as active,
      (select count(*)::int from public.jobs where worker_id like 'bench-w%' and status = 'completed') as completed,
      (select count(*)::int from public.jobs where worker_id like 'bench-w%' and attempts <> 1) as retried,
      (select count(*)::int from public.runs where finished_at is null) as unsettled,
      (select count(*)::int from public.runs r where r.status <> 'completed' or r.jobs_completed <> r.jobs_total
          or r.jobs_total <> (select count(*) from public.jobs j where j.run_id = r.id)) as miscounted,
      (select count(*)::int from public.notifications) as notifications`;
  checks.equal(scenario, `${label}: no job left pending/running`, row?.active, 0);
  checks.equal(scenario, `${label}: jobs completed in the database`, row?.completed, expected);
  checks.equal(scenario, `${label}: no job claimed twice (attempts = 1)`, row?.retried, 0);
  checks.equal(scenario, `${label}: every run settled`, row?.unsettled, 0);
  checks.equal(scenario, `${label}: every run completed with its counters equal to its jobs`, row?.miscounted, 0);
  checks.equal(scenario, `${label}: one notification per run`, row?.notifications, runs);
}
