// Operator actions (service-role SQL the orchestrator calls for operators):
// retry a failed job, stop one job, pause and resume a portal. Real Postgres,
// many connections where claims, completions and pauses race.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../shared/db.ts';
import { claimJobs, completeJob, failJob, heartbeatJob, parkJob, releaseJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue, jobRow, notificationsOf, pgError, runRow, seedRun } from './support/queue-fixtures.ts';

const db = useTestDatabase();

beforeAll(async () => {
  // Several fetch jobs of one portal run at once here (the cap is queue-fairness's subject).
  await db.sql`update private.job_kinds set portal_cap_max = null where kind = 'fetch'`;
});
afterEach(async () => {
  await db.sql`delete from private.portal_pauses`;
  await drainQueue(db.sql);
  await db.sql`delete from public.sync_schedules`;
});

async function retryJob(sql: Sql, id: string): Promise<string> {
  const [row] = await sql`select public.retry_job(${id}) as outcome`;
  return row!.outcome as string;
}
async function stopJob(sql: Sql, id: string): Promise<boolean> {
  const [row] = await sql`select public.stop_job(${id}) as ok`;
  return row!.ok as boolean;
}
async function pausePortal(sql: Sql, portalId: string, by: string | null = null, reason: string | null = null): Promise<boolean> {
  const [row] = await sql`select public.pause_portal(${portalId}, ${by}, ${reason}) as ok`;
  return row!.ok as boolean;
}
async function resumePortal(sql: Sql, portalId: string): Promise<boolean> {
  const [row] = await sql`select public.resume_portal(${portalId}) as ok`;
  return row!.ok as boolean;
}
/** Claims until nothing is left, returning every job claimed. */
async function claimAll(sql: Sql): Promise<ClaimedJob[]> {
  const all: ClaimedJob[] = [];
  for (;;) {
    const got = await claimJobs(sql, 'w', 50);
    if (got.length === 0) return all;
    all.push(...got);
  }
}
async function heldByPause(portalId: string) {
  const [row] = await db.sql`select count(*) filter (where status = 'pending' and run_after = 'infinity')::int as held,
                                    count(*) filter (where status = 'pending' and run_after <> 'infinity')::int as due,
                                    count(*) filter (where status = 'running')::int as running
                               from public.jobs where portal_id = ${portalId}`;
  return row as { held: number; due: number; running: number };
}

describe('retry_job', () => {
  it('a failed job gets a new attempt; its run reopens and settles again with one true notification', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'], maxAttempts: 1 });
    const [a, b] = await claimJobs(db.sql, 'w', 2);
    expect(await completeJob(db.sql, a!)).toBe(true);
    expect(await failJob(db.sql, b!, 'HubSpot said no', false)).toBe('failed');
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'partially_failed', jobs_failed: 1, jobs_completed: 1 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);

    expect(await retryJob(db.sql, b!.id)).toBe('retried');
    expect(await jobRow(db.sql, b!.id)).toMatchObject({ status: 'pending', finished_at: null, last_error: null, attempts: 1, max_attempts: 2 });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'running', finished_at: null, jobs_failed: 0, jobs_completed: 1 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(0);

    const [again] = await claimJobs(db.sql, 'w', 5);
    expect(again!.id).toBe(b!.id);
    expect(await completeJob(db.sql, again!)).toBe(true);
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'completed', jobs_failed: 0, jobs_completed: 2 });
    const notes = await notificationsOf(db.sql, runId);
    expect(notes).toHaveLength(1);
    expect(notes[0]!.kind).toBe('run_completed');
  });

  it('refuses what is not failed, a type busy elsewhere and a disconnected portal, changing nothing', async () => {
    const { userId, portalId, runId } = await seedRun(db.sql, { types: ['site_pages'], maxAttempts: 1 });
    const [job] = await claimJobs(db.sql, 'w', 1);
    expect(await retryJob(db.sql, job!.id)).toBe('not_failed'); // running
    await failJob(db.sql, job!, 'boom', false);
    // A newer run of the same type is active: the retry would be a second active job.
    const newer = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'] });
    expect(newer.runId).not.toBeNull();
    expect(await retryJob(db.sql, job!.id)).toBe('busy');
    expect(await jobRow(db.sql, job!.id)).toMatchObject({ status: 'failed' });
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'failed' });
    await db.sql`select public.stop_run(${newer.runId})`;
    await db.sql`update public.portals set disconnected_at = now(), disconnected_reason = 'gone' where id = ${portalId}`;
    expect(await retryJob(db.sql, job!.id)).toBe('disconnected');
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
    expect((await pgError(() => retryJob(db.sql, '999999999'))).code).toBe('P0002');
  });

  it('16 connections retrying one failed job, and two failed jobs of one type, give one retry each time', async () => {
    const { userId, portalId, runId } = await seedRun(db.sql, { types: ['blog_posts'], maxAttempts: 1 });
    const [first] = await claimJobs(db.sql, 'w', 1);
    await failJob(db.sql, first!, 'boom', false);
    const second = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_posts'], maxAttempts: 1 });
    const [other] = await claimJobs(db.sql, 'w', 1);
    await failJob(db.sql, other!, 'boom', false);

    const conns = Array.from({ length: 16 }, () => db.connect(1));
    await Promise.all(conns.map((c) => c`select 1`));
    const outcomes = await Promise.all(conns.map((c, i) => retryJob(c, i % 2 ? first!.id : other!.id)));
    expect(outcomes.filter((o) => o === 'retried')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'retried').every((o) => o === 'busy' || o === 'not_failed')).toBe(true);
    const [active] = await db.sql`select count(*)::int as n from public.jobs where portal_id = ${portalId} and status = 'pending'`;
    expect(active!.n).toBe(1);
    const runs = await db.sql`select status, finished_at from public.runs where id in (${runId}, ${second.runId!})`;
    expect(runs.filter((r) => r.finished_at === null)).toHaveLength(1);
  });
});

describe('stop_job', () => {
  it('stops one pending or running job; the holder is fenced off and the run settles as stopped', async () => {
    const { runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags'] });
    const [held] = await claimJobs(db.sql, 'w', 1);
    expect(await stopJob(db.sql, held!.id)).toBe(true);
    expect(await heartbeatJob(db.sql, held!)).toBe(false);
    expect(await completeJob(db.sql, held!)).toBe(false);
    expect(await runRow(db.sql, runId)).toMatchObject({ finished_at: null, jobs_stopped: 1 });
    const rest = await claimJobs(db.sql, 'w', 5);
    expect(rest).toHaveLength(2);
    expect(await completeJob(db.sql, rest[0]!)).toBe(true);
    const [, pendingId] = [rest[0]!.id, rest[1]!.id];
    await releaseJob(db.sql, rest[1]!);
    expect(await stopJob(db.sql, pendingId)).toBe(true); // a pending one
    expect(await runRow(db.sql, runId)).toMatchObject({ status: 'stopped', jobs_stopped: 2, jobs_completed: 1 });
    expect(await notificationsOf(db.sql, runId)).toHaveLength(1);
    expect(await stopJob(db.sql, pendingId)).toBe(false); // already ended
    expect((await pgError(() => stopJob(db.sql, '999999999'))).code).toBe('P0002');
  });
});

describe('pause_portal / resume_portal', () => {
  it('a paused portal\'s jobs are not claimed (running ones handed back, new ones held) until it is resumed', async () => {
    const paused = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags'] });
    const other = await seedRun(db.sql, { types: ['site_pages'] });
    const [running] = (await claimJobs(db.sql, 'w', 10)).filter((j) => j.portalId === paused.portalId);
    expect(running).toBeDefined();
    const before = await jobRow(db.sql, running!.id);

    expect(await pausePortal(db.sql, paused.portalId, paused.userId, 'maintenance')).toBe(true);
    expect(await pausePortal(db.sql, paused.portalId)).toBe(false); // already paused
    expect(await heldByPause(paused.portalId)).toEqual({ held: 3, due: 0, running: 0 });
    expect(await jobRow(db.sql, running!.id)).toMatchObject({ status: 'pending', waiting_reason: 'maintenance', attempts: (before.attempts as number) - 1 });
    expect(await runRow(db.sql, paused.runId)).toMatchObject({ waiting_reason: 'maintenance', finished_at: null });
    expect(await heartbeatJob(db.sql, running!)).toBe(false); // the holder learns to stop
    expect(await claimJobs(db.sql, 'w', 10)).toEqual([]); // the other portal's job was claimed above; nothing of this one
    // A user's new run is created but held too.
    const extra = await createRun(db.sql, { portalId: paused.portalId, requestedBy: paused.userId, kind: 'fetch', contentTypes: ['hubdb_tables'] });
    expect(extra.createdTypes).toEqual(['hubdb_tables']);
    expect(await heldByPause(paused.portalId)).toEqual({ held: 4, due: 0, running: 0 });
    expect(await claimJobs(db.sql, 'w', 10)).toEqual([]);

    expect(await resumePortal(db.sql, paused.portalId)).toBe(true);
    expect(await resumePortal(db.sql, paused.portalId)).toBe(false);
    expect(await runRow(db.sql, paused.runId)).toMatchObject({ waiting_reason: null });
    const claimed = await claimAll(db.sql);
    expect(claimed.filter((j) => j.portalId === paused.portalId)).toHaveLength(4);
    expect(claimed.every((j) => j.portalId !== other.portalId)).toBe(true);
    expect((await pgError(() => pausePortal(db.sql, '00000000-0000-4000-8000-000000000000'))).code).toBe('P0002');
  });

  it('a job of a paused portal that goes back to pending (release, park, retryable failure, retry) stays held', async () => {
    const { portalId, runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags', 'hubdb_rows'], maxAttempts: 3 });
    const held = await claimJobs(db.sql, 'w', 4);
    expect(held).toHaveLength(4);
    await failJob(db.sql, held[3]!, 'boom', false); // failed for good before the pause
    // Pausing while jobs are held would hand them back: pause in a second session only after they went pending.
    await db.sql`insert into private.portal_pauses (portal_id) values (${portalId})`;
    expect(await releaseJob(db.sql, held[0]!)).toBe('released');
    expect(await parkJob(db.sql, held[1]!, new Date(Date.now() + 3_600_000), 'waiting for HubSpot\'s daily limit')).toBe(true);
    expect(await failJob(db.sql, held[2]!, 'try again', true)).toBe('retried');
    expect(await retryJob(db.sql, held[3]!.id)).toBe('retried');
    expect(await heldByPause(portalId)).toEqual({ held: 4, due: 0, running: 0 });
    const reasons = await db.sql`select distinct waiting_reason from public.jobs where portal_id = ${portalId}`;
    expect(reasons.map((r) => r.waiting_reason)).toEqual(['paused by an operator']);
    expect(await runRow(db.sql, runId)).toMatchObject({ finished_at: null });
    expect(await claimJobs(db.sql, 'w', 10)).toEqual([]);
  });

  it('resume gives each held job back its own due time and reason: a parked one stays parked, a passed backoff is due now', async () => {
    const { portalId, runId } = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags', 'hubdb_tables'] });
    const [parked, backedOff, running, stopped] = await claimJobs(db.sql, 'w', 4);
    const until = new Date(Date.now() + 3_600_000);
    const reason = `waiting for HubSpot's daily limit until ${until.toISOString()}`;
    expect(await parkJob(db.sql, parked!, until, reason)).toBe(true);
    expect(await failJob(db.sql, backedOff!, 'HubSpot 502', true)).toBe('retried');
    // Its backoff ends during the pause: moved to just ahead of the database's clock.
    const [due] = await db.sql`update public.jobs set run_after = clock_timestamp() + interval '200 ms' where id = ${backedOff!.id} returning run_after`;
    const backoffEnd = due!.run_after as Date;
    await releaseJob(db.sql, stopped!);

    expect(await pausePortal(db.sql, portalId, null, 'maintenance')).toBe(true);
    expect(await heldByPause(portalId)).toEqual({ held: 4, due: 0, running: 0 });
    expect(await jobRow(db.sql, parked!.id)).toMatchObject({ waiting_reason: 'maintenance' });
    // A held job that ends keeps its own due time, not the hold's.
    expect(await stopJob(db.sql, stopped!.id)).toBe(true);
    const [ended] = await db.sql`select run_after = 'infinity' as held from public.jobs where id = ${stopped!.id}`;
    expect(ended!.held).toBe(false);
    for (let i = 0; ; i++) { // until the backoff has passed on the database's clock
      const [passed] = await db.sql`select clock_timestamp() > ${backoffEnd} as yes`;
      if (passed!.yes) break;
      if (i > 500) throw new Error('the backoff never passed');
      await new Promise((r) => setTimeout(r, 10));
    }

    expect(await resumePortal(db.sql, portalId)).toBe(true);
    expect(await jobRow(db.sql, parked!.id)).toMatchObject({ status: 'pending', run_after: until, waiting_reason: reason });
    expect(await jobRow(db.sql, backedOff!.id)).toMatchObject({ status: 'pending', run_after: backoffEnd, waiting_reason: null, last_error: 'HubSpot 502' });
    expect(await runRow(db.sql, runId)).toMatchObject({ waiting_reason: reason });
    const claimed = await claimAll(db.sql);
    expect(claimed.map((j) => j.id).sort()).toEqual([backedOff!.id, running!.id].sort());
    expect(await jobRow(db.sql, parked!.id)).toMatchObject({ status: 'pending', run_after: until });
  });

  it('a paused portal\'s schedule creates no run and its reconcile stays due; resumed, it runs', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    await db.sql`insert into public.sync_schedules (portal_id, owner_id, content_types) values (${portalId}, ${userId}, ${['site_pages']})`;
    await db.sql`update public.sync_schedules set next_incremental_at = now() - interval '1 s', next_full_at = now() - interval '1 s'
                  where portal_id = ${portalId}`;
    await pausePortal(db.sql, portalId);
    const [tick] = await db.sql`select public.schedule_due_syncs() as n`;
    expect(tick!.n).toBe(0);
    const [runs] = await db.sql`select count(*)::int as n from public.runs where portal_id = ${portalId}`;
    expect(runs!.n).toBe(0);
    const [schedule] = await db.sql`select next_full_at <= now() as full_due from public.sync_schedules where portal_id = ${portalId}`;
    expect(schedule!.full_due).toBe(true);
    // A user's run is still made (and held): only the schedule creates nothing.
    const mine = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_posts'] });
    expect(mine.runId).not.toBeNull();

    await resumePortal(db.sql, portalId);
    const [after] = await db.sql`select public.schedule_due_syncs() as n`;
    expect(after!.n).toBe(1);
    const [scheduled] = await db.sql`select fetch_mode, trigger from public.runs where portal_id = ${portalId} and trigger = 'schedule'`;
    expect(scheduled).toMatchObject({ fetch_mode: 'full', trigger: 'schedule' });
  });

  it('a pause racing 6 claimers, completers and run creators: nothing of the portal is claimed or completed after it', async () => {
    const target = await createUserWithPortal(db.sql);
    const bystander = await createUserWithPortal(db.sql);
    const types = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects'] as const;
    let pausedAt = Infinity; // performance.now() once pause_portal has returned
    let stop = false;
    const late: string[] = [];
    const workers = Array.from({ length: 6 }, () => db.connect(1));
    const creators = Array.from({ length: 2 }, () => db.connect(1));
    await Promise.all([...workers, ...creators].map((c) => c`select 1`));
    const work = workers.map(async (c) => {
      while (!stop) {
        const asked = performance.now();
        for (const j of await claimJobs(c, 'w', 2)) {
          if (j.portalId === target.portalId && asked > pausedAt) late.push(`claimed ${j.id}`);
          const completing = performance.now();
          if ((await completeJob(c, j)) && j.portalId === target.portalId && completing > pausedAt) late.push(`completed ${j.id}`);
        }
      }
    });
    const create = creators.map(async (c, i) => {
      while (!stop) {
        const who = i === 0 ? target : bystander;
        await createRun(c, { portalId: who.portalId, requestedBy: who.userId, kind: 'fetch', contentTypes: types });
      }
    });
    expect(await waitForCompleted(target.portalId, 40)).toBeGreaterThanOrEqual(40);
    expect(await pausePortal(db.connect(1), target.portalId)).toBe(true);
    pausedAt = performance.now();
    await waitForCompleted(bystander.portalId, (await completedOf(bystander.portalId)) + 40);
    stop = true;
    await Promise.all([...work, ...create]);
    expect(late).toEqual([]);
    const state = await heldByPause(target.portalId);
    expect(state.running).toBe(0);
    expect(state.due).toBe(0);
    expect(state.held).toBeGreaterThan(0);
  });
});

async function completedOf(portalId: string): Promise<number> {
  const [row] = await db.sql`select count(*)::int as n from public.jobs where portal_id = ${portalId} and status = 'completed'`;
  return row!.n as number;
}
/** Polls until the portal has this many completed jobs (the racing sessions above make them). */
async function waitForCompleted(portalId: string, n: number): Promise<number> {
  for (let i = 0; i < 2_000; i++) {
    const got = await completedOf(portalId);
    if (got >= n) return got;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`portal ${portalId} never reached ${n} completed jobs`);
}
