// Retention keeps up with a fleet: at 1,000 portals on a one-minute schedule
// (1,000 runs, 8,000 jobs and, at worst, 1,000 notifications a minute, before
// compaction), what pg_cron runs in a minute prunes at least what a minute
// creates, with the default settings, each call a bounded batch. Time is
// simulated by back-dating: each simulated minute's history is inserted as
// already past keep_finished, then the cron command runs as often as its
// schedule fires in a minute; a backlog from before is drained on top.
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { cronJobOfFile } from './support/cron-files.ts';

const db = useTestDatabase();
const CRON_MIGRATION = path.join(PROJECT_ROOT, 'supabase/schemas/0910_cron_prune_queue_history.sql');
const PORTALS = 1000;
const JOBS_PER_RUN = 8;
const MINUTES = 6;
const BACKLOG_MINUTES = 2;

function cronJob() {
  return cronJobOfFile(CRON_MIGRATION);
}

/** How often a pg_cron schedule fires per minute ('N seconds', every minute, or every N minutes). */
function callsPerMinute(schedule: string): number {
  const seconds = /^(\d+) seconds$/.exec(schedule);
  if (seconds) return Math.floor(60 / Number(seconds[1]));
  if (schedule === '* * * * *') return 1;
  const minutes = /^\*\/(\d+) \* \* \* \*$/.exec(schedule);
  if (minutes) return 1 / Number(minutes[1]);
  throw new Error(`unexpected schedule ${schedule}`);
}

let portals: { portalId: string; userId: string }[] = [];

/** One minute of the fleet's history (a finished run of 8 jobs and its notification per portal), finished `ago` ago. */
async function fleetMinute(ago: string): Promise<void> {
  await db.sql`
    with p as (
      select * from unnest(${portals.map((p) => p.portalId)}::uuid[], ${portals.map((p) => p.userId)}::uuid[]) as t(portal_id, user_id)
    ), r as (
      insert into public.runs (portal_id, owner_id, requested_by, kind, status, content_types, jobs_total, jobs_completed,
                               created_at, started_at, finished_at, fetch_mode, trigger)
      select p.portal_id, p.user_id, p.user_id, 'fetch', 'completed', array['site_pages'], ${JOBS_PER_RUN}, ${JOBS_PER_RUN},
             now() - ${ago}::interval - interval '1 minute', now() - ${ago}::interval - interval '1 minute', now() - ${ago}::interval,
             'incremental', 'schedule'
        from p
      returning id, portal_id, owner_id, finished_at
    ), j as (
      insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, status, attempts, created_at, started_at, finished_at, result)
      select r.id, r.portal_id, r.owner_id, 'fetch', 'site_pages', 'completed', 1, r.finished_at, r.finished_at, r.finished_at,
             '{"added": 1, "updated": 0, "deleted": 0}'::jsonb
        from r cross join generate_series(1, ${JOBS_PER_RUN})
    )
    insert into public.notifications (user_id, run_id, kind, message, created_at)
    select r.owner_id, r.id, 'run_completed', 'Fetch run completed.', r.finished_at from r`;
}

async function counts() {
  const [row] = await db.sql`select (select count(*)::int from public.jobs) as jobs, (select count(*)::int from public.runs) as runs,
                                    (select count(*)::int from public.notifications) as notifications`;
  return row as { jobs: number; runs: number; notifications: number };
}

beforeAll(async () => {
  const ps = [];
  for (let i = 0; i < PORTALS; i += 50) {
    ps.push(...(await Promise.all(Array.from({ length: Math.min(50, PORTALS - i) }, () => createUserWithPortal(db.sql)))));
  }
  portals = ps.map((p) => ({ portalId: p.portalId, userId: p.userId }));
}, 120_000);

describe('retention at the fleet rate (1,000 portals, one-minute schedule)', () => {
  it('prunes at least what the fleet creates each minute, in bounded batches, with the default settings', async () => {
    const [settings] = await db.sql`select keep_finished::text as keep, batch_size from private.retention_settings`;
    const { schedule, command } = await cronJob();
    const rate = callsPerMinute(schedule);
    // History still inside the retention window: never touched.
    await fleetMinute('1 day');
    const kept = await counts();
    // A backlog past the cutoff (say, after pg_cron was down): drained on top of the fleet's own rate.
    for (let i = 0; i < BACKLOG_MINUTES; i++) await fleetMinute(`${settings!.keep} ${i + 1} minutes`);

    const perMinute: { created: number; pruned: number; ms: number[] }[] = [];
    for (let minute = 0; minute < MINUTES; minute++) {
      // This minute's history has just aged past keep_finished.
      await fleetMinute(`${settings!.keep} 1 second`);
      const ms: number[] = [];
      let pruned = 0;
      const calls = Math.floor((minute + 1) * rate) - Math.floor(minute * rate);
      for (let c = 0; c < calls; c++) {
        const t0 = performance.now();
        const [row] = await db.sql.unsafe(command);
        ms.push(Math.round(performance.now() - t0));
        const r = Object.values(row!)[0] as { jobs: number; runs: number; notifications: number };
        expect(r.jobs).toBeLessThanOrEqual(settings!.batch_size as number);
        expect(r.runs).toBeLessThanOrEqual(settings!.batch_size as number);
        pruned += r.jobs + r.runs + r.notifications;
      }
      perMinute.push({ created: PORTALS * (JOBS_PER_RUN + 2), pruned, ms });
    }
    // Over the second half: pruned ÷ created.
    const ratioOf = (ms: typeof perMinute) => ms.reduce((a, m) => a + m.pruned, 0) / ms.reduce((a, m) => a + m.created, 0);
    const ratio = ratioOf(perMinute.slice(MINUTES / 2));
    console.log(`retention at the fleet rate: schedule '${schedule}', batch ${settings!.batch_size}: pruned ÷ created over the second half ${ratio.toFixed(2)}`
      + ` (first half, draining the backlog: ${ratioOf(perMinute.slice(0, MINUTES / 2)).toFixed(2)});`
      + ` call ms per minute ${JSON.stringify(perMinute.map((m) => m.ms))}`);
    expect(ratio).toBeGreaterThanOrEqual(1);
    // The backlog is drained, nothing past the cutoff is left over, and the recent minute stays whole.
    expect(await counts()).toEqual(kept);
  }, 300_000);
});
