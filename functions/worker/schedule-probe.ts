// Schedule probes (how they work: docs/sync.md#the-quiet-cycle): a lane with
// no job to claim probes due schedules from their rows: HubSpot's answers to
// the questions a probe job asks too (./change-questions.ts), then a report
// that, for a cycle where nothing changed, writes no run and no job (the claim
// brought the portal's token and a grant of the first requests; the report
// records the answers' rate limits). A lane holds up to `probesPerLane` probes at once, asks
// HubSpot for all of them together, and reports them in one call that also
// claims its next ones (decisions 0061, 0065). A change makes a run that
// fetches it; a failure (HubSpot, the token, the budget) hands the cycle to a
// run with a probe job, whose retries, parking and notifications take over.
// Cut off by a shutdown, nothing is reported: the schedule-probe leases expire
// and the schedules are due again (a report after its lease expired is fenced
// off, and counts as lost).
import {
  reportAndClaimScheduleProbes, reportScheduleProbe, type ScheduleProbe, type ScheduleProbeClaimArgs, type ScheduleProbeOutcome,
  type ScheduleProbeReport,
} from '../../shared/sql/schedule-probe.ts';
import type { Budget } from './budget.ts';
import { askHubSpot, parseProbeCheckpoint } from './change-questions.ts';
import { hubspotForPortal } from './portal-client.ts';
import type { WorkerRuntime } from './runtime.ts';

/** How a schedule probe ended: its report's outcome, or lost (not reported, or fenced off). */
export type ScheduleProbeResult = ScheduleProbeOutcome | 'lost';

/** What the next claim asks for: its arguments and how many probes. */
export interface NextProbes {
  args: ScheduleProbeClaimArgs;
  count: number;
}

/**
 * Runs a lane's claimed schedule probes to their report; with `next`, the
 * report also claims the lane's next ones (an empty list: none was due;
 * undefined: not asked, as when the probes were cut off before their report)
 * and says whether jobs wait.
 */
export async function runScheduleProbes(
  rt: WorkerRuntime, probes: readonly ScheduleProbe[], workerId: string, budget: Budget, next: NextProbes | null = null,
): Promise<{ results: ScheduleProbeResult[]; next?: ScheduleProbe[]; jobsWaiting?: boolean }> {
  const t0 = budget.now();
  const stop = new AbortController();
  const onShutdown = () => stop.abort();
  if (budget.shutdown?.aborted) stop.abort();
  else budget.shutdown?.addEventListener('abort', onShutdown, { once: true });
  let reports: ScheduleProbeReport[];
  try {
    reports = await Promise.all(probes.map((probe) => askAbout(rt, probe, workerId, budget, stop.signal)));
  } finally {
    budget.shutdown?.removeEventListener('abort', onShutdown);
  }
  if (stop.signal.aborted) return { results: probes.map(() => 'lost') };
  let done: { outcomes: (ScheduleProbeOutcome | null)[]; next?: ScheduleProbe[]; jobsWaiting?: boolean };
  try {
    done = await reportAndClaimScheduleProbes(rt.sql, reports, next?.count ?? 0, next?.args ?? null);
    if (!next) done = { outcomes: done.outcomes };
  } catch (e) {
    // A report the database refuses (22023: answers it cannot read) undoes the call: each is reported on its
    // own, a refused one as failed (a run takes it over); a database that fails fails these too, which stops the lane.
    rt.log.warn('schedule_probes_report_failed', { worker_id: workerId, probes: probes.length, error: e instanceof Error ? e.message : String(e) });
    const outcomes: (ScheduleProbeOutcome | null)[] = [];
    for (const r of reports) {
      outcomes.push(await reportScheduleProbe(rt.sql, r.probe, r.answers, r.tablesPages, r.rateHeaders)
        .catch(() => reportScheduleProbe(rt.sql, r.probe, null)));
    }
    done = { outcomes };
  }
  const results = done.outcomes.map((o) => o ?? 'lost');
  rt.log.info('schedule_probes_done', { worker_id: workerId, probes: probes.length, results, duration_ms: budget.now() - t0 });
  return { results, next: done.next, jobsWaiting: done.jobsWaiting };
}

/** One probe's questions asked of HubSpot: its report (answers null when the probe failed). */
async function askAbout(rt: WorkerRuntime, probe: ScheduleProbe, workerId: string, budget: Budget, signal: AbortSignal): Promise<ScheduleProbeReport> {
  // The last answer's rate headers: recorded by the report (one call, not one more per probe).
  const report: ScheduleProbeReport = { probe, answers: null, tablesPages: null, rateHeaders: null };
  try {
    const questions = parseProbeCheckpoint(probe.checkpoint);
    const hubspot = await hubspotForPortal(rt, probe.portalId, workerId, budget.timeLeft, {
      token: probe.token, granted: probe.granted, onRateLimitHeaders: (h) => void (report.rateHeaders = h),
    });
    const { answers, tablesPages } = await askHubSpot(hubspot, questions, signal);
    report.answers = answers;
    report.tablesPages = tablesPages;
  } catch (e) {
    if (!signal.aborted) {
      rt.log.warn('schedule_probe_failed', { portal_id: probe.portalId, worker_id: workerId, error: e instanceof Error ? e.message : String(e) });
    }
  }
  return report;
}
