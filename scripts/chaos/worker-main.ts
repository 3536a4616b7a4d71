// A queue worker as its own OS process, for tests and the chaos driver that
// SIGKILL / SIGSTOP it: loops runWorkerInvocation with a short budget against
// the database and HubSpot (simulator) named by the environment.
//
// Writes one JSON line per event to stdout: the worker's own log lines, plus
//   {"event":"chaos_worker_ready"}                       once connected
//   {"event":"db_call","fn":...,"job_id":...,"token":...,"ok":bool}
//                                                        every fenced queue call and its outcome
//   {"event":"chaos_invocation_error","error":...}       an invocation that threw (e.g. Postgres down)
// Exits when its stdin closes (the parent died), on SIGTERM, or (CHAOS_EXIT_WHEN_IDLE=1) when an
// invocation found nothing to do.
//
// Environment: CHAOS_DB_URL, CHAOS_HUBSPOT_URL, CHAOS_WORKER_ID, CHAOS_EXPORT_DIR, and
// HUBSPOT_TOKEN_KEYS (the keys that open the sealed tokens, as the worker function takes them) (required);
// CHAOS_BUDGET_MS (20000), CHAOS_MIN_START_MS (1000), CHAOS_LANES (1), CHAOS_POOL_MAX (3),
// CHAOS_IDLE_MS (250), CHAOS_REQUEST_TIMEOUT_MS (10000), CHAOS_RATE_LIMIT_PER_10S (190),
// CHAOS_MAX_SLEEP_MS (cap on the HubSpot client's retry sleeps; default uncapped),
// CHAOS_EXIT_WHEN_IDLE (0).
import { localDirectorySink } from '../../functions/worker/local-sink.ts';
import { runWorkerInvocation, type WorkerRuntime } from '../../functions/worker/invocation.ts';
import { connectDatabase, type Sql } from '../../shared/db.ts';
import { createHubSpotClient } from '../../shared/hubspot/client.ts';
import { configSecrets, tokenKeys } from '../../shared/config.ts';
import { createLogger } from '../../shared/log.ts';
import { isPostgresTypeFetchFailure } from '../lib/known-upstream-errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';

function required(name: string): string {
  const v = process.env[name];
  if (!v) {
    process.stderr.write(`chaos-worker: ${name} is required\n`);
    process.exit(2);
  }
  return v;
}
const num = (name: string, dflt: number) => {
  const v = process.env[name];
  return v === undefined || v === '' ? dflt : Number(v);
};

const dbUrl = required('CHAOS_DB_URL');
const hubspotUrl = required('CHAOS_HUBSPOT_URL');
const workerId = required('CHAOS_WORKER_ID');
const exportDir = required('CHAOS_EXPORT_DIR');
const tokenKeysValue = required('HUBSPOT_TOKEN_KEYS');
const budgetMs = num('CHAOS_BUDGET_MS', 20_000);
const minStartMs = num('CHAOS_MIN_START_MS', 1_000);
const lanes = num('CHAOS_LANES', 1);
const poolMax = num('CHAOS_POOL_MAX', 3);
const idleMs = num('CHAOS_IDLE_MS', 250);
const requestTimeoutMs = num('CHAOS_REQUEST_TIMEOUT_MS', 10_000);
const ratePer10s = num('CHAOS_RATE_LIMIT_PER_10S', 190);
const maxSleepMs = process.env.CHAOS_MAX_SLEEP_MS ? Number(process.env.CHAOS_MAX_SLEEP_MS) : null;
const exitWhenIdle = process.env.CHAOS_EXIT_WHEN_IDLE === '1';

// stdout is a pipe: synchronous on Linux, so nothing written is lost on SIGKILL.
const write = (line: string) => process.stdout.write(`${line}\n`);
const log = createLogger({ base: { worker: workerId, pid: process.pid }, secrets: configSecrets({ SUPABASE_DB_URL: dbUrl, HUBSPOT_TOKEN_KEYS: tokenKeysValue }), write });
const emit = (event: string, fields: Record<string, unknown> = {}) => log.info(event, fields);

/** The queue calls whose outcome says whether this worker still held the job. */
const FENCED_CALLS: { fn: string; ok: (row: Record<string, unknown> | undefined) => boolean }[] = [
  { fn: 'save_fetched_page_raw', ok: (r) => r?.counts != null },
  { fn: 'complete_fetch_job', ok: (r) => r?.ok === true },
  { fn: 'complete_job', ok: (r) => r?.ok === true },
  { fn: 'fail_job', ok: (r) => r?.status != null },
  { fn: 'release_job', ok: (r) => r?.result != null },
  { fn: 'heartbeat_job', ok: (r) => r?.ok === true },
];

/** Wraps the pool so every fenced call (and every claim) reports its outcome as a db_call line. */
function instrument(sql: Sql): Sql {
  return new Proxy(sql, {
    apply(target, thisArg, args: unknown[]) {
      const query = Reflect.apply(target as never, thisArg, args) as Promise<Record<string, unknown>[]>;
      const strings = args[0] as readonly string[] | undefined;
      if (!Array.isArray(strings)) return query;
      const text = strings.join('$');
      if (text.includes('public.claim_jobs(')) {
        query.then(
          (rows) => {
            for (const r of rows) emit('db_call', { fn: 'claim', job_id: String(r.id), fencing_token: String(r.fencing_token), attempt: r.attempts, ok: true });
          },
          () => {},
        );
        return query;
      }
      const call = FENCED_CALLS.find((c) => text.includes(`public.${c.fn}(`));
      if (!call) return query;
      const jobId = String(args[1]);
      const token = String(args[2]);
      // When the call was sent: a process frozen between its answer and this line logs it late.
      const sent = new Date().toISOString();
      query.then(
        (rows) => emit('db_call', { fn: call.fn, job_id: jobId, fencing_token: token, sent_at: sent, ok: call.ok(rows[0]), ...(call.fn === 'fail_job' ? { retryable: args[4] } : {}) }),
        (e: unknown) => emit('db_call', { fn: call.fn, job_id: jobId, fencing_token: token, sent_at: sent, ok: false, error: e instanceof Error ? e.message : String(e) }),
      );
      return query;
    },
  });
}

const pool = connectDatabase(dbUrl, { max: poolMax, applicationName: `chaos-worker ${workerId}` });
const sql = instrument(pool);
const runtime: WorkerRuntime = {
  sql,
  log,
  exportSink: localDirectorySink(exportDir),
  settings: {
    budgetMs,
    lanes,
    minStartMs,
    hubspotBasePath: hubspotUrl,
    rateLimit: { maxPer10s: ratePer10s },
    hubspotRequestTimeoutMs: requestTimeoutMs,
  },
  hubspot: maxSleepMs === null ? undefined : (o) => createHubSpotClient({ ...o, sleep: (ms) => sleep(Math.min(ms, maxSleepMs)) }),
  tokenKeys: tokenKeys({ HUBSPOT_TOKEN_KEYS: tokenKeysValue }),
};

let stopping = false;
const shutdown = (code: number) => {
  if (stopping) return;
  stopping = true;
  emit('chaos_worker_exit', { code });
  void pool.end({ timeout: 1 }).finally(() => process.exit(code));
  setTimeout(() => process.exit(code), 2000).unref();
};
process.on('SIGTERM', () => shutdown(0));
process.stdin.on('end', () => shutdown(0));
process.stdin.on('error', () => shutdown(0));
process.stdin.resume();
// postgres.js's own array-type query, cut off with its connection, is known upstream (known-upstream-errors.ts): counted, not a violation.
process.on('unhandledRejection', (e) => emit('chaos_unhandled_rejection', {
  error: e instanceof Error ? e.message : String(e), knownUpstream: isPostgresTypeFetchFailure(e),
}));

for (let n = 0; ; n++) {
  try {
    await pool`select 1`;
    break;
  } catch (e) {
    if (n >= 100) {
      emit('chaos_worker_exit', { code: 3, error: e instanceof Error ? e.message : String(e) });
      process.exit(3);
    }
    await sleep(200);
  }
}
emit('chaos_worker_ready', {});

let invocation = 0;
while (!stopping) {
  invocation++;
  try {
    const summary = await runWorkerInvocation(runtime, workerId);
    if (summary.claimed === 0) {
      if (exitWhenIdle) shutdown(0);
      else await sleep(idleMs);
    }
  } catch (e) {
    emit('chaos_invocation_error', { invocation, error: e instanceof Error ? e.message : String(e) });
    await sleep(idleMs);
  }
}
