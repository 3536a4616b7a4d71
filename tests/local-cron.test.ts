// The local cron runs what pg_cron runs: the cron.schedule statements of the
// schema's own cron files, each job's command on its schedule, and the worker
// POST that net.http_post queues. A one-minute schedule set over HTTP gets a
// scheduled run completed by that POST (the cron's clock is shifted to just
// before a five-minute mark, so every job fires within seconds).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firesInMinute, parseCronSchedule } from '../local/cron/schedule.ts';
import { schemaCronStatements, startLocalCron, type LocalCron } from '../local/cron/cron.ts';
import { SCHEMAS_DIR } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';
import { waitUntil } from './support/fetch-fixtures.ts';

const db = useTestDatabase();
let sys: LocalSystem;
let cron: LocalCron | undefined;
beforeAll(async () => {
  sys = await startLocalSystem(db.url, { env: { WORKER_LANES: '2' } });
});
afterAll(async () => {
  await cron?.stop();
  await sys?.stop();
});

const at = (iso: string) => Date.parse(iso);

describe('cron schedules', () => {
  it('five fields in UTC, steps, ranges, lists, and cron\'s either-day rule; seconds; bad ones refused', () => {
    const every = parseCronSchedule('* * * * *');
    const five = parseCronSchedule('*/5 * * * *');
    if (every.kind !== 'fields' || five.kind !== 'fields') throw new Error('fields expected');
    expect(firesInMinute(every, at('2026-03-01T10:07:30Z'))).toBe(true);
    expect([0, 5, 7, 55].map((m) => firesInMinute(five, at(`2026-03-01T10:${String(m).padStart(2, '0')}:00Z`)))).toEqual([true, true, false, true]);
    const nightly = parseCronSchedule('30 2-4/2 1,15 * 0');
    if (nightly.kind !== 'fields') throw new Error('fields expected');
    expect(firesInMinute(nightly, at('2026-03-15T02:30:00Z'))).toBe(true); // the 15th (a Sunday too)
    expect(firesInMinute(nightly, at('2026-03-08T04:30:00Z'))).toBe(true); // a Sunday, not the 1st or 15th
    expect(firesInMinute(nightly, at('2026-03-09T04:30:00Z'))).toBe(false); // Monday the 9th
    expect(firesInMinute(nightly, at('2026-03-15T03:30:00Z'))).toBe(false); // hour 3 is not in 2-4/2
    expect(parseCronSchedule('30 seconds')).toEqual({ kind: 'seconds', every: 30 });
    for (const bad of ['* * * *', '61 * * * *', '*/0 * * * *', '5-2 * * * *', '90 seconds', 'hourly']) expect(() => parseCronSchedule(bad)).toThrow(/cron schedule/);
  });

  it('reads one cron.schedule statement per cron file of the schema, as written there', async () => {
    const statements = await schemaCronStatements();
    expect(statements.map((s) => s.file)).toEqual(expect.arrayContaining(['0900_cron_invoke_queue_worker.sql', '0910_cron_prune_queue_history.sql', '0920_cron_prune_oauth_install_states.sql']));
    for (const s of statements) expect(await readFile(path.join(SCHEMAS_DIR, s.file), 'utf8')).toContain(s.statement);
  });
});

describe('the local cron', () => {
  it('a one-minute schedule set over HTTP gets a scheduled run within 70 s; retention and OAuth-state pruning run too', async () => {
    sys.sim.addPortal({ portalId: 931_001, token: 'pat-local-cron', sizes: { site_pages: 20, landing_pages: 5, blog_posts: 20, blog_authors: 2, blog_tags: 3, hubdb_tables: 1, hubdb_rows: 10, url_redirects: 5 } });
    const userId = await createUser(db.sql);
    const jwt = await sys.keys.signUserToken(userId);
    const post = async (body: unknown) => {
      const res = await fetch(sys.functions.functionUrl('orchestrator'), {
        method: 'POST', headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const connected = await post({ action: 'connect_portal', name: 'Scheduled', accessToken: 'pat-local-cron' });
    expect(connected.status).toBe(201);
    const portalId = connected.body.portalId as string;

    // The cron's clock: 1.5 s before the next five-minute mark, so every job of the schema is due at once.
    const fiveMinutes = 300_000;
    const offset = Math.ceil(Date.now() / fiveMinutes) * fiveMinutes + fiveMinutes - 1_500 - Date.now();
    cron = await startLocalCron(db.directUrl, { projectUrl: sys.functions.url, workerSecret: sys.workerSecret, now: () => Date.now() + offset });
    expect(cron.jobs().map((j) => j.jobname).sort()).toEqual(['invoke-queue-worker', 'prune-oauth-install-states', 'prune-queue-history', 'wake-queue-worker']);

    const scheduled = await post({ action: 'set_sync_schedule', portalId, incrementalEveryMinutes: 1 });
    expect(scheduled.status).toBe(200);
    await waitUntil(async () => {
      const [run] = await db.sql`select status from public.runs where portal_id = ${portalId} and trigger = 'schedule' and status = 'completed'`;
      return run !== undefined;
    }, 70_000, 'a scheduled run completed');
    const [run] = await db.sql`select id, (select count(*)::int from public.jobs j where j.run_id = r.id and j.status = 'completed') as jobs
                                 from public.runs r where portal_id = ${portalId}`;
    expect(run!.jobs).toBe(8);
    const [schedule] = await db.sql`select last_run_id, next_incremental_at > now() as moved from public.sync_schedules where portal_id = ${portalId}`;
    expect(schedule).toMatchObject({ last_run_id: run!.id, moved: true });

    // Every job ran and succeeded (the 10-second ones more than once).
    const ran = () => [...new Set(cron!.runs().map((r) => `${r.jobname} ${r.status}`))].sort();
    await waitUntil(async () => ran().length >= 4, 20_000, 'all four jobs ran');
    expect(ran()).toEqual(['invoke-queue-worker succeeded', 'prune-oauth-install-states succeeded', 'prune-queue-history succeeded', 'wake-queue-worker succeeded']);
    // (A 10-second job may be running as this reads: every finished run succeeded.)
    const details = await db.sql`select distinct d.status from cron.job_run_details d where d.status <> 'running'`;
    expect(details.map((d) => d.status)).toEqual(['succeeded']);
    // The worker POSTs the cron commands queued through net.http_post (the minute's, and a wake while
    // none ran and work was due), as the worker answered them.
    const responses = await db.sql`select status_code from net._http_response`;
    expect(responses.length).toBeGreaterThanOrEqual(1);
    expect(new Set(responses.map((r) => r.status_code))).toEqual(new Set([202]));
    // Counted as sent before its answer is recorded: a wake sent meanwhile counts here first.
    expect(cron.requests().failed).toBe(0);
    expect(cron.requests().sent).toBeGreaterThanOrEqual(responses.length);
  }, 120_000);

  it('wake-queue-worker invokes the worker only while no invocation runs and a claim would find work', async () => {
    cron ??= await startLocalCron(db.directUrl, { projectUrl: sys.functions.url, workerSecret: sys.workerSecret });
    const [job] = await db.sql`select command from cron.job where jobname = 'wake-queue-worker'`;
    // The job's own command, as the cron runs it: a row (the queued request) when it wakes the worker.
    const wakes = async () => (await db.sql.unsafe(job!.command as string)).length;
    const idle = async () => ((await db.sql`select (select w.active from public.worker_invocation_leases() w) = 0
                                                    and not public.claimable_jobs_exist() as idle`)[0]!.idle as boolean);
    await waitUntil(idle, 60_000, 'the worker idle with nothing due');
    expect(await wakes()).toBe(0); // nothing to do
    sys.sim.addPortal({ portalId: 931_002, token: 'pat-cron-wake', sizes: { url_redirects: 5 } });
    const { userId, portalId } = await createUserWithPortal(db.sql, { hubspotPortalId: 931_002, token: 'pat-cron-wake' });
    // An invocation runs (a lease held here), then a job falls due (made in SQL: nobody is woken for it).
    await db.sql`insert into private.worker_invocations (id, lease_expires_at, source) values (gen_random_uuid(), now() + interval '1 minute', 'test')`;
    const { runId } = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['url_redirects'] });
    expect(await wakes()).toBe(0); // the running invocation finds the job itself
    await db.sql`delete from private.worker_invocations where source = 'test'`;
    const [{ since }] = (await db.sql`select now() as since`) as unknown as [{ since: Date }];
    expect(await wakes()).toBe(1); // none runs and a job is due: woken
    await waitUntil(async () => (await db.sql`select status from public.runs where id = ${runId!}`)[0]!.status === 'completed', 30_000, 'the woken worker completed the run');
    // The invocation it started (logged when it ends, after its lanes linger).
    await waitUntil(async () => (await db.sql`select 1 from private.worker_invocation_log where source = 'cron_wake' and started_at >= ${since}`).length > 0,
      30_000, 'the woken invocation logged');
  }, 120_000);
});
