// Retention: finished jobs, runs and notifications older than the setting are
// deleted in bounded batches by exactly what pg_cron runs; unfinished work and
// recent history stay. queue_stats reads only active and recent jobs.
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import type { ContentType } from '../shared/content-types.ts';
import { claimJobs, completeJob, failJob } from '../shared/sql/jobs.ts';
import { useTestDatabase } from './support/database.ts';
import { drainQueue, jobsOfRun, notificationsOf, runRow, seedRun } from './support/queue-fixtures.ts';
import { cronJobOfFile } from './support/cron-files.ts';

const db = useTestDatabase();
const CRON_MIGRATION = path.join(PROJECT_ROOT, 'supabase/schemas/0910_cron_prune_queue_history.sql');

/** The command the migration schedules with pg_cron (the text between $cmd$ markers), and its schedule. */
function cronJob() {
  return cronJobOfFile(CRON_MIGRATION);
}

/** Runs the cron command once; returns what it deleted. */
async function runCronOnce(): Promise<{ jobs: number; runs: number; notifications: number; quiet_cycles: number; request_windows: number }> {
  const { command } = await cronJob();
  const [row] = await db.sql.unsafe(command);
  return Object.values(row!)[0] as { jobs: number; runs: number; notifications: number; quiet_cycles: number; request_windows: number };
}

/** A finished run of `types` (one job failed when `fail`), back-dated to have finished `daysAgo` days ago. */
async function finishedRun(types: readonly ContentType[], daysAgo: number, fail = false) {
  const seeded = await seedRun(db.sql, { types });
  const jobs = await claimJobs(db.sql, 'retention-worker', types.length);
  expect(jobs).toHaveLength(types.length);
  for (const [i, j] of jobs.entries()) {
    expect(fail && i === 0 ? (await failJob(db.sql, j, 'boom', false)) === 'failed' : await completeJob(db.sql, j)).toBe(true);
  }
  await db.sql`update public.jobs set finished_at = now() - make_interval(days => ${daysAgo}) where run_id = ${seeded.runId}`;
  await db.sql`update public.runs set finished_at = now() - make_interval(days => ${daysAgo}) where id = ${seeded.runId}`;
  await db.sql`update public.notifications set created_at = now() - make_interval(days => ${daysAgo}) where run_id = ${seeded.runId}`;
  return seeded;
}

async function counts() {
  const [row] = await db.sql`select (select count(*)::int from public.jobs) as jobs, (select count(*)::int from public.runs) as runs,
                                    (select count(*)::int from public.notifications) as notifications`;
  return row as { jobs: number; runs: number; notifications: number };
}

beforeEach(async () => {
  await drainQueue(db.sql);
  await db.sql`delete from public.runs`;
  await db.sql`update private.retention_settings set keep_finished = interval '30 days', batch_size = 5000`;
});

describe('prune_queue_history (what pg_cron runs)', () => {
  it('is scheduled every 20 seconds as one call with the settings\' defaults (30 days, 5,000 per call)', async () => {
    expect(await cronJob()).toEqual({ name: 'prune-queue-history', schedule: '20 seconds', command: 'select public.prune_queue_history()' });
    const [s] = await db.sql`select keep_finished::text as keep, batch_size from private.retention_settings`;
    expect(s).toEqual({ keep: '30 days', batch_size: 5000 });
  });

  it('deletes finished history older than the setting with its notifications; recent and unfinished runs stay', async () => {
    const old = await finishedRun(['site_pages', 'blog_posts', 'blog_tags'], 40, true);
    const old2 = await finishedRun(['url_redirects'], 31);
    const recent = await finishedRun(['hubdb_rows'], 5);
    // An unfinished run from long ago: one job finished 40 days ago, one still pending.
    const open = await seedRun(db.sql, { types: ['site_pages', 'landing_pages'] });
    const [first] = await claimJobs(db.sql, 'w', 1);
    expect(await completeJob(db.sql, first!)).toBe(true);
    await db.sql`update public.jobs set finished_at = now() - interval '40 days' where run_id = ${open.runId} and finished_at is not null`;
    await db.sql`update public.runs set created_at = now() - interval '41 days' where id = ${open.runId}`;
    expect(await counts()).toEqual({ jobs: 7, runs: 4, notifications: 3 });

    expect(await runCronOnce()).toEqual({ jobs: 4, runs: 2, notifications: 2, quiet_cycles: 0, request_windows: 0 });
    for (const r of [old, old2]) {
      expect(await db.sql`select 1 from public.runs where id = ${r.runId}`).toHaveLength(0);
      expect(await jobsOfRun(db.sql, r.runId)).toEqual([]);
      expect(await notificationsOf(db.sql, r.runId)).toEqual([]);
    }
    expect(await jobsOfRun(db.sql, recent.runId)).toHaveLength(1);
    expect(await notificationsOf(db.sql, recent.runId)).toHaveLength(1);
    expect((await jobsOfRun(db.sql, open.runId)).map((j) => j.status).sort()).toEqual(['completed', 'pending']);
    expect((await runRow(db.sql, open.runId)).finished_at).toBeNull();

    expect(await runCronOnce()).toEqual({ jobs: 0, runs: 0, notifications: 0, quiet_cycles: 0, request_windows: 0 });
    expect(await counts()).toEqual({ jobs: 3, runs: 2, notifications: 1 });
  });

  it('works in bounded batches: jobs first, then the runs they leave empty, until nothing is left', async () => {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await finishedRun(['site_pages', 'blog_posts', 'blog_tags', 'hubdb_rows'], 60));
    await db.sql`update private.retention_settings set batch_size = 5`;
    const batches = [];
    for (;;) {
      const b = await runCronOnce();
      batches.push(b);
      if (b.jobs + b.runs + b.notifications + b.quiet_cycles + b.request_windows === 0) break;
    }
    // 12 jobs, 5 per call (oldest first); a run goes in the call that removed its last job.
    expect(batches).toEqual([
      { jobs: 5, runs: 1, notifications: 1, quiet_cycles: 0, request_windows: 0 },
      { jobs: 5, runs: 1, notifications: 1, quiet_cycles: 0, request_windows: 0 },
      { jobs: 2, runs: 1, notifications: 1, quiet_cycles: 0, request_windows: 0 },
      { jobs: 0, runs: 0, notifications: 0, quiet_cycles: 0, request_windows: 0 },
    ]);
    expect(await counts()).toEqual({ jobs: 0, runs: 0, notifications: 0 });
  });

  it('explicit arguments override the settings; age zero still never touches unfinished runs', async () => {
    const recent = await finishedRun(['site_pages'], 2);
    const open = await seedRun(db.sql, { types: ['blog_posts'] });
    const [r0] = await db.sql`select public.prune_queue_history(interval '3 days', 10) as r`;
    expect(r0!.r).toEqual({ jobs: 0, runs: 0, notifications: 0, quiet_cycles: 0, request_windows: 0 });
    const [r1] = await db.sql`select public.prune_queue_history(interval '0', 10) as r`;
    expect(r1!.r).toEqual({ jobs: 1, runs: 1, notifications: 1, quiet_cycles: 0, request_windows: 0 });
    expect(await db.sql`select 1 from public.runs where id = ${recent.runId}`).toHaveLength(0);
    expect(await jobsOfRun(db.sql, open.runId)).toHaveLength(1);
  });
});

describe('queue_stats', () => {
  it('counts active jobs and jobs finished in the last hour only (constant time whatever the history)', async () => {
    await finishedRun(['site_pages', 'blog_posts'], 10, true); // old history: not counted
    const recent = await finishedRun(['hubdb_rows'], 0);
    await db.sql`update public.jobs set finished_at = now() - interval '10 minutes' where run_id = ${recent.runId}`;
    await seedRun(db.sql, { types: ['url_redirects'] });
    const [row] = await db.sql`select public.queue_stats() as s`;
    const stats = row!.s as Record<string, unknown>;
    expect(stats.by_kind_and_status).toEqual([
      { kind: 'fetch', status: 'completed', jobs: 1 },
      { kind: 'fetch', status: 'pending', jobs: 1 },
    ]);
    expect(stats.failed_last_hour).toBe(0);
    expect(stats.unfinished_runs).toBe(1);
  });
});
