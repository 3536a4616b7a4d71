// One worker invocation: reconcile stuck runs, heal cron jobs that never ran
// (./cron-heal.ts) and rotate a batch of token keys (./key-rotation.ts), then
// run `lanes` lanes that claim and process jobs, and with no job due the due
// schedules' probes (./schedule-probe.ts, several at once per lane),
// until the queue is empty or the invocation's budget (budget.ts) is
// spent. While every lane is busy and more work is due, another lane starts,
// up to `maxLanes` (fetch jobs mostly wait on HubSpot); at that many, the
// runtime is asked for another invocation (`moreWork`). A job checkpoints and
// is released before the budget runs out, and on `beforeunload` every job in
// flight is released (run-job.ts); an idle lane may linger for work (linger.ts).
import { TOKEN_REFRESH_DEFAULTS } from '../../shared/hubspot/oauth-tokens.ts';
import { budgetArguments } from '../../shared/hubspot-budget.ts';
import { holderOf } from '../../shared/sql/credentials.ts';
import { reportAndClaimScheduleProbes, type ScheduleProbe, type ScheduleProbeClaimArgs } from '../../shared/sql/fetch.ts';
import { claimableJobsExist, claimNextJob } from '../../shared/sql/jobs.ts';
import { reconcileStuckRuns } from '../../shared/sql/runs.ts';
import { invocationBudget, type StopReason } from './budget.ts';
import { healStalledCronJobs } from './cron-heal.ts';
import type { JobOutcome } from './job-context.ts';
import { rotateSealedTokens } from './key-rotation.ts';
import { idleLanesOf } from './linger.ts';
import { runJob } from './run-job.ts';
import { runScheduleProbes, type ScheduleProbeResult } from './schedule-probe.ts';
import type { WorkerRuntime } from './runtime.ts';

export type { HubSpotClientFactory, WorkerRuntime, WorkerSettings } from './runtime.ts';
export type { StopReason } from './budget.ts';
export { nudgeIdleLanes } from './linger.ts';

export interface InvocationSummary {
  workerId: string;
  reconciled: number;
  claimed: number;
  completed: number;
  failed: number;
  retried: number;
  released: number;
  lost: number;
  /** Schedule probes run, by how they ended (decision 0058). */
  probed: Record<ScheduleProbeResult, number>;
  durationMs: number;
  /** CPU ms the isolate used during the invocation (null where it cannot be measured). */
  cpuMs: number | null;
  /** The isolate's accumulated CPU ms when the invocation ended (null where it cannot be measured). */
  isolateCpuMs: number | null;
  /** The stop reason: the first reason the invocation stopped taking work. */
  stopReason: StopReason;
  /** Lanes started: `settings.lanes`, plus those added while work was waiting. */
  lanes: number;
  /** Times every lane (at maxLanes) was busy with more work due, and another invocation was asked for. */
  moreWorkAsked: number;
}

/**
 * A lane going from schedule probes to schedule probes asks for a job first
 * every this many reports when they do not say whether jobs wait, and for this
 * many reports after "jobs wait" led it to claim_jobs and none was there (capped jobs).
 */
export const PROBES_BEFORE_JOBS = 8;

/**
 * The lanes an invocation may grow to (WorkerSettings.maxLanes, at least the
 * lanes it starts with). A lane is added only while every lane is busy and a claim
 * would find more work, so lanes follow the work that is due.
 */
export function laneCap(s: Pick<WorkerRuntime['settings'], 'lanes' | 'maxLanes'>): number {
  return Math.max(1, s.lanes, s.maxLanes ?? s.lanes);
}

/**
 * The schedule probes an invocation holds at once (held, or reserved for a claim in flight): a lane claims up to
 * `perLane`, and all lanes together at most `cap`.
 */
function probeSlots(perLane: number, cap: number) {
  let held = 0;
  return {
    /** Reserves room for a lane's next claim and says how much; `ending`: probes held whose report makes the claim. */
    reserve(ending = 0): number {
      const room = Math.max(0, Math.min(perLane, cap - held + ending));
      held += room;
      return room;
    },
    /** A claim or report done: `before` (what it reserved, and the probes it ended) no longer held, `claimed` held. */
    settle(before: number, claimed: number): void {
      held += claimed - before;
    },
    /** No room for another claim. */
    full: () => held >= cap,
  };
}

/** Runs one invocation and returns its summary. */
export async function runWorkerInvocation(rt: WorkerRuntime, workerId: string): Promise<InvocationSummary> {
  const now = rt.now ?? Date.now;
  const s = rt.settings;
  const started = now();
  const budget = invocationBudget(s, rt.platform, now);
  const { outOfBudget, stopWith } = budget;
  const shutdown = rt.platform?.shutdown;

  const summary: InvocationSummary = {
    workerId, reconciled: 0, claimed: 0, completed: 0, failed: 0, retried: 0, released: 0, lost: 0,
    probed: { quiet: 0, changed: 0, handed_over: 0, lost: 0 },
    durationMs: 0, cpuMs: null, isolateCpuMs: null, stopReason: 'queue_empty', lanes: 0, moreWorkAsked: 0,
  };
  summary.reconciled = await reconcileStuckRuns(rt.sql, { whenDue: true });
  await healStalledCronJobs(rt);
  if (rt.tokenKeys) await rotateSealedTokens(rt, rt.tokenKeys);

  // Lingering: idle lanes wait for work while a sibling is busy, and for
  // lingerMs after the invocation's last job ended.
  const lingerMs = s.lingerMs ?? 0;
  let busyLanes = 0;
  let lastJobEndedAt = now();
  let handingBack = false; // a job was released for lack of budget: no lane lingers any more
  const idle = idleLanesOf(rt.sql);
  const lingerOver = () => handingBack || outOfBudget({ wallMs: s.minStartMs / 2 }) !== null
    || (busyLanes === 0 && now() - lastJobEndedAt >= lingerMs);

  /** A schedule probe's claim hands out the portal's token (to a new holder) and the first requests' grant too. */
  const probeClaimArgs = (laneWorkerId: string): ScheduleProbeClaimArgs => ({
    holder: holderOf(laneWorkerId), refreshLeaseSeconds: TOKEN_REFRESH_DEFAULTS.refreshLeaseSeconds,
    minValidSeconds: TOKEN_REFRESH_DEFAULTS.minValidSeconds, budget: budgetArguments(s.rateLimit),
  });
  const maxLanes = laneCap(s);
  const probesPerLane = Math.max(1, s.probesPerLane ?? 1);
  // At most as many probes as its lanes of one probe each would hold (and one lane's batch): lanes × probes
  // per lane had one isolate's HubSpot requests in the thousands, and 4,000 portals broke (decision 0065).
  const slots = probeSlots(probesPerLane, Math.max(maxLanes, probesPerLane));
  /** A lane's first probes (a report claims the next ones). */
  const claimProbes = async (laneWorkerId: string): Promise<ScheduleProbe[]> => {
    const room = slots.reserve();
    if (room === 0) return [];
    let claimed: ScheduleProbe[] = [];
    try {
      claimed = (await reportAndClaimScheduleProbes(rt.sql, [], room, probeClaimArgs(laneWorkerId))).next;
      return claimed;
    } finally {
      slots.settle(room, claimed.length);
    }
  };
  let liveLanes = 0;
  let growing = false;
  /**
   * After a claim that got work: with every lane busy and more work due, one more lane (or, at maxLanes, another
   * invocation). With the invocation's probes at their cap, a lane is added for jobs only, and due schedules ask
   * for another invocation.
   */
  const grow = () => {
    if (growing || busyLanes < liveLanes || handingBack || outOfBudget({ wallMs: s.minStartMs }) !== null) return;
    if (summary.lanes >= maxLanes && !rt.moreWork) return;
    growing = true;
    const probesFull = slots.full();
    (async () => {
      const more = await claimableJobsExist(rt.sql, null, !probesFull);
      if (handingBack || outOfBudget({ wallMs: s.minStartMs }) !== null) return;
      if (more && summary.lanes < maxLanes) startLane();
      else if ((more || (probesFull && (await claimableJobsExist(rt.sql)))) && rt.moreWork?.()) summary.moreWorkAsked++;
    })().catch(() => {}).finally(() => {
      growing = false;
    });
  };

  const lane = async (laneNo: number) => {
    const laneWorkerId = maxLanes > 1 ? `${workerId}/${laneNo}` : workerId;
    let woken = false; // woken by the idle poll: the claim's result is reported back to it
    // After schedule probes the lane asks for more first (a fleet's lanes go from probes to probes),
    // and for a job first when its last report said jobs wait (decision 0063; without word, every
    // PROBES_BEFORE_JOBS reports), so jobs never wait behind a burst.
    let probesInARow = 0;
    let jobsWaiting: boolean | undefined; // what the last chained report said
    let jobsFirst = false; // the next claim is a job's
    let hintIgnoredFor = 0; // probes left during which "jobs wait" is not followed: claim_jobs found none
    const timeForJobs = () => (jobsWaiting === undefined || hintIgnoredFor > 0 ? probesInARow % PROBES_BEFORE_JOBS === 0 : jobsWaiting);
    // The next probes, claimed with the last ones' report (decision 0061): none when none was due, undefined when not asked.
    let handed: ScheduleProbe[] | undefined;
    const report = (gotJob: boolean) => {
      if (woken) idle.claimed(gotJob);
      woken = false;
    };
    try {
      // Probes claimed with the last report are run even when the time to start more ran out meanwhile (they are leased).
      while ((handed?.length ?? 0) > 0 || outOfBudget({ wallMs: s.minStartMs / 2 }) === null) {
        // Jobs, and with none due schedules' probes (decision 0058), which leave no run when nothing changed.
        const probeAsked = handed !== undefined;
        const probeFirst = !probeAsked && probesInARow > 0 && !jobsFirst;
        let probes = handed ?? (probeFirst ? await claimProbes(laneWorkerId) : []);
        handed = undefined;
        // A report that found no next probe due sends a lingering lane straight to the idle poll, which looks for jobs too.
        const jobsToPoll = probeAsked && probes.length === 0 && lingerMs > 0 && !lingerOver();
        const job = probes.length > 0 || jobsToPoll ? null : await claimNextJob(rt.sql, laneWorkerId);
        if (jobsFirst && !job && jobsWaiting) hintIgnoredFor = PROBES_BEFORE_JOBS;
        jobsFirst = false;
        if (probes.length === 0 && !job && !probeFirst && !probeAsked) probes = await claimProbes(laneWorkerId);
        report(job !== null || probes.length > 0);
        if (probes.length > 0) {
          probesInARow++;
          busyLanes++;
          grow();
          try {
            // The report claims the next probes too, but for a lane due to ask for a job first or out of time.
            jobsFirst = timeForJobs();
            const nextCount = !jobsFirst && outOfBudget({ wallMs: s.minStartMs / 2 }) === null ? slots.reserve(probes.length) : 0;
            let done: Awaited<ReturnType<typeof runScheduleProbes>> | undefined;
            try {
              done = await runScheduleProbes(rt, probes, laneWorkerId, budget,
                nextCount > 0 ? { args: probeClaimArgs(laneWorkerId), count: nextCount } : null);
            } finally {
              slots.settle(probes.length + nextCount, done?.next?.length ?? 0);
            }
            for (const result of done.results) summary.probed[result]++;
            handed = done.next;
            jobsWaiting = done.jobsWaiting;
            if (hintIgnoredFor > 0) hintIgnoredFor--;
            // A run made by the report: its jobs are claimed right after the probes handed with it.
            if (done.results.some((r) => r === 'changed' || r === 'handed_over')) {
              probesInARow = PROBES_BEFORE_JOBS - 1;
              if (jobsWaiting === false) jobsWaiting = undefined; // (its jobs may be capped behind others: asked after the next probe)
            }
          } finally {
            busyLanes--;
            lastJobEndedAt = now();
          }
          continue;
        }
        if (!job) {
          // Woken again, a lane that was probing asks for a probe first (a fleet's wake-ups are mostly due schedules).
          if (lingerMs > 0 && (await idle.wait(lingerOver, probesInARow === 0))) {
            woken = true;
            continue;
          }
          return;
        }
        probesInARow = 0;
        jobsWaiting = undefined;
        summary.claimed++;
        busyLanes++;
        grow();
        let outcome: JobOutcome;
        try {
          outcome = await runJob(rt, job, laneWorkerId, budget);
        } finally {
          busyLanes--;
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
  // A lane whose database calls fail stops; the others finish their jobs before the invocation answers.
  const running: Promise<void>[] = [];
  function startLane() {
    const no = summary.lanes++;
    liveLanes++;
    running.push(lane(no).finally(() => liveLanes--));
  }
  for (let i = 0; i < Math.max(1, s.lanes); i++) startLane();
  let lanes: PromiseSettledResult<void>[] = [];
  while (lanes.length < running.length) lanes = await Promise.allSettled([...running]); // lanes added meanwhile are awaited too
  const broken = lanes.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  summary.durationMs = now() - started;
  summary.cpuMs = budget.cpuMeasured ? Math.round(budget.cpuMs()) : null;
  summary.isolateCpuMs = budget.cpuMeasured ? Math.round(budget.isolateCpuMs()) : null;
  summary.stopReason = broken ? 'database_error' : shutdown?.aborted ? 'shutdown' : (budget.stopReason() ?? 'queue_empty');
  if (broken) throw broken.reason;
  rt.log.info('worker_invocation_done', { ...summary });
  return summary;
}
