// One worker invocation: reconcile stuck runs, then claim and process jobs
// until the queue is empty or the invocation's budget is spent. The budget is
// wall clock (counted from the isolate's start, as the edge runtime counts it)
// and CPU (measured): a job checkpoints and is released before either runs out,
// and on `beforeunload` every job in flight is released at once.
import type { Sql } from '../../shared/db.ts';
import type { Platform } from '../../shared/edge-platform.ts';
import { createHubSpotClient, type HubSpotContentClient, type HubSpotClientOptions } from '../../shared/hubspot/client.ts';
import { HubSpotAccessRemoved, HubSpotError } from '../../shared/hubspot/errors.ts';
import { portalTokenSource } from '../../shared/hubspot/oauth-tokens.ts';
import { sharedRequestBudget, type RateLimitSettings } from '../../shared/hubspot-budget.ts';
import type { Logger } from '../../shared/log.ts';
import { claimableJobsExist, claimNextJob, failJob, heartbeatJob, reconcileStuckRuns, releaseJob, type ClaimedJob } from '../../shared/queue.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import { rotateCredentialsBatch } from '../../shared/token-rotation.ts';
import { processExportJob } from './export-job.ts';
import type { ExportSink } from './export-sink.ts';
import { processFetchJob } from './fetch-job.ts';
import { lost, PermanentJobError, releaseWithRetry, type JobContext, type JobOutcome, type UnitCost } from './job-context.ts';

export interface WorkerSettings {
  /** Wall-clock budget of one invocation in ms, from the request's start. */
  budgetMs: number;
  /** Jobs processed at once inside one invocation. */
  concurrency: number;
  /** Never start a job with less wall-clock time than this left. */
  minStartMs: number;
  /**
   * A slot that finds the queue empty waits for work (one cheap check every
   * LINGER_POLL_MS, shared by the idle slots of every invocation on the same
   * pool) while another slot of its invocation is busy, and for this long
   * after the invocation's last job ended, before it stops: work that arrives
   * meanwhile starts at once, without a wake-up request or a new isolate.
   * 0 (the default here; the function's own default is WORKER_LINGER_MS):
   * stop at once.
   */
  lingerMs?: number;
  /**
   * CPU budget in ms of the isolate's accumulated CPU (hosted: beforeunload at
   * 1.8 s, killed at 2 s). Undefined: no CPU budget (a long-lived Node process).
   */
  cpuBudgetMs?: number;
  /** The isolate's wall-clock limit in ms (hosted: 150 s free, 400 s paid); counted from Platform.isolateStartedAt. */
  isolateWallClockMs?: number;
  /** Wall clock kept in hand at the end of the isolate's life, for releasing and answering. */
  wallReserveMs?: number;
  hubspotBasePath?: string;
  rateLimit: RateLimitSettings;
  hubspotRequestTimeoutMs?: number;
  /** OAuth access tokens are refreshed this long before expiry (default 300 s, at most a quarter of their lifetime). */
  tokenRefreshMarginSeconds?: number;
}

/** Makes a HubSpot client; the worker passes the token, budget hook and deadline. */
export type HubSpotClientFactory = (options: HubSpotClientOptions) => HubSpotContentClient;

export interface WorkerRuntime {
  sql: Sql;
  log: Logger;
  exportSink: ExportSink;
  settings: WorkerSettings;
  now?: () => number;
  /** Builds HubSpot clients (default: the official client over HTTPS). */
  hubspot?: HubSpotClientFactory;
  /** The edge runtime's lifecycle: shutdown signal, isolate start, CPU clock. */
  platform?: Platform;
  /** Keys that open the sealed HubSpot tokens (HUBSPOT_TOKEN_KEYS); without them only legacy plaintext tokens work. */
  tokenKeys?: TokenKeyring | null;
  /** The HubSpot OAuth app, to refresh OAuth portals' access tokens. */
  oauthApp?: { clientId: string; clientSecret: string } | null;
}

/** Why an invocation stopped claiming. */
export type StopCause = 'queue_empty' | 'time_budget' | 'cpu_budget' | 'shutdown' | 'database_error';

export interface InvocationSummary {
  workerId: string;
  reconciled: number;
  claimed: number;
  completed: number;
  failed: number;
  retried: number;
  released: number;
  lost: number;
  durationMs: number;
  /** CPU ms the isolate used during the invocation (null where it cannot be measured). */
  cpuMs: number | null;
  /** The isolate's accumulated CPU ms when the invocation ended (null where it cannot be measured). */
  isolateCpuMs: number | null;
  /** The first reason the invocation stopped taking work. */
  stoppedBy: StopCause;
}

type Processor = (ctx: JobContext) => Promise<JobOutcome>;
const PROCESSORS: Record<string, Processor> = { fetch: processFetchJob, export: processExportJob };

/** How often lingering slots look for claimable work (one query per pool, i.e. per isolate, not per slot). */
export const LINGER_POLL_MS = 20;

/**
 * Idle slots waiting for work, of every invocation on one database pool (one
 * isolate). One poll loop serves them all: every LINGER_POLL_MS it asks
 * `claimable_jobs_exist`, and when there is work it wakes the longest waiting
 * slot and waits for that slot's claim; a claim that got a job is followed by
 * another check at once, for the next slot. So a new run's jobs are taken one
 * claim after another, never by every idle slot at once, and the isolate asks
 * once per interval however many of its invocations linger.
 */
class IdleSlots {
  private readonly waiting: { over: () => boolean; resolve: (woken: boolean) => void }[] = [];
  private polling = false;
  private claimDone: ((gotJob: boolean) => void) | null = null;
  private cutSleep: (() => void) | null = null;

  constructor(
    private readonly check: () => Promise<boolean>,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {}

  /**
   * Waits for claimable work: true when this slot should claim now (and must
   * then report what its claim found with `claimed`), false once `over` says
   * its invocation may linger no longer (checked at every poll).
   */
  wait(over: () => boolean): Promise<boolean> {
    if (over()) return Promise.resolve(false);
    const woken = new Promise<boolean>((resolve) => this.waiting.push({ over, resolve }));
    if (!this.polling) void this.poll();
    return woken;
  }

  /** Work may have just arrived (a wake-up request reached the isolate): check now instead of at the next poll. */
  nudge(): void {
    this.cutSleep?.();
  }

  /** What the claim of a woken slot found (called whatever happened after the wake). */
  claimed(gotJob: boolean): void {
    const done = this.claimDone;
    this.claimDone = null;
    done?.(gotJob);
  }

  /** Lets go (false) of every slot whose invocation stopped lingering, or of all of them. */
  private release(all = false): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!;
      if (all || w.over()) {
        this.waiting.splice(i, 1);
        w.resolve(false);
      }
    }
  }

  private async poll(): Promise<void> {
    this.polling = true;
    let again = false;
    try {
      for (;;) {
        if (!again) {
          await Promise.race([this.sleep(LINGER_POLL_MS), new Promise<void>((resolve) => (this.cutSleep = resolve))]);
          this.cutSleep = null;
        }
        again = false;
        this.release();
        if (this.waiting.length === 0) break;
        // A failing check ends the lingering: the slots stop as they would on an empty queue.
        const found = await this.check().catch(() => null);
        if (found === null) {
          this.release(true);
          break;
        }
        this.release();
        if (!found || this.waiting.length === 0) continue;
        const claim = new Promise<boolean>((resolve) => (this.claimDone = resolve));
        this.waiting.shift()!.resolve(true);
        again = await claim;
      }
    } finally {
      this.polling = false;
    }
  }
}

const idleSlotsByPool = new WeakMap<Sql, IdleSlots>();

/** Tells the isolate's lingering slots (if any) to look for work now: a wake-up request says there is some. */
export function nudgeIdleSlots(sql: Sql): void {
  idleSlotsByPool.get(sql)?.nudge();
}

/** The idle slots of the invocations sharing this pool (one poll loop per isolate). */
function idleSlotsOf(sql: Sql): IdleSlots {
  let idle = idleSlotsByPool.get(sql);
  if (!idle) {
    idle = new IdleSlots(() => claimableJobsExist(sql), (ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    idleSlotsByPool.set(sql, idle);
  }
  return idle;
}

/** After `beforeunload`, how long a job's processor may take to stop before its job is released anyway. */
const SHUTDOWN_SETTLE_MS = 1_000;

/** Margins, in ms: what a unit of work must leave in hand, at the least. */
const MIN_WALL_RESERVE_MS = 3_000;
const MIN_CPU_RESERVE_MS = 100;

/** Runs one invocation and returns its summary. */
export async function runWorkerInvocation(rt: WorkerRuntime, workerId: string): Promise<InvocationSummary> {
  const now = rt.now ?? Date.now;
  const s = rt.settings;
  const started = now();
  const isolateDeadline = rt.platform && s.isolateWallClockMs
    ? rt.platform.isolateStartedAt + s.isolateWallClockMs - (s.wallReserveMs ?? 10_000)
    : Infinity;
  const deadline = Math.min(started + s.budgetMs, isolateDeadline);
  const timeLeft = () => deadline - now();
  // The edge runtime accumulates CPU per isolate, across its requests: the
  // budget is the isolate's total, so a request landing on a busy isolate gets less.
  const cpuClock = rt.platform?.cpuMs ?? (() => null);
  const cpuAtStart = cpuClock();
  const isolateCpuMs = () => cpuClock() ?? 0;
  const cpuMs = () => isolateCpuMs() - (cpuAtStart ?? 0);
  const shutdown = rt.platform?.shutdown;
  let stoppedBy: StopCause | null = null;
  const stopWith = (cause: StopCause, reason: string) => {
    stoppedBy ??= cause;
    return reason;
  };

  /** Null when a unit of work of this cost still fits; else why not. */
  const stopReason = (next: UnitCost = {}): string | null => {
    if (shutdown?.aborted) return stopWith('shutdown', `isolate shutting down (${rt.platform?.shutdownReason() ?? 'unknown'})`);
    if (timeLeft() < Math.max(MIN_WALL_RESERVE_MS, (next.wallMs ?? 0) * 2)) return stopWith('time_budget', 'wall-clock budget spent');
    if (s.cpuBudgetMs !== undefined && cpuAtStart !== null
        && isolateCpuMs() + Math.max(MIN_CPU_RESERVE_MS, (next.cpuMs ?? 0) * 2) > s.cpuBudgetMs) {
      return stopWith('cpu_budget', 'CPU budget spent');
    }
    return null;
  };

  const summary: InvocationSummary = {
    workerId, reconciled: 0, claimed: 0, completed: 0, failed: 0, retried: 0, released: 0, lost: 0,
    durationMs: 0, cpuMs: null, isolateCpuMs: null, stoppedBy: 'queue_empty',
  };
  summary.reconciled = await reconcileStuckRuns(rt.sql);
  if (rt.tokenKeys) await rotateSealedTokens(rt, rt.tokenKeys);

  // Lingering: idle slots wait for work while a sibling is busy, and for
  // lingerMs after the invocation's last job ended.
  const lingerMs = s.lingerMs ?? 0;
  let busySlots = 0;
  let lastJobEndedAt = now();
  let handingBack = false; // a job was released for lack of budget: no slot lingers any more
  const idle = idleSlotsOf(rt.sql);
  const lingerOver = () => handingBack || stopReason({ wallMs: s.minStartMs / 2 }) !== null
    || (busySlots === 0 && now() - lastJobEndedAt >= lingerMs);

  const slot = async (slotNo: number) => {
    const slotWorkerId = s.concurrency > 1 ? `${workerId}/${slotNo}` : workerId;
    let woken = false; // woken by the idle poll: the claim's result is reported back to it
    const report = (gotJob: boolean) => {
      if (woken) idle.claimed(gotJob);
      woken = false;
    };
    try {
      while (stopReason({ wallMs: s.minStartMs / 2 }) === null) {
        const job = await claimNextJob(rt.sql, slotWorkerId);
        report(job !== null);
        if (!job) {
          if (lingerMs > 0 && (await idle.wait(lingerOver))) {
            woken = true;
            continue;
          }
          return;
        }
        summary.claimed++;
        busySlots++;
        let outcome: JobOutcome;
        try {
          outcome = await runOneJob(rt, job, slotWorkerId, { timeLeft, stopReason, cpuMs, now, shutdown });
        } finally {
          busySlots--;
          lastJobEndedAt = now();
        }
        summary[outcome.kind]++;
        // A job handed back for lack of budget is due again at once: claiming on would
        // take it straight back and release it again, in a busy loop.
        if (outcome.kind === 'released') {
          stopWith(shutdown?.aborted ? 'shutdown' : 'time_budget', 'released');
          handingBack = true;
          return;
        }
      }
    } finally {
      report(false); // woken but stopped (budget, error) before claiming
    }
  };
  // A slot whose database calls fail stops; the others finish their jobs before the invocation answers.
  const slots = await Promise.allSettled(Array.from({ length: Math.max(1, s.concurrency) }, (_, i) => slot(i)));
  const broken = slots.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  summary.durationMs = now() - started;
  summary.cpuMs = cpuAtStart === null ? null : Math.round(cpuMs());
  summary.isolateCpuMs = cpuAtStart === null ? null : Math.round(isolateCpuMs());
  summary.stoppedBy = broken ? 'database_error' : shutdown?.aborted ? 'shutdown' : (stoppedBy ?? 'queue_empty');
  if (broken) throw broken.reason;
  rt.log.info('worker_invocation_done', { ...summary });
  return summary;
}

interface Budget {
  timeLeft(): number;
  stopReason(next?: UnitCost): string | null;
  cpuMs(): number;
  now(): number;
  shutdown?: AbortSignal;
}

/** Processes one claimed job under a heartbeat and records its outcome in the database. */
async function runOneJob(rt: WorkerRuntime, job: ClaimedJob, workerId: string, budget: Budget): Promise<JobOutcome> {
  const { now } = budget;
  const log = rt.log.child({ job_id: job.id, run_id: job.runId, worker_id: workerId, kind: job.kind, content_type: job.contentType, attempt: job.attempts });
  const t0 = now();
  const stop = new AbortController();
  // On `beforeunload` the processor is stopped at once; once it has let go of
  // the connection (a cancelled COPY drained), or after SHUTDOWN_SETTLE_MS at
  // most, the job is released with the checkpoint it already stored. A release
  // that fails is tried again: the invocation never answers holding the job.
  let shuttingDown = false;
  let graceOver: () => void = () => {};
  const grace = new Promise<'grace'>((resolve) => (graceOver = () => resolve('grace')));
  const onShutdown = () => {
    shuttingDown = true;
    stop.abort();
    setTimeout(graceOver, SHUTDOWN_SETTLE_MS);
  };
  /** The job handed back after a shutdown, as the processor left it (outcome) or by this release. */
  const afterShutdown = async (outcome: JobOutcome | null): Promise<JobOutcome> => {
    // The processor already handed the job back (or finished it) itself.
    if (outcome && outcome.kind !== 'lost') return outcome;
    const result = await releaseWithRetry(rt.sql, job, {}, now() + leaseMs, log);
    if (result === 'failed') return { kind: 'failed', reason: 'released too often without progress (isolate shutting down)' };
    if (result !== 'released') return outcome ?? lost('lease lost before the shutdown release');
    log.info('job_released', { duration_ms: now() - t0, reason: 'isolate shutting down' });
    return { kind: 'released', reason: 'isolate shutting down' };
  };
  if (budget.shutdown?.aborted) onShutdown();
  else budget.shutdown?.addEventListener('abort', onShutdown, { once: true });
  // Lease length from the database's own clock (claim time vs expiry), so a skewed worker clock cannot stretch the beat.
  const leaseMs = Math.max(1000, job.leaseExpiresAt.getTime() - (job.claimedAt ?? new Date()).getTime());
  const beat = setInterval(() => {
    heartbeatJob(rt.sql, job).then(
      (held) => {
        if (!held) stop.abort();
      },
      (e) => log.warn('heartbeat_error', { error: String(e) }),
    );
  }, Math.min(30_000, Math.max(500, Math.floor(leaseMs / 3))));
  log.info('job_started', {});
  try {
    const processor = PROCESSORS[job.kind];
    if (!processor) throw new PermanentJobError(`No handler for job kind "${job.kind}".`);
    const ctx: JobContext = {
      sql: rt.sql,
      job,
      log,
      signal: stop.signal,
      timeLeft: budget.timeLeft,
      stopReason: budget.stopReason,
      cpuMs: budget.cpuMs,
      now,
      exportSink: rt.exportSink,
      hubspotForPortal: (portalId) => hubspotForPortal(rt, portalId, workerId, budget.timeLeft),
    };
    const processing = processor(ctx);
    const first = await Promise.race([processing, grace]);
    if (first === 'grace') {
      // The processor has not stopped: release now (retried while its query holds the connection).
      processing.catch(() => undefined);
      return await afterShutdown(null);
    }
    const outcome = first;
    if (shuttingDown && outcome.kind !== 'completed') return await afterShutdown(outcome);
    log.info(`job_${outcome.kind}`, { duration_ms: now() - t0, ...(outcome.kind !== 'completed' ? { reason: outcome.reason } : {}) });
    return outcome;
  } catch (e) {
    if (shuttingDown) return await afterShutdown(null);
    const permanent = e instanceof PermanentJobError || (e instanceof HubSpotError && !e.retryable);
    const message = e instanceof Error ? e.message : String(e);
    // If even recording the failure fails (database unreachable), the lease
    // expires and another invocation reclaims the job from its checkpoint.
    // The database decides retry or fail (attempts, backoff) and says which.
    let decided = await failJob(rt.sql, job, message, !permanent).catch((dbError: unknown) => {
      log.error('job_failure_not_recorded', { error: message, db_error: dbError instanceof Error ? dbError.message : String(dbError) });
      return 'lost' as const;
    });
    // The portal's disconnection already failed the job for good (with this message, no retry; its attempt count as it was).
    if (decided === 'lost' && e instanceof HubSpotAccessRemoved) decided = 'failed';
    log.warn('job_failed', { duration_ms: now() - t0, error: message, retryable: !permanent, outcome: decided });
    return decided === 'lost' ? lost(`failure not recorded: the job was no longer ours (${message})`) : { kind: decided, reason: message };
  } finally {
    clearInterval(beat);
    budget.shutdown?.removeEventListener('abort', onShutdown);
  }
}

/**
 * A HubSpot client for the portal: its token from the portal's token source (sealed
 * in the database, OAuth tokens refreshed once for every worker), every request
 * drawing on the portal's shared request budget, its waits capped by the time left.
 */
async function hubspotForPortal(rt: WorkerRuntime, portalId: string, workerId: string, timeLeft: () => number): Promise<HubSpotContentClient> {
  const s = rt.settings;
  const tokens = await portalTokenSource({
    sql: rt.sql,
    keys: rt.tokenKeys ?? null,
    oauthApp: rt.oauthApp ?? null,
    holderId: workerId,
    basePath: s.hubspotBasePath,
    rateLimit: s.rateLimit,
    timeLeft,
    requestTimeoutMs: s.hubspotRequestTimeoutMs,
    refreshMarginSeconds: s.tokenRefreshMarginSeconds,
    // Once per isolate while HubSpot keeps refusing the app's client id or secret (the operator's to fix).
    onAppRejected: (e) => rt.log.error('hubspot_oauth_app_rejected', { error: e.message, status: e.status, code: e.category }),
  }, portalId);
  if (!tokens) throw new PermanentJobError('The portal has no HubSpot connection: reconnect HubSpot and try again.');
  const make = rt.hubspot ?? createHubSpotClient;
  return make({
    tokens,
    basePath: s.hubspotBasePath,
    requestTimeoutMs: s.hubspotRequestTimeoutMs,
    beforeRequest: sharedRequestBudget(rt.sql, tokens.hubspotPortalId, s.rateLimit, undefined, timeLeft),
    timeLeft,
  } as HubSpotClientOptions);
}

/**
 * One bounded batch of the key rotation (credentials under an older key, or
 * legacy plaintext, sealed under the current key). A failure is logged, never
 * fatal: the next invocation tries again.
 */
async function rotateSealedTokens(rt: WorkerRuntime, keys: TokenKeyring): Promise<void> {
  try {
    const batch = await rotateCredentialsBatch(rt.sql, keys);
    if (batch.seen > 0) rt.log.info('token_rotation_batch', { ...batch, unreadablePortals: batch.unreadablePortals.slice(0, 20), key_id: keys.currentKeyId });
  } catch (e) {
    rt.log.warn('token_rotation_error', { error: e instanceof Error ? e.message : String(e) });
  }
}
