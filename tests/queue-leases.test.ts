// Leases and fencing: dying workers, reclaims, backoff and release.
import { beforeEach, describe, expect, it } from 'vitest';
import { completeFetchJob } from '../shared/sql/fetch.ts';
import { claimNextJob, completeJob, completeJobs, failJob, heartbeatJob, parkJob, releaseJob } from '../shared/sql/jobs.ts';
import { saveFetchedPage } from '../scripts/lib/queue-test-helpers.ts';
import { useTestDatabase } from './support/database.ts';
import {
  contentRows,
  drainQueue,
  expireLease,
  jobRow,
  jobsOfRun,
  makeDue,
  notificationsOf,
  runRow,
  seedRun,
  sleep,
} from './support/queue-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

describe('a dying worker', () => {
  it('loses its job when the lease expires: another worker reclaims it with a new token and one more attempt', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 3 });
    const a = (await claimNextJob(db.sql, 'worker-a'))!;
    expect(a.attempts).toBe(1);
    // Nobody can take a job whose lease is still valid.
    expect(await claimNextJob(db.sql, 'worker-b')).toBeNull();

    await expireLease(db.sql, a.id);
    const b = (await claimNextJob(db.sql, 'worker-b'))!;
    expect(b.id).toBe(a.id);
    expect(b.attempts).toBe(2);
    expect(BigInt(b.fencingToken)).toBeGreaterThan(BigInt(a.fencingToken));
    const row = await jobRow(db.sql, a.id);
    expect(row).toMatchObject({ status: 'running', attempts: 2, worker_id: 'worker-b', fencing_token: b.fencingToken });
    expect((row.lease_expires_at as Date).getTime()).toBeGreaterThan(Date.now() + 250_000); // fetch lease: 300 s
    // The run becomes running when the new holder reports work.
    expect(await heartbeatJob(db.sql, b)).toBe(true);
    expect((await runRow(db.sql, runId)).status).toBe('running');
  });

  it('a 1 s per-job lease (create_run override) really expires and the job is reclaimed', async () => {
    await seedRun(db.sql, { leaseSeconds: 1 });
    const a = (await claimNextJob(db.sql, 'worker-a'))!;
    expect(a.leaseExpiresAt.getTime() - Date.now()).toBeLessThan(1500);
    await sleep(1100);
    expect(await heartbeatJob(db.sql, a)).toBe(false);
    const b = (await claimNextJob(db.sql, 'worker-b'))!;
    expect(b).toMatchObject({ id: a.id, attempts: 2 });
  });

  it('after the last attempt the expired job becomes failed (not claimed) and its run settles once', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'], maxAttempts: 2 });
    const first = (await claimNextJob(db.sql, 'w1'))!;
    const second = (await claimNextJob(db.sql, 'w2'))!;
    expect(await completeJob(db.sql, first)).toBe(true);

    await expireLease(db.sql, second.id);
    const again = (await claimNextJob(db.sql, 'w3'))!;
    expect(again).toMatchObject({ id: second.id, attempts: 2 });
    await expireLease(db.sql, second.id); // the last attempt dies too

    expect(await claimNextJob(db.sql, 'w4')).toBeNull();
    const row = await jobRow(db.sql, second.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 2, lease_expires_at: null });
    expect(row.finished_at).toBeInstanceOf(Date);
    expect(row.last_error).toMatch(/Job lease expired on attempt 2 of 2/);

    const run = await runRow(db.sql, runId);
    expect(run).toMatchObject({ status: 'partially_failed', jobs_total: 2, jobs_completed: 1, jobs_failed: 1 });
    expect(run.finished_at).toBeInstanceOf(Date);
    const notes = await notificationsOf(db.sql, runId);
    expect(notes.map((n) => n.kind)).toEqual(['run_partially_failed']);
    // The safety net finds nothing left to do and adds no second notification.
    expect(Number((await db.sql`select public.settle_stuck_runs() as n`)[0]!.n)).toBe(0);
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
  });
});

describe('fencing', () => {
  it('the old holder cannot heartbeat, complete, fail, release or save a page after a reclaim', async () => {
    const { portalId, runId } = await seedRun(db.sql, { maxAttempts: 5 });
    const old = (await claimNextJob(db.sql, 'old-worker'))!;
    const page = [{ id: 'p1', updatedAt: '2026-01-01T00:00:00Z', data: { title: 'one' } }];
    expect(await saveFetchedPage(db.sql, old, page, { after: 'c1' }, 10)).toMatchObject({ added: 1 });

    await expireLease(db.sql, old.id);
    const fresh = (await claimNextJob(db.sql, 'new-worker'))!;
    expect(fresh.id).toBe(old.id);
    const rowBefore = await jobRow(db.sql, old.id);
    const contentBefore = await contentRows(db.sql, portalId);
    const runBefore = await runRow(db.sql, runId);

    const stale = [{ id: 'p1', updatedAt: '2026-02-02T00:00:00Z', data: { title: 'stale' } }, { id: 'p2', updatedAt: null, data: {} }];
    expect(await heartbeatJob(db.sql, old, { done: 99, total: 99, checkpoint: { after: 'stale' } })).toBe(false);
    expect(await saveFetchedPage(db.sql, old, stale, { after: 'stale' }, 99)).toBeNull();
    expect(await releaseJob(db.sql, old, { done: 99, checkpoint: { after: 'stale' } })).toBeNull();
    expect(await failJob(db.sql, old, 'stale failure', true)).toBe('lost');
    expect(await failJob(db.sql, old, 'stale failure', false)).toBe('lost');
    expect(await completeJobs(db.sql, [old])).toBe(0);
    expect(await completeFetchJob(db.sql, old)).toBe(false);
    expect(await completeJob(db.sql, old, { stale: true })).toBe(false);

    expect(await jobRow(db.sql, old.id)).toEqual(rowBefore);
    expect(await contentRows(db.sql, portalId)).toEqual(contentBefore);
    expect(await runRow(db.sql, runId)).toEqual(runBefore);
    expect(await notificationsOf(db.sql, runId)).toHaveLength(0);

    // The new holder is unaffected.
    expect(await heartbeatJob(db.sql, fresh, { done: 1 })).toBe(true);
    expect(await completeJob(db.sql, fresh)).toBe(true);
    expect((await jobRow(db.sql, old.id)).status).toBe('completed');
  });

  it('an expired holder is fenced off even before anyone reclaims the job', async () => {
    await seedRun(db.sql);
    const job = (await claimNextJob(db.sql, 'w'))!;
    await expireLease(db.sql, job.id);
    const before = await jobRow(db.sql, job.id);
    expect(await heartbeatJob(db.sql, job)).toBe(false);
    expect(await completeJob(db.sql, job)).toBe(false);
    expect(await releaseJob(db.sql, job)).toBeNull();
    expect(await jobRow(db.sql, job.id)).toEqual(before);
  });

  it('a wrong token never writes', async () => {
    await seedRun(db.sql);
    const job = (await claimNextJob(db.sql, 'w'))!;
    const before = await jobRow(db.sql, job.id);
    const forged = { id: job.id, fencingToken: String(BigInt(job.fencingToken) + 1000n) };
    expect(await heartbeatJob(db.sql, forged)).toBe(false);
    expect(await completeJob(db.sql, forged)).toBe(false);
    expect(await failJob(db.sql, forged, 'x', false)).toBe('lost');
    expect(await jobRow(db.sql, job.id)).toEqual(before);
  });

  it('heartbeat extends the lease and records progress and checkpoint', async () => {
    await seedRun(db.sql);
    const job = (await claimNextJob(db.sql, 'w'))!;
    await db.sql`update public.jobs set lease_expires_at = now() + interval '2 seconds' where id = ${job.id}`;
    expect(await heartbeatJob(db.sql, job, { done: 5, total: 20, checkpoint: { after: 'x' } })).toBe(true);
    const row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({ progress_done: 5, progress_total: 20, checkpoint: { after: 'x' }, status: 'running' });
    expect((row.lease_expires_at as Date).getTime()).toBeGreaterThan(Date.now() + 250_000);
    // Omitted fields are kept.
    expect(await heartbeatJob(db.sql, job)).toBe(true);
    expect(await jobRow(db.sql, job.id)).toMatchObject({ progress_done: 5, progress_total: 20, checkpoint: { after: 'x' } });
  });
});

describe('retry backoff', () => {
  // run_after and updated_at are both now() of fail_job's transaction: their difference is the wait.
  const waitOf = (r: Record<string, unknown>) => ((r.run_after as Date).getTime() - (r.updated_at as Date).getTime()) / 1000;
  const untilOf = (r: Record<string, unknown>) => ((r.retry_until as Date).getTime() - (r.updated_at as Date).getTime()) / 1000;
  /** The job has been failing for `seconds` (its give-up time moved back by that much), due now, claimed again. */
  async function failingFor(jobId: string, seconds: number, worker: string) {
    await db.sql`update public.jobs set retry_until = now() + make_interval(secs => 1800 - ${seconds}::int), run_after = now() - interval '1 second'
                  where id = ${jobId} and status = 'pending'`;
    return (await claimNextJob(db.sql, worker))!;
  }

  it('a retryable failure gives its attempt back and waits about as long as the job has failed so far, within the bounds, never past its give-up time', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 3 });
    let job = (await claimNextJob(db.sql, 'w1'))!;
    expect(job.attempts).toBe(1);
    expect(await failJob(db.sql, job, 'HubSpot 502', true)).toBe('retried');
    let row = await jobRow(db.sql, job.id);
    // The attempt given back; the give-up time set: fetch's retry_for_seconds (1800) after this first failure.
    expect(row).toMatchObject({ status: 'pending', attempts: 0, last_error: 'HubSpot 502', lease_expires_at: null, finished_at: null, failing_progress: 0 });
    expect(untilOf(row)).toBe(1800);
    // The first wait: the kind's base (fetch: 10 s) with 50-100 % jitter.
    expect(waitOf(row)).toBeGreaterThanOrEqual(5);
    expect(waitOf(row)).toBeLessThanOrEqual(10);
    expect(await claimNextJob(db.sql, 'w2')).toBeNull();

    // Failing for 40 s: a wait of 40 s (20-40 with jitter), the give-up time kept.
    job = await failingFor(job.id, 40, 'w2');
    expect(job.attempts).toBe(1);
    expect(await failJob(db.sql, job, 'HubSpot 503', true)).toBe('retried');
    row = await jobRow(db.sql, job.id);
    expect(row.attempts).toBe(0);
    expect(untilOf(row)).toBeCloseTo(1800 - 40, 0);
    expect(waitOf(row)).toBeGreaterThanOrEqual(20);
    expect(waitOf(row)).toBeLessThanOrEqual(40);

    // Failing for 1000 s: the kind's cap (fetch: 600 s), with jitter.
    job = await failingFor(job.id, 1000, 'w3');
    expect(await failJob(db.sql, job, 'HubSpot 504', true)).toBe('retried');
    row = await jobRow(db.sql, job.id);
    expect(waitOf(row)).toBeGreaterThanOrEqual(300);
    expect(waitOf(row)).toBeLessThanOrEqual(600);

    // 20 s before the give-up time: the last try is at that time, not after it.
    job = await failingFor(job.id, 1780, 'w4');
    expect(await failJob(db.sql, job, 'HubSpot 504', true)).toBe('retried');
    row = await jobRow(db.sql, job.id);
    expect((row.run_after as Date).getTime()).toBe((row.retry_until as Date).getTime());
    expect(waitOf(row)).toBeCloseTo(20, 0);
    expect(await runRow(db.sql, runId)).toMatchObject({ finished_at: null, jobs_failed: 0 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(0);

    // Past the give-up time: the next failure fails it for good, its run settled, one notification.
    job = await failingFor(job.id, 1801, 'w5');
    expect(job.attempts).toBe(1); // never more than the claim in hand: the outage used none
    expect(await failJob(db.sql, job, 'HubSpot is temporarily unavailable: connection failed (after 5 attempts).', true)).toBe('failed');
    row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, lease_expires_at: null });
    expect(row.finished_at).toBeInstanceOf(Date);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'failed', jobs_failed: 1, jobs_total: 1 });
    const notes = await notificationsOf(db.sql, runId);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ kind: 'run_failed' });
    expect(notes[0]!.message).toContain('temporarily unavailable');
    expect(await claimNextJob(db.sql, 'w6')).toBeNull();
  });

  it('an outage uses no attempt: retried far more times than max_attempts while it lasts, the job completes after it', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 3 });
    for (let i = 0; i < 12; i++) {
      await db.sql`update public.jobs set run_after = now() - interval '1 second' where run_id = ${runId} and status = 'pending'`;
      const job = (await claimNextJob(db.sql, `w${i}`))!;
      expect(job.attempts).toBe(1);
      expect(await failJob(db.sql, job, 'HubSpot is temporarily unavailable: connection failed (after 5 attempts).', true)).toBe('retried');
    }
    await db.sql`update public.jobs set run_after = now() - interval '1 second' where run_id = ${runId} and status = 'pending'`;
    const job = (await claimNextJob(db.sql, 'after'))!;
    expect(await completeJob(db.sql, job)).toBe(true);
    expect(await jobRow(db.sql, job.id)).toMatchObject({ status: 'completed', attempts: 1, max_attempts: 3 });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed' });
  });

  it('progress between failures starts a new run of them (a new give-up time); retry_for_seconds 0 fails the first one; retry_job starts afresh', async () => {
    await seedRun(db.sql);
    let job = (await claimNextJob(db.sql, 'w1'))!;
    expect(await failJob(db.sql, job, 'HubSpot 502', true)).toBe('retried');
    // Failing for 1700 s, then a page saved (progress 5), then a failure: a new run of failures, 1800 s from now.
    job = await failingFor(job.id, 1700, 'w2');
    expect(await heartbeatJob(db.sql, job, { done: 5 })).toBe(true);
    expect(await failJob(db.sql, job, 'HubSpot 502', true)).toBe('retried');
    let row = await jobRow(db.sql, job.id);
    expect(untilOf(row)).toBe(1800);
    expect(row.failing_progress).toBe(5);
    expect(waitOf(row)).toBeLessThanOrEqual(10); // its waits start again from the base

    // The setting, in its one place: 0 gives up at the first retryable failure.
    await db.sql`update private.job_kinds set retry_for_seconds = 0 where kind = 'fetch'`;
    try {
      job = await failingFor(job.id, 0, 'w3');
      await db.sql`update public.jobs set retry_until = null where id = ${job.id}`;
      expect(await failJob(db.sql, job, 'HubSpot 502', true)).toBe('failed');
    } finally {
      await db.sql`update private.job_kinds set retry_for_seconds = 1800 where kind = 'fetch'`;
    }
    // An operator's retry clears the give-up time: the job fails again only after a full new period.
    row = await jobRow(db.sql, job.id);
    expect((row.retry_until as Date).getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    expect((await db.sql`select public.retry_job(${job.id}) as r`)[0]!.r).toBe('retried');
    expect(await jobRow(db.sql, job.id)).toMatchObject({ retry_until: null, failing_progress: null });
    job = (await claimNextJob(db.sql, 'w4'))!;
    expect(await failJob(db.sql, job, 'HubSpot 502', true)).toBe('retried');
    expect(untilOf(await jobRow(db.sql, job.id))).toBe(1800);
  });

  it('a non-retryable failure fails the job at once, leaving attempts unused', async () => {
    const { runId } = await seedRun(db.sql, { types: ['blog_tags', 'blog_authors'], maxAttempts: 5 });
    const job = (await claimNextJob(db.sql, 'w1'))!;
    expect(await failJob(db.sql, job, '401 Unauthorized', false)).toBe('failed');
    expect(await jobRow(db.sql, job.id)).toMatchObject({ status: 'failed', attempts: 1, max_attempts: 5 });
    // The run still has an active job: not settled yet.
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'running', finished_at: null, jobs_failed: 1 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(0);
    const other = (await claimNextJob(db.sql, 'w2'))!;
    expect(other.id).not.toBe(job.id);
    expect(await failJob(db.sql, other, 'also 401', false)).toBe('failed');
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'failed', jobs_failed: 2 });
  });
});

describe('release', () => {
  it('a job released again and again without progress is failed with an actionable message, its run settled once; progress resets the count', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 3 });
    const [kind] = await db.sql`select k.max_stalled_releases as max from private.job_kinds k join public.jobs j on j.kind = k.kind where j.run_id = ${runId}`;
    const max = kind!.max as number;
    // Progress in between: the count starts again.
    let job = (await claimNextJob(db.sql, 'w'))!;
    expect(await releaseJob(db.sql, job, { done: 5 })).toBe('released');
    for (let i = 0; i < max - 1; i++) {
      job = (await claimNextJob(db.sql, 'w'))!;
      expect(job.stalledReleases).toBe(i);
      expect(await releaseJob(db.sql, job)).toBe('released');
    }
    job = (await claimNextJob(db.sql, 'w'))!;
    expect(await heartbeatJob(db.sql, job, { done: 6 })).toBe(true);
    expect(await releaseJob(db.sql, job)).toBe('released');
    expect((await jobRow(db.sql, job.id)).stalled_releases).toBe(0);
    // Then max releases in a row without progress: the last one fails the job for good.
    for (let i = 0; i < max; i++) {
      job = (await claimNextJob(db.sql, 'w'))!;
      expect(job.attempts).toBe(1);
      expect(await releaseJob(db.sql, job)).toBe(i < max - 1 ? 'released' : 'failed');
    }
    const row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, stalled_releases: max, progress_done: 6 });
    expect(row.last_error).toMatch(/Released \d+ times in a row without progress/);
    expect(row.last_error).toMatch(/WORKER_CPU_BUDGET_MS/);
    expect(await claimNextJob(db.sql, 'w')).toBeNull();
    const [run] = await db.sql`select status, finished_at from public.runs where id = ${runId}`;
    expect(run!.finished_at).not.toBeNull();
    expect(await db.sql`select kind from public.notifications where run_id = ${runId}`).toHaveLength(1);
    // The failed job is no longer anyone's to release.
    expect(await releaseJob(db.sql, job)).toBeNull();
  });

  it('a job released ten times by different workers stays claimable with attempts, checkpoint and progress kept', async () => {
    await seedRun(db.sql, { maxAttempts: 2 });
    let token = 0n;
    let id = '';
    for (let i = 0; i < 10; i++) {
      const job = (await claimNextJob(db.sql, `worker-${i}`))!;
      expect(job).not.toBeNull();
      if (id) expect(job.id).toBe(id);
      id = job.id;
      expect(job.attempts).toBe(1);
      expect(job.progressDone).toBe(i * 10);
      expect(job.checkpoint).toEqual(i === 0 ? null : { after: `cursor-${i - 1}` });
      expect(BigInt(job.fencingToken)).toBeGreaterThan(token);
      token = BigInt(job.fencingToken);
      if (i % 2 === 0) {
        expect(await releaseJob(db.sql, job, { done: (i + 1) * 10, checkpoint: { after: `cursor-${i}` } })).toBe('released');
      } else {
        // Progress reported by heartbeat, then a bare release keeps it.
        expect(await heartbeatJob(db.sql, job, { done: (i + 1) * 10, checkpoint: { after: `cursor-${i}` } })).toBe(true);
        expect(await releaseJob(db.sql, job)).toBe('released');
      }
      const row = await jobRow(db.sql, id);
      expect(row).toMatchObject({ status: 'pending', attempts: 0, lease_expires_at: null, progress_done: (i + 1) * 10 });
      expect(row.checkpoint).toEqual({ after: `cursor-${i}` });
      expect((row.run_after as Date).getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      // Released twice? The second release is fenced off.
      expect(await releaseJob(db.sql, job)).toBeNull();
    }
    const last = (await claimNextJob(db.sql, 'final'))!;
    expect(last).toMatchObject({ id, attempts: 1, progressDone: 100, checkpoint: { after: 'cursor-9' } });
    expect(await completeJob(db.sql, last)).toBe(true);
    const [done] = await jobsOfRun(db.sql, last.runId);
    expect(done).toMatchObject({ status: 'completed', attempts: 1 });
  });
});

describe('park_job (HubSpot daily limit)', () => {
  const reason = (until: Date) => `waiting for HubSpot's daily limit until ${until.toISOString()}`;

  it('parks the job until the reset without using an attempt, shows why on the job and the run, and resumes after', async () => {
    const { runId } = await seedRun(db.sql, { maxAttempts: 3 });
    const job = (await claimNextJob(db.sql, 'w1'))!;
    expect(await heartbeatJob(db.sql, job, { done: 100, checkpoint: { after: 'c1' } })).toBe(true);
    expect(job.attempts).toBe(1);
    const until = new Date(Date.now() + 6 * 3600_000);
    expect(await parkJob(db.sql, job, until, reason(until))).toBe(true);

    const row = await jobRow(db.sql, job.id);
    expect(row).toMatchObject({
      status: 'pending', attempts: 0, lease_expires_at: null, finished_at: null, last_error: null,
      progress_done: 100, checkpoint: { after: 'c1' }, waiting_reason: reason(until),
    });
    expect((row.run_after as Date).getTime()).toBe(until.getTime());
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'running', finished_at: null, waiting_reason: reason(until) });
    // Parked: not claimable before the reset, and its holder is fenced off.
    expect(await claimNextJob(db.sql, 'w2')).toBeNull();
    expect(await heartbeatJob(db.sql, job)).toBe(false);
    expect(await parkJob(db.sql, job, until, 'again')).toBe(false);

    // The reset has passed (back-dated): claimed with the same attempt number as before the park.
    await makeDue(db.sql, job.id);
    const resumed = (await claimNextJob(db.sql, 'w2'))!;
    expect(resumed).toMatchObject({ id: job.id, attempts: 1, progressDone: 100, checkpoint: { after: 'c1' } });
    expect((await jobRow(db.sql, job.id)).waiting_reason).toBeNull();
    // Parking again and again never uses the attempts up.
    for (let i = 0; i < 5; i++) {
      const held = i === 0 ? resumed : (await claimNextJob(db.sql, `w${i}`))!;
      expect(await parkJob(db.sql, held, new Date(Date.now() + 60_000), 'daily limit')).toBe(true);
      await makeDue(db.sql, job.id);
    }
    const last = (await claimNextJob(db.sql, 'w9'))!;
    expect(last.attempts).toBe(1);
    // Work again: the run's reason clears.
    expect(await heartbeatJob(db.sql, last)).toBe(true);
    expect((await runRow(db.sql, runId)).waiting_reason).toBeNull();
    expect(await completeJob(db.sql, last)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed', waiting_reason: null });
  });

  it('a stale holder cannot park, and a parked job\'s run keeps its reason until a job works again', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const a = (await claimNextJob(db.sql, 'w1'))!;
    const b = (await claimNextJob(db.sql, 'w2'))!;
    await expireLease(db.sql, a.id);
    const before = await jobRow(db.sql, a.id);
    expect(await parkJob(db.sql, a, new Date(Date.now() + 3600_000), 'stale')).toBe(false);
    expect(await jobRow(db.sql, a.id)).toEqual(before);
    expect((await runRow(db.sql, runId)).waiting_reason).toBeNull();

    expect(await parkJob(db.sql, b, new Date(Date.now() + 3600_000), 'daily limit')).toBe(true);
    expect((await runRow(db.sql, runId)).waiting_reason).toBe('daily limit');
    // The other job finishing does not finish the run (the parked one is pending).
    const rescued = (await claimNextJob(db.sql, 'w3'))!;
    expect(rescued.id).toBe(a.id);
    expect(await completeJob(db.sql, rescued)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'running', finished_at: null, jobs_completed: 1 });
  });
});
