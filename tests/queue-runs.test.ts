// Run settlement (every outcome, exactly one notification), stop_run,
// settle_stuck_runs and the batch calls.
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { claimJobs, claimNextJob, completeJob, completeJobs, failJob, heartbeatJob, releaseJob } from '../shared/sql/jobs.ts';
import { settleStuckRuns, stopRun } from '../shared/sql/runs.ts';
import { useTestDatabase } from './support/database.ts';
import { completeJobAndClaimNext } from '../scripts/lib/queue-test-helpers.ts';
import { drainQueue, expireLease, jobRow, jobsOfRun, notificationsOf, runRow, seedRun } from './support/queue-fixtures.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const db = useTestDatabase();

/** These tests hold more than four fetch jobs of one portal at once: lift the portal cap (tested in queue-fairness). */
async function liftFetchCap() {
  await db.sql`update private.job_kinds set portal_cap_max = null where kind = 'fetch'`;
}
beforeAll(liftFetchCap);

beforeEach(async () => {
  await drainQueue(db.sql);
});

/** Claims every job of the queue (one worker per job). */
async function claimAll(n: number) {
  const jobs = await claimJobs(db.sql, 'batch-worker', n);
  expect(jobs).toHaveLength(n);
  return jobs;
}

describe('run settlement', () => {
  it('a run goes pending -> running when a claimed job first reports work (heartbeat)', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'pending', started_at: null, jobs_total: 2 });
    const job = await claimNextJob(db.sql, 'w');
    // The claim itself writes only the job row.
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'pending', started_at: null });
    expect(await heartbeatJob(db.sql, job!)).toBe(true);
    const run = await runRow(db.sql, runId);
    expect(run).toMatchObject({ status: 'running', finished_at: null });
    expect(run.started_at).toBeInstanceOf(Date);
  });

  it('all jobs completed -> completed, one run_completed notification to the owner', async () => {
    const { runId, userId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'hubdb_rows'] });
    const jobs = await claimAll(3);
    for (const [i, j] of jobs.entries()) {
      expect(await completeJob(db.sql, j, { items: i })).toBe(true);
      const expected = i < 2 ? 'running' : 'completed';
      expect((await runRow(db.sql, runId)).status).toBe(expected);
    }
    expect(await jobRow(db.sql, jobs[1]!.id)).toMatchObject({ status: 'completed', result: { items: 1 }, lease_expires_at: null });
    const run = await runRow(db.sql, runId);
    expect(run).toMatchObject({ status: 'completed', jobs_total: 3, jobs_completed: 3, jobs_failed: 0, jobs_stopped: 0 });
    expect(run.finished_at).toBeInstanceOf(Date);
    const notes = await notificationsOf(db.sql, runId);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ kind: 'run_completed', user_id: userId, read_at: null });
    expect(notes[0]!.message).toBe('Fetch run completed: all 3 jobs succeeded.');
  });

  it('some jobs failed -> partially_failed, with the first error in the message', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'hubdb_rows'] });
    const [a, b, c] = await claimAll(3);
    expect(await completeJob(db.sql, a!)).toBe(true);
    expect(await failJob(db.sql, b!, 'boom: 403 forbidden', false)).toBe('failed');
    expect(await completeJob(db.sql, c!)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 2, jobs_failed: 1 });
    const notes = await notificationsOf(db.sql, runId);
    expect(notes.map((n) => n.kind)).toEqual(['run_partially_failed']);
    expect(notes[0]!.message).toBe('Fetch run partially failed: 2 of 3 jobs completed, 1 failed. First error: boom: 403 forbidden');
  });

  it('all jobs failed -> failed', async () => {
    const { runId } = await seedRun(db.sql, { kind: 'export', types: ['blog_tags', 'url_redirects'] });
    const [a, b] = await claimAll(2);
    expect(await failJob(db.sql, a!, 'first', false)).toBe('failed');
    expect(await failJob(db.sql, b!, 'second', false)).toBe('failed');
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'failed', jobs_failed: 2, jobs_completed: 0 });
    const notes = await notificationsOf(db.sql, runId);
    expect(notes.map((n) => n.kind)).toEqual(['run_failed']);
    expect(notes[0]!.message).toBe('Export run failed: all 2 jobs failed. First error: first');
  });

  it('stop_run stops pending and running jobs at once; the running holder learns it on its next call', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'hubdb_rows'] });
    const [done, held] = await claimJobs(db.sql, 'w', 2);
    expect(await completeJob(db.sql, done!)).toBe(true);
    expect(await stopRun(db.sql, runId)).toBe(true);

    const jobs = await jobsOfRun(db.sql, runId);
    expect(jobs.map((j) => j.status).sort()).toEqual(['completed', 'stopped', 'stopped']);
    for (const j of jobs) {
      expect(j.finished_at).toBeInstanceOf(Date);
      expect(j.lease_expires_at).toBeNull();
    }
    const run = await runRow(db.sql, runId);
    expect(run).toMatchObject({ status: 'stopped', jobs_completed: 1, jobs_stopped: 2, jobs_total: 3 });
    expect(run.finished_at).toBeInstanceOf(Date);
    const notes = await notificationsOf(db.sql, runId);
    expect(notes.map((n) => [n.kind, n.message])).toEqual([['run_stopped', 'Fetch run stopped: 1 of 3 jobs had completed, 2 stopped.']]);

    const heldBefore = await jobRow(db.sql, held!.id);
    expect(await heartbeatJob(db.sql, held!, { done: 5 })).toBe(false);
    expect(await completeJob(db.sql, held!)).toBe(false);
    expect(await failJob(db.sql, held!, 'x', true)).toBe('lost');
    expect(await releaseJob(db.sql, held!)).toBeNull();
    expect(await jobRow(db.sql, held!.id)).toEqual(heldBefore);
    expect(await claimNextJob(db.sql, 'other')).toBeNull();

    // Stopping again (or settling again) changes nothing and notifies no more.
    expect(await stopRun(db.sql, runId)).toBe(false);
    expect(await settleStuckRuns(db.sql)).toBe(0);
    const [again] = await db.sql`select private.settle_run(${runId}) as settled`;
    expect(again!.settled).toBe(false);
    expect(await runRow(db.sql, runId)).toEqual(run);
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
  });

  it('stop_run of an unknown run returns false', async () => {
    expect(await stopRun(db.sql, '00000000-0000-0000-0000-000000000000')).toBe(false);
  });

  it('completing the last jobs concurrently, with reconcile racing, settles once', async () => {
    const { runId } = await seedRun(db.sql, { types: CONTENT_TYPES });
    const jobs = await claimAll(8);
    const conns = Array.from({ length: 12 }, () => db.connect(1));
    await Promise.all([
      ...jobs.map((j, i) => completeJob(conns[i]!, j).then((ok) => expect(ok).toBe(true))),
      ...conns.slice(8).map((c) => settleStuckRuns(c)),
    ]);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed', jobs_completed: 8 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
  });
});

describe('settle_stuck_runs', () => {
  it('settles runs whose jobs ended without settlement, once', async () => {
    const ok = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const bad = await seedRun(db.sql, { types: ['site_pages'] });
    const mixed = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const active = await seedRun(db.sql, { types: ['site_pages'] });
    await heartbeatJob(db.sql, (await claimNextJob(db.sql, 'w'))!); // `ok` is now running
    // A superuser edit bypasses settlement (like a crash between statements in older code).
    const end = (status: string, runId: string, filter = db.sql``) =>
      db.sql`update public.jobs set status = ${status}, finished_at = now(), lease_expires_at = null,
               last_error = ${status === 'failed' ? 'lost' : null} where run_id = ${runId} ${filter}`;
    await end('completed', ok.runId);
    await end('failed', bad.runId);
    await end('completed', mixed.runId, db.sql`and content_type = 'site_pages'`);
    await end('failed', mixed.runId, db.sql`and content_type = 'blog_posts'`);
    const activeBefore = await runRow(db.sql, active.runId);
    expect((await runRow(db.sql, ok.runId)).status).toBe('running');

    expect(await settleStuckRuns(db.sql)).toBe(3);
    expect(await runRow(db.sql, ok.runId)).toMatchObject({ status: 'completed', jobs_completed: 2 });
    expect(await runRow(db.sql, bad.runId)).toMatchObject({ status: 'failed', jobs_failed: 1 });
    expect(await runRow(db.sql, mixed.runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 1, jobs_failed: 1 });
    for (const r of [ok, bad, mixed]) {
      expect((await runRow(db.sql, r.runId)).finished_at).toBeInstanceOf(Date);
      expect(await notificationsOf(db.sql, r.runId)).toHaveLength(1);
    }
    expect(await runRow(db.sql, active.runId)).toEqual(activeBefore);
    expect(await notificationsOf(db.sql, active.runId)).toHaveLength(0);

    expect(await settleStuckRuns(db.sql)).toBe(0);
    expect(await settleStuckRuns(db.sql)).toBe(0);
    const [n] = await db.sql`select count(*)::int as n from public.notifications where run_id in ${db.sql([ok.runId, bad.runId, mixed.runId])}`;
    expect(n!.n).toBe(3);
  });

  it('when due (the worker\'s call): once per private.settle_stuck_runs_state.every across concurrent callers', async () => {
    /** A run whose only job ended without settlement (a superuser edit). */
    const stuckRun = async () => {
      const { runId } = await seedRun(db.sql, { types: ['site_pages'] });
      await db.sql`update public.jobs set status = 'completed', finished_at = now() where run_id = ${runId}`;
      return runId;
    };
    await db.sql`update private.settle_stuck_runs_state set every = interval '1 hour', last_settled_at = '-infinity'`;
    try {
      const first = await stuckRun();
      const conns = Array.from({ length: 8 }, () => db.connect(1));
      const settled = await Promise.all(conns.map((c) => settleStuckRuns(c, { whenDue: true })));
      expect(settled.filter((n) => n === 1)).toHaveLength(1);
      expect(settled.filter((n) => n === 0)).toHaveLength(7);
      expect((await runRow(db.sql, first)).status).toBe('completed');

      // Not due again within the hour: a new stuck run waits, unless asked without whenDue.
      const second = await stuckRun();
      expect(await settleStuckRuns(db.sql, { whenDue: true })).toBe(0);
      expect((await runRow(db.sql, second)).status).toBe('pending');
      await db.sql`update private.settle_stuck_runs_state set last_settled_at = now() - interval '61 minutes'`;
      expect(await settleStuckRuns(db.sql, { whenDue: true })).toBe(1);
      expect((await runRow(db.sql, second)).status).toBe('completed');
      const third = await stuckRun();
      expect(await settleStuckRuns(db.sql)).toBe(1);
      expect((await runRow(db.sql, third)).status).toBe('completed');
    } finally {
      await db.sql`update private.settle_stuck_runs_state set every = default, last_settled_at = '-infinity'`;
    }
  });

  it('fails jobs whose last lease expired and settles their run', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 1 });
    const job = (await claimNextJob(db.sql, 'w'))!;
    await expireLease(db.sql, job.id);
    expect(await settleStuckRuns(db.sql)).toBe(1);
    expect(await jobRow(db.sql, job.id)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'failed' });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
    expect(await settleStuckRuns(db.sql)).toBe(0);
  });
});

describe('batch calls', () => {
  it('claim_jobs claims up to N distinct jobs, expired leases first, filtered by kind', async () => {
    await seedRun(db.sql, { types: CONTENT_TYPES });
    expect(await claimJobs(db.sql, 'exporter', 5, ['export'])).toEqual([]);
    const first = await claimJobs(db.sql, 'w1', 5);
    expect(first).toHaveLength(5);
    expect(new Set(first.map((j) => j.fencingToken)).size).toBe(5);
    const rest = await claimJobs(db.sql, 'w2', 10);
    expect(rest).toHaveLength(3);
    expect(new Set([...first, ...rest].map((j) => j.id)).size).toBe(8);
    const [row] = await db.sql`select count(*)::int as n from public.jobs where status = 'running' and attempts = 1
                                and worker_id in ('w1', 'w2')`;
    expect(row!.n).toBe(8);
    expect(await claimJobs(db.sql, 'w3', 3)).toEqual([]);

    await expireLease(db.sql, rest[1]!.id);
    const rescued = await claimJobs(db.sql, 'w3', 3);
    expect(rescued.map((j) => [j.id, j.attempts])).toEqual([[rest[1]!.id, 2]]);
    expect(await jobRow(db.sql, rest[1]!.id)).toMatchObject({ worker_id: 'w3', status: 'running' });
  });

  it('complete_jobs completes only the jobs still held and settles their runs', async () => {
    const r1 = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const r2 = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const jobs = await claimAll(4);
    const staleJob = jobs.find((j) => j.runId === r2.runId)!;
    await expireLease(db.sql, staleJob.id);
    const fresh = (await claimNextJob(db.sql, 'rescuer'))!;
    expect(fresh.id).toBe(staleJob.id);
    const freshBefore = await jobRow(db.sql, fresh.id);

    expect(await completeJobs(db.sql, jobs)).toBe(3);
    expect(await jobRow(db.sql, fresh.id)).toEqual(freshBefore);
    expect(await runRow(db.sql, r1.runId)).toMatchObject({ status: 'completed', jobs_completed: 2 });
    expect(await runRow(db.sql, r2.runId)).toMatchObject({ status: 'running', jobs_completed: 1 });
    expect(await completeJobs(db.sql, jobs)).toBe(0);
    expect(await completeJobs(db.sql, [fresh])).toBe(1);
    expect(await runRow(db.sql, r2.runId)).toMatchObject({ status: 'completed', jobs_completed: 2 });
    expect(await notificationsOf(db.sql, r1.runId)).toHaveLength(1);
    expect(await notificationsOf(db.sql, r2.runId)).toHaveLength(1);
  });

  it('complete_job_and_claim_next completes, then claims the next job in the same call', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const a = (await claimNextJob(db.sql, 'w'))!;
    const step1 = await completeJobAndClaimNext(db.sql, a, 'w');
    expect(step1.completed).toBe(true);
    expect(step1.next).not.toBeNull();
    expect(step1.next!.id).not.toBe(a.id);
    expect(await jobRow(db.sql, a.id)).toMatchObject({ status: 'completed' });
    expect(await jobRow(db.sql, step1.next!.id)).toMatchObject({
      status: 'running', worker_id: 'w', attempts: 1, fencing_token: step1.next!.fencingToken,
    });

    // A stale token completes nothing (the caller may still get new work).
    const stale = await completeJobAndClaimNext(db.sql, a, 'w');
    expect(stale).toEqual({ completed: false, next: null });
    expect((await runRow(db.sql, runId)).status).toBe('running');

    const last = await completeJobAndClaimNext(db.sql, step1.next!, 'w');
    expect(last).toEqual({ completed: true, next: null });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed', jobs_completed: 2 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
  });

  it('complete_job_and_claim_next gives no new job to a caller whose completion was fenced off', async () => {
    await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags'] });
    const a = (await claimNextJob(db.sql, 'frozen'))!;
    await expireLease(db.sql, a.id); // the holder froze past its lease
    const rescuer = (await claimNextJob(db.sql, 'rescuer'))!;
    expect(rescuer.id).toBe(a.id);
    const pendingBefore = await db.sql`select id, status, attempts, worker_id, fencing_token from public.jobs
                                         where status = 'pending' order by id`;
    expect(pendingBefore).toHaveLength(2); // work is there to be claimed

    // The frozen caller wakes up and completes with its stale token: nothing completed, nothing claimed.
    expect(await completeJobAndClaimNext(db.sql, a, 'frozen')).toEqual({ completed: false, next: null });
    expect(await db.sql`select id, status, attempts, worker_id, fencing_token from public.jobs
                         where status = 'pending' order by id`).toEqual(pendingBefore);
    expect(await jobRow(db.sql, a.id)).toMatchObject({ status: 'running', worker_id: 'rescuer', fencing_token: rescuer.fencingToken });

    // The current holder completes and gets the next job.
    const step = await completeJobAndClaimNext(db.sql, rescuer, 'rescuer');
    expect(step.completed).toBe(true);
    expect(step.next).not.toBeNull();
  });
});

describe('lock order', () => {
  // complete_job_and_claim_next = complete (locks the run) + claim (which first
  // fails exhausted jobs, locking their runs). Two workers doing that at once
  // over each other's runs must not deadlock.
  it('two workers completing and claiming across each other\'s runs do not deadlock', async () => {
    const r1 = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'], maxAttempts: 1 });
    const r2 = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'], maxAttempts: 1 });
    const jobs = await claimAll(4);
    const [j1, x1] = jobs.filter((j) => j.runId === r1.runId);
    const [j2, x2] = jobs.filter((j) => j.runId === r2.runId);
    // x1 and x2 died on their last attempt; x1 expired first.
    await db.sql`update public.jobs set lease_expires_at = now() - interval '2 seconds' where id = ${x1!.id}`;
    await db.sql`update public.jobs set lease_expires_at = now() - interval '1 second' where id = ${x2!.id}`;

    const a = await db.connect(1).reserve();
    const b = await db.connect(1).reserve();
    try {
      await a`begin`;
      await b`begin`;
      expect((await a`select public.complete_job(${j1!.id}, ${j1!.fencingToken}) as ok`)[0]!.ok).toBe(true);
      expect((await b`select public.complete_job(${j2!.id}, ${j2!.fencingToken}) as ok`)[0]!.ok).toBe(true);
      const claimA = a`select * from public.claim_jobs('a', 1)`.execute();
      await sleep(200);
      const claimB = b`select * from public.claim_jobs('b', 1)`.execute();
      const results = await Promise.allSettled([claimA, claimB]);
      expect(results.map((r) => (r.status === 'rejected' ? String((r.reason as Error).message) : 'ok'))).toEqual(['ok', 'ok']);
      await a`commit`;
      await b`commit`;
    } finally {
      a.release();
      b.release();
    }
    await settleStuckRuns(db.sql);
    for (const r of [r1, r2]) {
      expect(await runRow(db.sql, r.runId)).toMatchObject({ status: 'partially_failed', jobs_completed: 1, jobs_failed: 1 });
      expect(await notificationsOf(db.sql, r.runId)).toHaveLength(1);
    }
  });
});
