// The schema's pg_cron jobs after a deploy (decision 0069), against the local
// pg_cron stand-in (local/cron/stand-ins.sql: cron.job,
// cron.job_run_details, cron.alter_job), with the jobs scheduled by the cron
// files' own statements: sub-minute schedules only where pg_cron takes them
// (private.cron_interval), and public.heal_cron_jobs, which touches the jobs
// once when none ran for heal_after since they were scheduled, never when one
// did, and is one cheap read otherwise; the worker and the orchestrator call
// it and log a touch. Time is moved by back-dating scheduled_at.
import postgres from 'postgres';
import { beforeEach, describe, expect, it } from 'vitest';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { runWorkerInvocation } from '../functions/worker/invocation.ts';
import { createSigningKeys } from '../local/supabase.ts';
import { installCronStandIns, schemaCronStatements } from '../local/cron/cron.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { createLogger, type Logger } from '../shared/log.ts';
import { healCronJobs } from '../shared/sql/ops.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { testWorkerRuntime } from './support/worker-runtime.ts';

const db = useTestDatabase();
const JOBS = ['invoke-queue-worker', 'wake-queue-worker', 'prune-queue-history', 'prune-oauth-install-states'];

/** A logger that keeps each line's event and fields. */
function capturingLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: createLogger({ write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>) }), lines };
}

/** The jobs' updates (what a touch is), as a trigger on cron.job records them. */
async function touches(): Promise<string[]> {
  return (await db.sql`select jobname from cron_jobs_test.touches order by id`).map((r) => r.jobname as string);
}

/** The cron jobs' time: `heal_after` and a second ago, as if the migration had run then. */
async function scheduledLongAgo(): Promise<void> {
  await db.sql`update private.cron_jobs_scheduled set scheduled_at = now() - heal_after - interval '1 second'`;
}

beforeEach(async () => {
  // The stand-ins (as the local cron installs them), nothing scheduled or run yet, and a record of every update of cron.job.
  await installCronStandIns(db.sql);
  await db.sql.unsafe(`
    truncate cron.job, cron.job_run_details, private.cron_jobs_scheduled;
    create schema if not exists cron_jobs_test;
    create table if not exists cron_jobs_test.touches (id bigserial primary key, jobname text not null);
    truncate cron_jobs_test.touches;
    create or replace function cron_jobs_test.record_touch() returns trigger language plpgsql as $$
    begin
      insert into cron_jobs_test.touches (jobname) values (new.jobname);
      return new;
    end $$;
    create or replace trigger record_touch after update on cron.job for each row execute function cron_jobs_test.record_touch();`);
  // The cron migration's own statements, as the 09xx_cron files schedule the jobs.
  for (const { statement } of await schemaCronStatements()) await db.sql.unsafe(statement);
});

describe('the cron files', () => {
  it('schedule the four jobs and record when (the stand-in takes sub-minute schedules)', async () => {
    const jobs = await db.sql`select j.jobname, j.schedule, s.settled_at from cron.job j join private.cron_jobs_scheduled s using (jobname) order by j.jobid`;
    expect(jobs.map((j) => `${j.jobname} ${j.schedule}`)).toEqual([
      'invoke-queue-worker * * * * *', 'wake-queue-worker 10 seconds', 'prune-queue-history 20 seconds', 'prune-oauth-install-states */5 * * * *',
    ]);
    expect(jobs.every((j) => j.settled_at === null)).toBe(true);
  });
});

describe('private.cron_interval: sub-minute schedules from pg_cron 1.5, every minute before', () => {
  it('gives the seconds on 1.5 and later (and where no pg_cron is installed), a minute with a notice before', async () => {
    const notices: string[] = [];
    const sql = postgres(db.url, { max: 1, prepare: false, onnotice: (n) => notices.push(String(n.message)) });
    try {
      const interval = async (seconds: number, version: string | null) =>
        ((await sql`select private.cron_interval(${seconds}::int, ${version}::text) as schedule`)[0]!.schedule as string);
      // Debian 12's postgresql-15-cron reports 1.4-1; hosted Supabase 1.6.
      expect(await interval(10, '1.4-1')).toBe('* * * * *');
      expect(await interval(20, '1.3')).toBe('* * * * *');
      expect(await interval(10, 'unknown')).toBe('* * * * *');
      expect(notices).toEqual([
        'pg_cron 1.4-1 takes no sub-minute schedules (they came in 1.5): a job meant to run every 10 seconds runs every minute',
        'pg_cron 1.3 takes no sub-minute schedules (they came in 1.5): a job meant to run every 20 seconds runs every minute',
        'pg_cron unknown takes no sub-minute schedules (they came in 1.5): a job meant to run every 10 seconds runs every minute',
      ]);
      notices.length = 0;
      for (const version of ['1.5', '1.6', '1.6.4', '1.10', '2.0']) expect(await interval(10, version)).toBe('10 seconds');
      expect(notices).toEqual([]);
      // No pg_cron extension here (the stand-in): the seconds, which the local cron runs.
      expect(await interval(20, null)).toBe('20 seconds');
      await expect(interval(60, '1.6')).rejects.toThrow(/60 seconds; pg_cron takes 1 to 59/);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

describe('public.heal_cron_jobs', () => {
  it('touches jobs that never ran once, after heal_after, whichever of many concurrent callers comes first', async () => {
    expect(await healCronJobs(db.sql)).toBeNull(); // scheduled just now: not yet
    // A run from before the jobs were scheduled says nothing about the launcher since.
    await db.sql`insert into cron.job_run_details (jobid, command, status, start_time)
                 select jobid, command, 'succeeded', now() - interval '1 hour' from cron.job where jobname = 'invoke-queue-worker'`;
    await scheduledLongAgo();
    const callers = db.connect(8);
    const results = await Promise.all(Array.from({ length: 8 }, () => healCronJobs(callers)));
    const healed = results.filter((r) => r !== null);
    expect(healed).toHaveLength(1);
    expect(healed[0]).toMatchObject({ touched: JOBS, error: null });
    expect(healed[0]!.noRunForSeconds).toBeGreaterThanOrEqual(180);
    expect(await touches()).toEqual(JOBS); // each job updated once: the touch
    const rows = await db.sql`select jobname from private.cron_jobs_scheduled where settled_at is not null and touched_at is not null`;
    expect(rows).toHaveLength(4);
    // Once healed: nothing more, however often it is asked.
    expect(await Promise.all(Array.from({ length: 4 }, () => healCronJobs(callers)))).toEqual([null, null, null, null]);
    expect(await touches()).toEqual(JOBS);
    expect(await db.sql`select jobname from cron.job where not active`).toEqual([]);
  });

  it('never touches jobs that ran since they were scheduled', async () => {
    // The five-minute job ran (the launcher has the jobs); the others have not come round yet.
    await db.sql`insert into cron.job_run_details (jobid, command, status, start_time)
                 select jobid, command, 'succeeded', now() from cron.job where jobname = 'prune-oauth-install-states'`;
    await scheduledLongAgo();
    expect(await healCronJobs(db.sql)).toBeNull();
    expect(await touches()).toEqual([]);
    const settled = await db.sql`select jobname from private.cron_jobs_scheduled where settled_at is not null and touched_at is null`;
    expect(settled).toHaveLength(4);
    expect(await healCronJobs(db.sql)).toBeNull();
    expect(await touches()).toEqual([]);
  });

  it('reads nothing of pg_cron when nothing is due, or once the jobs are settled', async () => {
    /** heal_cron_jobs while another transaction holds pg_cron's tables: blocked (lock_timeout) if it read them. */
    const healWhileCronLocked = async () => {
      const holder = connectDatabase(db.url, { max: 1 });
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holding = holder.begin(async (tx) => {
        await tx`lock table cron.job, cron.job_run_details in access exclusive mode`;
        locked();
        await held;
      });
      try {
        await isLocked;
        return await db.sql.begin(async (tx) => {
          await tx`set local lock_timeout = '2s'`;
          return await healCronJobs(tx as unknown as Sql);
        });
      } finally {
        release();
        await holding;
        await holder.end({ timeout: 5 });
      }
    };
    expect(await healWhileCronLocked()).toBeNull(); // scheduled just now: not due
    await scheduledLongAgo();
    await expect(healWhileCronLocked()).rejects.toThrow(/lock timeout/); // due: it does look (so the check above can fail)
    expect(await healCronJobs(db.sql)).toMatchObject({ touched: JOBS });
    expect(await healWhileCronLocked()).toBeNull(); // healed: the one cheap read again
  });

  it('does nothing with cron.log_run off: pg_cron records no runs, so silence says nothing', async () => {
    await scheduledLongAgo();
    const healed = await db.sql.begin(async (tx) => {
      await tx`set local cron.log_run = off`;
      return await healCronJobs(tx as unknown as Sql);
    });
    expect(healed).toBeNull();
    expect(await touches()).toEqual([]);
    expect(await db.sql`select 1 from private.cron_jobs_scheduled where settled_at is not null`).toEqual([]);
    // With it on (pg_cron's default), the same jobs are touched.
    expect(await healCronJobs(db.sql)).toMatchObject({ touched: JOBS });
  });

  it('leaves a job an operator deactivated as it is', async () => {
    await db.sql`update cron.job set active = false where jobname = 'wake-queue-worker'`;
    await db.sql`truncate cron_jobs_test.touches`;
    await scheduledLongAgo();
    expect(await healCronJobs(db.sql)).toMatchObject({ touched: JOBS.filter((j) => j !== 'wake-queue-worker') });
    expect(await db.sql`select jobname from cron.job where not active`).toEqual([{ jobname: 'wake-queue-worker' }]);
  });

  it('reports a touch that failed once, leaving the jobs as they were', async () => {
    // As where the role may not call cron.alter_job.
    await db.sql.unsafe(`create or replace function cron.alter_job(job_id bigint, schedule text default null, command text default null,
      database text default null, username text default null, active boolean default null) returns void language plpgsql
      as $$ begin raise exception 'permission denied for function alter_job' using errcode = '42501'; end $$`);
    await scheduledLongAgo();
    expect(await healCronJobs(db.sql)).toMatchObject({ touched: [], error: 'permission denied for function alter_job' });
    expect(await healCronJobs(db.sql)).toBeNull();
    expect(await touches()).toEqual([]);
  });

  it('is for the service role only', async () => {
    const rows = await db.sql`select r.rolname, has_function_privilege(r.rolname, 'public.heal_cron_jobs()', 'execute') as may
                                from pg_roles r where r.rolname in ('anon', 'authenticated', 'service_role') order by 1`;
    expect(rows.map((r) => `${r.rolname} ${r.may}`)).toEqual(['anon false', 'authenticated false', 'service_role true']);
  });
});

describe('whatever wakes next heals', () => {
  it('a worker invocation touches jobs that never ran, and logs it once', async () => {
    await scheduledLongAgo();
    const { log, lines } = capturingLogger();
    const rt = await testWorkerRuntime(db.sql, 'http://127.0.0.1:9', {}, log);
    await runWorkerInvocation(rt, 'worker-cron-heal-1');
    await runWorkerInvocation(rt, 'worker-cron-heal-2');
    const healed = lines.filter((l) => String(l.event).startsWith('cron_'));
    expect(healed.map((l) => [l.level, l.event, l.jobs])).toEqual([['warn', 'cron_jobs_touched', JOBS]]);
    expect(await touches()).toEqual(JOBS);
  });

  it('an orchestrator request touches them too, and logs it', async () => {
    await scheduledLongAgo();
    const { log, lines } = capturingLogger();
    const keys = await createSigningKeys();
    const handler = createOrchestratorHandler({
      sql: db.sql, log, maxBodyBytes: 4096, verifyUser: createUserVerifier({ jwks: keys.jwks }),
      hubspotClient: () => { throw new Error('no HubSpot here'); }, portalTokens: async () => null, tokenKeys: null, wakeWorker: () => {},
    });
    const token = await keys.signUserToken(await createUser(db.sql));
    const list = () => handler(new Request('http://127.0.0.1/functions/v1/orchestrator/portals', { headers: { Authorization: `Bearer ${token}` } }));
    expect((await list()).status).toBe(200);
    expect((await list()).status).toBe(200);
    expect(lines.filter((l) => String(l.event).startsWith('cron_')).map((l) => [l.event, l.jobs])).toEqual([['cron_jobs_touched', JOBS]]);
    expect(await touches()).toEqual(JOBS);
  });
});
