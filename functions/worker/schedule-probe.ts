// A schedule probe (docs/decisions/0058): a lane with no job to claim probes a
// due schedule from its row: HubSpot's answers as a probe job asks them
// (./probe-job.ts), then one report that, for a cycle where nothing changed,
// writes no run and no job (the claim brought the portal's token and a grant
// of the first requests; the report records the answers' rate limits: two
// calls in all, decision 0059; a lane going from probe to probe claims its
// next one with the report, decision 0061). A change makes a run that fetches it; a failure
// (HubSpot, the token, the budget) hands the cycle to a run with a probe job,
// whose retries, parking and notifications take over. Cut off by a shutdown,
// nothing is reported: the lease expires and the schedule is due again (a
// report after the lease expired is fenced off, and counts as lost).
import {
  reportAndClaimScheduleProbe, reportScheduleProbe, type ProbeAnswer, type ScheduleProbe, type ScheduleProbeClaimArgs, type ScheduleProbeOutcome,
} from '../../shared/sql/fetch.ts';
import type { RateLimitHeaders } from '../../shared/hubspot/transport.ts';
import type { Budget } from './budget.ts';
import { hubspotForPortal } from './portal-client.ts';
import { askHubSpot, parseProbeCheckpoint } from './probe-job.ts';
import type { WorkerRuntime } from './runtime.ts';

/** How a schedule probe ended: its report's outcome, or lost (not reported, or fenced off). */
export type ScheduleProbeResult = ScheduleProbeOutcome | 'lost';

/**
 * Runs one claimed schedule probe to its report; with `next`, the report also
 * claims the lane's next probe (null: none was due; undefined: not asked, as
 * when the probe was cut off before its report) and says whether jobs wait.
 */
export async function runScheduleProbe(
  rt: WorkerRuntime, probe: ScheduleProbe, workerId: string, budget: Budget, next: ScheduleProbeClaimArgs | null = null,
): Promise<{ result: ScheduleProbeResult; next?: ScheduleProbe | null; jobsWaiting?: boolean }> {
  const log = rt.log.child({ portal_id: probe.portalId, worker_id: workerId, kind: 'schedule_probe' });
  const t0 = budget.now();
  const stop = new AbortController();
  const onShutdown = () => stop.abort();
  if (budget.shutdown?.aborted) stop.abort();
  else budget.shutdown?.addEventListener('abort', onShutdown, { once: true });
  // The last answer's rate headers: recorded by the report (one call, not one more per probe).
  let rateHeaders: RateLimitHeaders | null = null;
  const report = async (answers: Record<string, ProbeAnswer> | null, tablesPages: readonly string[] | null) =>
    next ? reportAndClaimScheduleProbe(rt.sql, probe, answers, tablesPages, rateHeaders, next)
      : { outcome: await reportScheduleProbe(rt.sql, probe, answers, tablesPages, rateHeaders), next: undefined, jobsWaiting: undefined };
  let reported: Awaited<ReturnType<typeof report>>;
  try {
    try {
      const questions = parseProbeCheckpoint(probe.checkpoint);
      const hubspot = await hubspotForPortal(rt, probe.portalId, workerId, budget.timeLeft, {
        token: probe.token, granted: probe.granted, onRateLimitHeaders: (h) => void (rateHeaders = h),
      });
      const { answers, tablesPages } = await askHubSpot(hubspot, questions, stop.signal);
      if (stop.signal.aborted) return { result: 'lost' };
      reported = await report(answers, tablesPages);
    } catch (e) {
      if (stop.signal.aborted) return { result: 'lost' };
      // Whatever failed (a database that failed fails the hand-over too, which then stops the lane).
      log.warn('schedule_probe_failed', { error: e instanceof Error ? e.message : String(e) });
      reported = await report(null, null);
    }
  } finally {
    budget.shutdown?.removeEventListener('abort', onShutdown);
  }
  log.info('schedule_probe_done', { outcome: reported.outcome ?? 'lost', duration_ms: budget.now() - t0 });
  return { result: reported.outcome ?? 'lost', next: reported.next, jobsWaiting: reported.jobsWaiting };
}
