// One claimed job, start to end: its processor under a heartbeat, the
// release at `beforeunload` (after the processor has let go of the
// connection), and its failure recorded by the database (retry or fail).
import { HubSpotAccessRemoved, HubSpotError } from '../../shared/hubspot/errors.ts';
import { failJob, heartbeatJob, type ClaimedJob } from '../../shared/sql/jobs.ts';
import type { Budget } from './budget.ts';
import { processExportJob } from './export-job.ts';
import { processFetchJob } from './fetch-job.ts';
import { processPlanJob } from './plan-job.ts';
import { processProbeJob } from './probe-job.ts';
import { processPublishJob } from './publish-job.ts';
import { processRestoreJob } from './restore-job.ts';
import { lost, PermanentJobError, releaseWithRetry, type JobContext, type JobOutcome } from './job-context.ts';
import { hubspotForPortal, hubspotWritesForPortal } from './portal-client.ts';
import type { WorkerRuntime } from './runtime.ts';

type Processor = (ctx: JobContext) => Promise<JobOutcome>;
const PROCESSORS: Record<string, Processor> = {
  fetch: processFetchJob, export: processExportJob, probe: processProbeJob,
  plan: processPlanJob, publish: processPublishJob, restore: processRestoreJob,
};

/** After `beforeunload`, how long a job's processor may take to stop before its job is released anyway. */
const SHUTDOWN_SETTLE_MS = 1_000;
/** How long a shutdown release is tried again at most (an isolate past beforeunload has seconds, not minutes); then the lease decides. */
const SHUTDOWN_RELEASE_RETRY_MS = 10_000;

/** Processes one claimed job under a heartbeat and records its outcome in the database. */
export async function runJob(rt: WorkerRuntime, job: ClaimedJob, workerId: string, budget: Budget): Promise<JobOutcome> {
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
    const result = await releaseWithRetry(rt.sql, job, {}, now() + Math.min(jobLeaseMs, SHUTDOWN_RELEASE_RETRY_MS), log);
    if (result === 'failed') return { kind: 'failed', reason: 'released too often without progress (isolate shutting down)' };
    if (result !== 'released') return outcome ?? lost('job lease lost before the shutdown release');
    log.info('job_released', { duration_ms: now() - t0, reason: 'isolate shutting down' });
    return { kind: 'released', reason: 'isolate shutting down' };
  };
  if (budget.shutdown?.aborted) onShutdown();
  else budget.shutdown?.addEventListener('abort', onShutdown, { once: true });
  // Job lease length from the database's own clock (claim time vs expiry), so a skewed worker clock cannot stretch the beat.
  const jobLeaseMs = Math.max(1000, job.leaseExpiresAt.getTime() - (job.claimedAt ?? new Date()).getTime());
  const beat = setInterval(() => {
    heartbeatJob(rt.sql, job).then(
      (held) => {
        if (!held) stop.abort();
      },
      (e) => log.warn('heartbeat_error', { error: String(e) }),
    );
  }, Math.min(30_000, Math.max(500, Math.floor(jobLeaseMs / 3))));
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
      outOfBudget: budget.outOfBudget,
      cpuMs: budget.cpuMs,
      now,
      exportSink: rt.exportSink,
      hubspotForPortal: (portalId) => hubspotForPortal(rt, portalId, workerId, budget.timeLeft),
      hubspotWritesForPortal: (portalId) => hubspotWritesForPortal(rt, portalId, workerId, budget.timeLeft),
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
    // If even recording the failure fails (database unreachable), the job lease
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
