// The local cron: what pg_cron and pg_net do on a hosted project, for a local
// database that has neither (npm start, the bench, tests). It installs small
// stand-ins (local/cron/stand-ins.sql: cron.schedule records jobs
// in cron.job, net.http_post queues requests, Vault holds project_url and
// worker_secret), runs the cron.schedule statements of the schema's own cron
// files (supabase/schemas/09xx_cron_*.sql) as written there, then executes
// every cron.job command on its schedule and sends the queued HTTP requests.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { firesInMinute, parseCronSchedule, type CronSchedule } from './schedule.ts';
import { PROJECT_ROOT, SCHEMAS_DIR } from '../postgres.ts';

const STAND_INS_SQL = path.join(PROJECT_ROOT, 'local/cron/stand-ins.sql');
const CRON_FILE = /^09\d\d_cron_.+\.sql$/;
const TICK_MS = 250;
const KEEP_RUNS = 1_000;

export interface CronJob {
  jobid: number;
  jobname: string;
  schedule: string;
  command: string;
}

/** One execution of a job's command, as cron.job_run_details records it. */
export interface CronRun {
  jobname: string;
  /** The local cron's clock (opts.now) when the run started. */
  startedAt: number;
  ms: number;
  status: 'succeeded' | 'failed';
  message: string;
}

export interface LocalCron {
  /** The jobs in cron.job, as last read (at start and at every minute). */
  jobs(): readonly CronJob[];
  /** The most recent runs, oldest first. */
  runs(): readonly CronRun[];
  /** HTTP requests sent for net.http_post, and how many failed (no answer or a 5xx). */
  requests(): { sent: number; failed: number };
  stop(): Promise<void>;
}

export interface LocalCronOptions {
  /** What Vault's project_url says: the local SUPABASE_URL (the functions' gateway). */
  projectUrl: string;
  /** What Vault's worker_secret says: the worker's WORKER_SECRET. */
  workerSecret: string;
  /** The cron's clock (default Date.now); a test may shift it to reach a minute's start sooner. */
  now?: () => number;
  log?: (line: string) => void;
}

/** Whether a schema file schedules a cron job (09xx_cron_*.sql): the cron migration's files, which the local cron runs. */
export function isCronJobFile(name: string): boolean {
  return CRON_FILE.test(name);
}

/** Creates the stand-ins for pg_cron, pg_net and Vault (local/cron/stand-ins.sql) in the database `sql` is on; idempotent. */
export async function installCronStandIns(sql: Sql): Promise<void> {
  await sql.unsafe(await readFile(STAND_INS_SQL, 'utf8'));
}

/** The cron.schedule(…) statements of the schema's cron files, exactly as written there (each file's `$sql$ … $sql$` block). */
export async function schemaCronStatements(dir: string = SCHEMAS_DIR): Promise<{ file: string; statement: string }[]> {
  const files = (await readdir(dir)).filter(isCronJobFile).sort();
  const out: { file: string; statement: string }[] = [];
  for (const file of files) {
    const text = await readFile(path.join(dir, file), 'utf8');
    const blocks = [...text.matchAll(/\$sql\$([\s\S]*?)\$sql\$/g)].map((m) => m[1]!).filter((b) => /\bcron\.schedule\s*\(/.test(b));
    if (blocks.length === 0) throw new Error(`local cron: ${file} has no $sql$ … $sql$ block calling cron.schedule; the local cron cannot run it`);
    for (const statement of blocks) out.push({ file, statement });
  }
  return out;
}

/** Installs the stand-ins and the schema's cron jobs in the database at `dbUrl` (a role that may create schemas), then runs them. */
export async function startLocalCron(dbUrl: string, opts: LocalCronOptions): Promise<LocalCron> {
  const now = opts.now ?? Date.now;
  const log = opts.log ?? (() => {});
  const sql: Sql = connectDatabase(dbUrl, { max: 4, applicationName: 'local-cron' });
  try {
    await installCronStandIns(sql);
    await sql`select vault.create_secret(${opts.projectUrl.replace(/\/$/, '')}, 'project_url')`;
    await sql`select vault.create_secret(${opts.workerSecret}, 'worker_secret')`;
    for (const { statement } of await schemaCronStatements()) await sql.unsafe(statement);
  } catch (e) {
    await sql.end({ timeout: 2 });
    throw e;
  }

  let jobs: (CronJob & { parsed: CronSchedule })[] = [];
  const loadJobs = async () => {
    const rows = await sql`select jobid::int, jobname, schedule, command from cron.job where active order by jobid`;
    jobs = rows.map((r) => ({ jobid: r.jobid as number, jobname: r.jobname as string, schedule: r.schedule as string, command: r.command as string,
      parsed: parseCronSchedule(r.schedule as string) }));
  };
  await loadJobs();

  const runs: CronRun[] = [];
  const running = new Set<number>();
  const lastSecondsRun = new Map<number, number>();
  const inFlight = new Set<Promise<unknown>>();
  const requests = { sent: 0, failed: 0 };
  let draining = false;
  let on = true;
  const track = (p: Promise<unknown>) => {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };

  /** Sends what net.http_post queued (after the queuing transaction committed), recording each answer in net._http_response. */
  const drain = async () => {
    if (draining) return;
    draining = true;
    try {
      for (;;) {
        const queued = await sql`delete from net.http_request_queue where id in (select id from net.http_request_queue order by id limit 100)
                                 returning id, method, url, headers, body, timeout_milliseconds`;
        if (queued.length === 0) return;
        await Promise.all(queued.map(async (q) => {
          let status: number | null = null;
          let content: string | null = null;
          let error: string | null = null;
          try {
            const res = await fetch(q.url as string, {
              method: q.method as string, headers: q.headers as Record<string, string>,
              body: q.body === null ? undefined : JSON.stringify(q.body), signal: AbortSignal.timeout(q.timeout_milliseconds as number),
            });
            status = res.status;
            content = (await res.text()).slice(0, 2_000);
          } catch (e) {
            error = e instanceof Error ? e.message : String(e);
          }
          requests.sent++;
          if (status === null || status >= 500) requests.failed++;
          await sql`insert into net._http_response (id, status_code, content, error_msg) values (${q.id as string}, ${status}, ${content}, ${error})
                    on conflict (id) do nothing`;
        }));
      }
    } catch (e) {
      log(`local cron: sending net.http_post requests failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      draining = false;
    }
  };

  /** Runs a job's command once (never two runs of one job at once, as pg_cron), recorded in cron.job_run_details. */
  const launch = (job: CronJob) => {
    if (running.has(job.jobid)) return;
    running.add(job.jobid);
    const startedAt = now();
    track((async () => {
      let status: CronRun['status'] = 'succeeded';
      let message = '';
      const [detail] = await sql`insert into cron.job_run_details (jobid, command, status) values (${job.jobid}, ${job.command}, 'running') returning runid`;
      try {
        const result = await sql.unsafe(job.command);
        message = `${result.count ?? 0} rows`;
      } catch (e) {
        status = 'failed';
        message = e instanceof Error ? e.message : String(e);
        log(`local cron: job ${job.jobname} failed: ${message}`);
      }
      await sql`update cron.job_run_details set status = ${status}, return_message = ${message}, end_time = now() where runid = ${detail!.runid as string}`;
      runs.push({ jobname: job.jobname, startedAt, ms: now() - startedAt, status, message });
      if (runs.length > KEEP_RUNS) runs.splice(0, runs.length - KEEP_RUNS);
      await drain();
    })().catch((e: unknown) => log(`local cron: job ${job.jobname} not recorded: ${e instanceof Error ? e.message : String(e)}`))
      .finally(() => running.delete(job.jobid)));
  };

  // A job fires at the start of each minute its schedule names (not in the minute the cron started in, as pg_cron).
  let lastMinute = Math.floor(now() / 60_000);
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    const t = now();
    const minute = Math.floor(t / 60_000);
    if (minute !== lastMinute) {
      lastMinute = minute;
      await loadJobs().catch((e: unknown) => log(`local cron: reading cron.job failed: ${e instanceof Error ? e.message : String(e)}`));
      for (const job of jobs) if (job.parsed.kind === 'fields' && firesInMinute(job.parsed, minute * 60_000)) launch(job);
    }
    for (const job of jobs) {
      if (job.parsed.kind !== 'seconds') continue;
      const last = lastSecondsRun.get(job.jobid);
      if (last === undefined) lastSecondsRun.set(job.jobid, t);
      else if (t - last >= job.parsed.every * 1000) {
        lastSecondsRun.set(job.jobid, t);
        launch(job);
      }
    }
    track(drain()); // requests queued by anything else (a function calling net.http_post)
  };
  const loop = () => {
    if (!on) return;
    void tick().finally(() => {
      if (on) timer = setTimeout(loop, TICK_MS);
    });
  };
  timer = setTimeout(loop, TICK_MS);

  return {
    jobs: () => jobs.map(({ parsed: _parsed, ...j }) => j),
    runs: () => [...runs],
    requests: () => ({ ...requests }),
    async stop() {
      on = false;
      clearTimeout(timer);
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
      await sql.end({ timeout: 5 });
    },
  };
}
