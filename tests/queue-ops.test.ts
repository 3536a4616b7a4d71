// The shared HubSpot request budget, retention (delete_finished_jobs) and queue_stats.
import { beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { acquireHubSpotRequest } from '../shared/sql/budget.ts';
import { beginInvocation, finishInvocation } from '../shared/sql/invocations.ts';
import { claimJobs, claimNextJob, completeJob, failJob } from '../shared/sql/jobs.ts';
import { stopRun } from '../shared/sql/runs.ts';
import type { StopReason } from '../shared/stop-reason.ts';
import { useTestDatabase } from './support/database.ts';
import { drainQueue, jobsOfRun, runRow, seedRun } from './support/queue-fixtures.ts';

const db = useTestDatabase();

/** These tests hold more than four fetch jobs of one portal at once: lift the portal cap (tested in queue-fairness). */
async function liftFetchCap() {
  await db.sql`update private.job_kinds set portal_cap_max = null where kind = 'fetch'`;
}
beforeAll(liftFetchCap);
let nextPortal = 9_000_000;

async function grants(hubspotPortalId: number): Promise<Date[]> {
  const [row] = await db.sql`select granted_at from private.hubspot_request_budgets where hubspot_portal_id = ${hubspotPortalId}`;
  return (row?.granted_at as Date[] | undefined) ?? [];
}

describe('acquire_hubspot_requests', () => {
  it('grants up to N per window, then returns how long to wait', async () => {
    const portal = (nextPortal += 10);
    for (let i = 0; i < 5; i++) expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 2000)).toBe(0);
    const wait = await acquireHubSpotRequest(db.sql, String(portal), 5, 2000);
    expect(wait).toBeGreaterThan(500); // ~2000 less the time the five calls took
    expect(wait).toBeLessThanOrEqual(2000);
    expect(await grants(portal)).toHaveLength(5);
    // Another HubSpot portal has its own budget.
    expect(await acquireHubSpotRequest(db.sql, String(portal + 1), 5, 2000)).toBe(0);

    // Time passes (back-dated): the oldest grant is 1.5 s old, so one slot frees in ~0.5 s.
    await db.sql`update private.hubspot_request_budgets
                    set granted_at = array[clock_timestamp() - interval '1500 ms', clock_timestamp() - interval '1 s',
                                           clock_timestamp(), clock_timestamp(), clock_timestamp()]
                  where hubspot_portal_id = ${portal}`;
    const wait2 = await acquireHubSpotRequest(db.sql, String(portal), 5, 2000);
    expect(wait2).toBeGreaterThan(0);
    expect(wait2).toBeLessThanOrEqual(500);
    // ... and once the window has passed for the two oldest, two more are granted.
    await db.sql`update private.hubspot_request_budgets
                    set granted_at = array[clock_timestamp() - interval '3 s', clock_timestamp() - interval '2100 ms',
                                           clock_timestamp(), clock_timestamp(), clock_timestamp()]
                  where hubspot_portal_id = ${portal}`;
    expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 2000)).toBe(0);
    expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 2000)).toBe(0);
    expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 2000)).toBeGreaterThan(0);
    expect(await grants(portal)).toHaveLength(5); // expired grants are pruned
  });

  it('20 concurrent callers never get more than N grants in the window', async () => {
    const portal = (nextPortal += 10);
    const conns = Array.from({ length: 20 }, () => db.connect(1));
    await Promise.all(conns.map((c) => c`select 1`));
    const results = (
      await Promise.all(conns.map(async (c) => {
        const out: number[] = [];
        for (let i = 0; i < 3; i++) out.push(await acquireHubSpotRequest(c, String(portal), 7, 60_000));
        return out;
      }))
    ).flat();
    expect(results).toHaveLength(60);
    expect(results.filter((w) => w === 0)).toHaveLength(7);
    for (const w of results.filter((x) => x !== 0)) {
      expect(w).toBeGreaterThan(50_000);
      expect(w).toBeLessThanOrEqual(60_000);
    }
    expect(await grants(portal)).toHaveLength(7);
  });
});

describe('delete_finished_jobs', () => {
  it('deletes only finished jobs of finished runs older than the age, in bounded batches', async () => {
    await drainQueue(db.sql);
    await db.sql`delete from public.jobs`; // only this test's jobs below
    const old = await seedRun(db.sql, { types: ['site_pages', 'blog_posts', 'blog_tags', 'hubdb_rows', 'hubdb_tables'] });
    const open = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
    const recent = await seedRun(db.sql, { types: ['site_pages'] });
    for (const j of await claimJobs(db.sql, 'w', 8)) {
      if (j.runId === open.runId && j.contentType === 'blog_posts') continue; // stays running
      expect(j.runId === old.runId && j.contentType === 'blog_tags' ? (await failJob(db.sql, j, 'x', false)) === 'failed' : await completeJob(db.sql, j)).toBe(true);
    }
    expect((await runRow(db.sql, old.runId)).status).toBe('partially_failed');
    expect((await runRow(db.sql, open.runId)).finished_at).toBeNull();
    // Back-date: the old run's jobs and the open run's finished job finished two days ago.
    await db.sql`update public.jobs set finished_at = now() - interval '2 days'
                  where run_id in (${old.runId}, ${open.runId}) and finished_at is not null`;
    const runBefore = await runRow(db.sql, old.runId);

    const batches: number[] = [];
    for (;;) {
      const [row] = await db.sql`select public.delete_finished_jobs(interval '1 day', 2) as n`;
      batches.push(row!.n as number);
      if (row!.n === 0) break;
    }
    expect(batches).toEqual([2, 2, 1, 0]);
    expect(await jobsOfRun(db.sql, old.runId)).toEqual([]);
    expect((await jobsOfRun(db.sql, open.runId)).map((j) => j.status).sort()).toEqual(['completed', 'running']);
    expect(await jobsOfRun(db.sql, recent.runId)).toHaveLength(1);
    // The run keeps its counts (and its notification).
    expect(await runRow(db.sql, old.runId)).toEqual(runBefore);
    const [note] = await db.sql`select count(*)::int as n from public.notifications where run_id = ${old.runId}`;
    expect(note!.n).toBe(1);

    // Age zero takes the recent run's job too, but never an unfinished run's.
    const [row] = await db.sql`select public.delete_finished_jobs(interval '0', 100) as n`;
    expect(row!.n).toBe(1);
    expect(await jobsOfRun(db.sql, recent.runId)).toEqual([]);
    expect(await jobsOfRun(db.sql, open.runId)).toHaveLength(2);
    await drainQueue(db.sql);
  });
});

describe('queue_stats', () => {
  it('returns jobs by kind and status, oldest pending age, running leases, recent failures and unfinished runs', async () => {
    await drainQueue(db.sql);
    await db.sql`delete from public.runs`;
    const fetch = await seedRun(db.sql, { types: CONTENT_TYPES.slice(0, 4) });
    await seedRun(db.sql, { kind: 'export', types: ['site_pages', 'blog_posts'] });
    const stopped = await seedRun(db.sql, { types: ['url_redirects'] });
    expect(await stopRun(db.sql, stopped.runId)).toBe(true);
    await db.sql`update public.jobs set run_after = now() - interval '90 seconds' where run_id = ${fetch.runId}`;
    const running = (await claimNextJob(db.sql, 'stats-worker', ['fetch']))!;
    const failed = (await claimNextJob(db.sql, 'stats-worker', ['fetch']))!;
    expect(await failJob(db.sql, failed, 'nope', false)).toBe('failed');

    const [row] = await db.sql`select public.queue_stats() as s`;
    const stats = row!.s as Record<string, unknown>;
    expect(Object.keys(stats).sort()).toEqual(['by_kind_and_status', 'failed_last_hour', 'hubspot_budget_last_10s', 'invocations_last_hour', 'last_hour',
      'oldest_pending_age_seconds', 'recent_failures', 'recent_invocations', 'running', 'running_per_portal', 'unfinished_runs']);
    expect(stats.by_kind_and_status).toEqual([
      { kind: 'export', status: 'pending', jobs: 2 },
      { kind: 'fetch', status: 'failed', jobs: 1 },
      { kind: 'fetch', status: 'pending', jobs: 2 },
      { kind: 'fetch', status: 'running', jobs: 1 },
      { kind: 'fetch', status: 'stopped', jobs: 1 },
    ]);
    expect(stats.oldest_pending_age_seconds).toBeGreaterThanOrEqual(89);
    expect(stats.oldest_pending_age_seconds).toBeLessThanOrEqual(95);
    expect(stats.running).toEqual([{
      job_id: running.id, kind: 'fetch', content_type: running.contentType, worker_id: 'stats-worker',
      lease_seconds_left: expect.any(Number),
    }]);
    const left = (stats.running as { lease_seconds_left: number }[])[0]!.lease_seconds_left;
    expect(left).toBeGreaterThan(290);
    expect(left).toBeLessThanOrEqual(300);
    expect(stats.failed_last_hour).toBe(1);
    expect(stats.recent_failures).toEqual([expect.objectContaining({ job_id: failed.id, kind: 'fetch', content_type: failed.contentType, last_error: 'nope' })]);
    expect(stats.running_per_portal).toEqual([expect.objectContaining({ portal_id: running.portalId, running: 1 })]);
    expect(stats.unfinished_runs).toBe(2);
    const lastHour = stats.last_hour as { minute: string; completed: number; failed: number }[];
    expect(lastHour).toHaveLength(60);
    expect(lastHour.reduce((s, m) => s + m.failed, 0)).toBe(1);

    // A portal's budget entry carries its learned limit and what remains of its day (midnight in its time zone).
    await db.sql`insert into private.hubspot_request_budgets (hubspot_portal_id, granted_at, max_per_interval, interval_ms, limit_source,
                   limit_learned_at, daily_limit, daily_remaining, daily_seen_at, time_zone)
                 values (${fetch.hubspotPortalId}, array[now()], 190, 10000, 'headers', now(), 650000, 1234, now(), 'America/Los_Angeles')`;
    const [withBudget] = await db.sql`select public.queue_stats() -> 'hubspot_budget_last_10s' as b,
                                             (date_trunc('day', now() at time zone 'America/Los_Angeles') + interval '1 day') at time zone 'America/Los_Angeles' as reset`;
    const mine = (withBudget!.b as { hubspot_portal_id: string; daily_resets_at: string }[]).filter((e) => e.hubspot_portal_id === String(fetch.hubspotPortalId));
    expect(mine).toEqual([{ hubspot_portal_id: String(fetch.hubspotPortalId), name: expect.any(String), requests: 1, max_per_interval: 190, interval_ms: 10000,
      daily_limit: 650000, daily_remaining: 1234, daily_resets_at: expect.any(String) }]);
    expect(new Date(mine[0]!.daily_resets_at).getTime()).toBe((withBudget!.reset as Date).getTime());

    // An empty queue still has every key.
    await drainQueue(db.sql);
    await db.sql`delete from public.runs`;
    const [empty] = await db.sql`select public.queue_stats() as s`;
    expect(empty!.s).toMatchObject({ by_kind_and_status: [], oldest_pending_age_seconds: null, running: [], running_per_portal: [],
      failed_last_hour: 0, recent_failures: [], unfinished_runs: 0 });
  });
});

describe('queue_stats: worker invocations over a stated period', () => {
  it('counts every invocation of the last 60 minutes from the per-minute aggregate, past the log\'s 500-row cap; older minutes are not counted', async () => {
    await db.sql`delete from private.worker_invocation_log`;
    await db.sql`delete from private.worker_invocation_minutes`;
    await db.sql`update private.worker_settings set max_concurrent_invocations = 200`;
    const finish = async (source: string, stopReason: StopReason, claimed: number) => {
      const id = crypto.randomUUID();
      expect(await beginInvocation(db.sql, id, source, 60)).toBe(true);
      await finishInvocation(db.sql, id, { stopReason, claimed, completed: claimed, released: 0, failed: 0 });
    };
    // 600 idle invocations (a loop calling the worker twice a second for 5 minutes) and 3 that worked.
    for (let i = 0; i < 600; i += 50) await Promise.all(Array.from({ length: 50 }, () => finish('npm-start', 'queue_empty', 0)));
    for (let i = 0; i < 3; i++) await finish('cron', 'time_budget', 4);
    const [log] = await db.sql`select count(*)::int as n from private.worker_invocation_log`;
    expect(log!.n).toBe(500); // the log lists the newest; it is not what the figures count
    const stats = async () => ((await db.sql`select public.queue_stats() as s`)[0]!.s) as Record<string, any>;
    let s = await stats();
    expect(s.invocations_last_hour).toMatchObject({
      minutes: 60, invocations: 603, claimed: 12, completed: 12, failed: 0,
      by_source: [
        { source: 'npm-start', stop_reason: 'queue_empty', invocations: 600, claimed: 0 },
        { source: 'cron', stop_reason: 'time_budget', invocations: 3, claimed: 12 },
      ],
    });
    expect(Date.parse(s.invocations_last_hour.since)).toBeLessThanOrEqual(Date.now() - 59 * 60_000);
    expect((s.last_hour as { invocations: number }[]).reduce((n, m) => n + m.invocations, 0)).toBe(603);

    // Back-dated: minutes before the window are kept (24 hours) but not counted; older ones are deleted by the next finish.
    await db.sql`update private.worker_invocation_minutes set minute = minute - interval '2 hours' where source = 'npm-start'`;
    await db.sql`insert into private.worker_invocation_minutes (minute, source, stop_reason, invocations)
                 values (date_trunc('minute', now()) - interval '25 hours', 'cron', 'queue_empty', 7)`;
    await finish('cron', 'queue_empty', 0);
    s = await stats();
    expect(s.invocations_last_hour).toMatchObject({ invocations: 4, claimed: 12 });
    const [kept] = await db.sql`select count(*)::int as rows, coalesce(sum(invocations), 0)::int as n from private.worker_invocation_minutes`;
    expect(kept).toEqual({ rows: expect.any(Number), n: 604 }); // the 25-hour-old minute is gone
    await db.sql`update private.worker_settings set max_concurrent_invocations = 4`;
  });
});
