// One worker invocation: reconcile stuck runs, then claim and process jobs
// until the queue is empty or the wall-clock budget would be exceeded.
import type { Sql } from '../../shared/db.ts';
import { createHubSpotClient, type HubSpotContentClient, type HubSpotClientOptions } from '../../shared/hubspot/client.ts';
import { HubSpotError } from '../../shared/hubspot/errors.ts';
import { sharedRequestBudget, type RateLimitSettings } from '../../shared/hubspot-budget.ts';
import type { Logger } from '../../shared/log.ts';
import { claimNextJob, failJob, heartbeatJob, portalCredentials, reconcileStuckRuns, type ClaimedJob } from '../../shared/queue.ts';
import { processExportJob } from './export-job.ts';
import type { ExportSink } from './export-sink.ts';
import { processFetchJob } from './fetch-job.ts';
import { PermanentJobError, type JobContext, type JobOutcome } from './job-context.ts';

export interface WorkerSettings {
  /** Wall-clock budget of one invocation in ms (default leaves a margin under the 150 s limit). */
  budgetMs: number;
  /** Jobs processed at once inside one invocation. */
  concurrency: number;
  /** Never start a job with less time than this left. */
  minStartMs: number;
  hubspotBasePath?: string;
  rateLimit: RateLimitSettings;
  hubspotRequestTimeoutMs?: number;
}

export interface WorkerRuntime {
  sql: Sql;
  log: Logger;
  exportSink: ExportSink;
  settings: WorkerSettings;
  now?: () => number;
  /** For tests: extra options for the HubSpot client (retry sleeps, say). */
  hubspotClientOptions?: Partial<HubSpotClientOptions>;
}

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
}

type Processor = (ctx: JobContext) => Promise<JobOutcome>;
const PROCESSORS: Record<string, Processor> = { fetch: processFetchJob, export: processExportJob };

/** Runs one invocation and returns its summary. */
export async function runWorkerInvocation(rt: WorkerRuntime, workerId: string): Promise<InvocationSummary> {
  const now = rt.now ?? Date.now;
  const started = now();
  const deadline = started + rt.settings.budgetMs;
  const timeLeft = () => deadline - now();
  const summary: InvocationSummary = { workerId, reconciled: 0, claimed: 0, completed: 0, failed: 0, retried: 0, released: 0, lost: 0, durationMs: 0 };
  summary.reconciled = await reconcileStuckRuns(rt.sql);

  const slot = async (slotNo: number) => {
    const slotWorkerId = rt.settings.concurrency > 1 ? `${workerId}/${slotNo}` : workerId;
    while (timeLeft() > rt.settings.minStartMs) {
      const job = await claimNextJob(rt.sql, slotWorkerId);
      if (!job) return;
      summary.claimed++;
      const outcome = await runOneJob(rt, job, slotWorkerId, timeLeft, now);
      if (outcome === 'completed') summary.completed++;
      else if (outcome === 'failed') summary.failed++;
      else if (outcome === 'retried') summary.retried++;
      else if (outcome === 'released') summary.released++;
      else summary.lost++;
      // A job handed back for lack of time is due again at once: claiming on would
      // take it straight back and release it again, in a busy loop until minStartMs.
      if (outcome === 'released') return;
    }
  };
  // A slot whose database calls fail stops; the others finish their jobs before the invocation answers.
  const slots = await Promise.allSettled(Array.from({ length: Math.max(1, rt.settings.concurrency) }, (_, i) => slot(i)));
  const broken = slots.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (broken) throw broken.reason;
  summary.durationMs = now() - started;
  rt.log.info('worker_invocation_done', { ...summary });
  return summary;
}

type Result = 'completed' | 'failed' | 'retried' | 'released' | 'lost';

/** Processes one claimed job under a heartbeat and records its outcome in the database. */
async function runOneJob(rt: WorkerRuntime, job: ClaimedJob, workerId: string, timeLeft: () => number, now: () => number): Promise<Result> {
  const log = rt.log.child({ job_id: job.id, run_id: job.runId, worker_id: workerId, kind: job.kind, content_type: job.contentType, attempt: job.attempts });
  const t0 = now();
  const lease = new AbortController();
  // Lease length from the database's own clock (claim time vs expiry), so a skewed worker clock cannot stretch the beat.
  const leaseMs = Math.max(1000, job.leaseExpiresAt.getTime() - (job.claimedAt ?? new Date()).getTime());
  const beat = setInterval(() => {
    heartbeatJob(rt.sql, job).then(
      (held) => {
        if (!held) lease.abort();
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
      signal: lease.signal,
      timeLeft,
      stopReason: (next = {}) => (timeLeft() < Math.max(3_000, (next.wallMs ?? 0) * 3) ? 'time budget' : null),
      cpuMs: () => 0,
      now,
      exportSink: rt.exportSink,
      hubspotForPortal: (portalId) => hubspotForPortal(rt, portalId, timeLeft),
    };
    const outcome = await processor(ctx);
    log.info(`job_${outcome.kind}`, { duration_ms: now() - t0, ...(outcome.kind !== 'completed' ? { reason: outcome.reason } : {}) });
    return outcome.kind;
  } catch (e) {
    const permanent = e instanceof PermanentJobError || (e instanceof HubSpotError && !e.retryable);
    const message = e instanceof Error ? e.message : String(e);
    // If even recording the failure fails (database unreachable), the lease
    // expires and another invocation reclaims the job from its checkpoint.
    const recorded = await failJob(rt.sql, job, message, !permanent).catch((dbError: unknown) => {
      log.error('job_failure_not_recorded', { error: message, db_error: dbError instanceof Error ? dbError.message : String(dbError) });
      return false;
    });
    log.warn('job_failed', { duration_ms: now() - t0, error: message, retryable: !permanent, recorded });
    if (!recorded) return 'lost';
    return permanent || job.attempts >= job.maxAttempts ? 'failed' : 'retried';
  } finally {
    clearInterval(beat);
  }
}

/** A HubSpot client for the portal, drawing on the portal's shared request budget. */
async function hubspotForPortal(rt: WorkerRuntime, portalId: string, timeLeft: () => number): Promise<HubSpotContentClient> {
  const creds = await portalCredentials(rt.sql, portalId);
  if (!creds) throw new PermanentJobError('The portal has no HubSpot connection: reconnect HubSpot and try again.');
  return createHubSpotClient({
    accessToken: creds.accessToken,
    basePath: rt.settings.hubspotBasePath,
    requestTimeoutMs: rt.settings.hubspotRequestTimeoutMs,
    beforeRequest: sharedRequestBudget(rt.sql, creds.hubspotPortalId, rt.settings.rateLimit, undefined, timeLeft),
    ...rt.hubspotClientOptions,
  });
}
