// One worker invocation, as wiring: the maintenance due at its start
// (maintenance.ts), then `lanes` lanes, each carrying out what its state
// machine says next (lane-decisions.ts: claim a job or due schedules' probes,
// run them, linger, stop), until the queue is empty or the invocation's budget
// (budget.ts) is spent. While every lane is busy and more work is due, another
// lane starts, up to `maxLanes`, and at that many another invocation is asked
// for (lane-growth.ts); the invocation's schedule probes are capped (its
// schedule-probe capacity, schedule-probe-capacity.ts). A job checkpoints and is released before the budget
// runs out, and on `beforeunload` every job in flight is released
// (run-job.ts); an idle lane may linger for work (linger.ts). Schedule
// probes: schedule-probe.ts.
import { TOKEN_REFRESH_DEFAULTS } from '../../shared/hubspot/portal-tokens.ts';
import { budgetArguments } from '../../shared/hubspot/request-budget.ts';
import { holderOf } from '../../shared/sql/credentials.ts';
import { reportAndClaimScheduleProbes, type ScheduleProbe, type ScheduleProbeClaimArgs } from '../../shared/sql/schedule-probe.ts';
import { claimableJobsExist, claimNextJob, type ClaimedJob } from '../../shared/sql/jobs.ts';
import { invocationBudget, type Budget, type StopReason } from './budget.ts';
import { laneNext, newLane, type LaneEvent, type LaneStep } from './lane-decisions.ts';
import { afterLook, firstLook, laneCap, shouldLook, type GrowthLimits, type LaneCounts } from './lane-growth.ts';
import { type IdleLanes, idleLanesOf } from './linger.ts';
import { runStartMaintenance } from './maintenance.ts';
import { runJob } from './run-job.ts';
import { scheduleProbeCapacity, type ScheduleProbeCapacity } from './schedule-probe-capacity.ts';
import { runScheduleProbes, type ScheduleProbeResult } from './schedule-probe.ts';
import type { WorkerRuntime } from './runtime.ts';

export type { HubSpotClientFactory, WorkerRuntime, WorkerSettings } from './runtime.ts';
export type { StopReason } from './budget.ts';
export { nudgeIdleLanes } from './linger.ts';

export interface InvocationSummary {
  workerId: string;
  /** Stuck runs the start's settle_stuck_runs settled (maintenance.ts). */
  stuckRunsSettled: number;
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

/** What the lanes of one invocation share. */
interface Invocation {
  rt: WorkerRuntime;
  workerId: string;
  budget: Budget;
  summary: InvocationSummary;
  lanes: LaneCounts;
  limits: GrowthLimits;
  scheduleProbeCapacity: ScheduleProbeCapacity;
  idle: IdleLanes;
  running: Promise<void>[];
  /** A job was released for lack of budget: no lane lingers or grows any more. */
  handingBack: boolean;
  lastWorkEndedAt: number;
}

/** Runs one invocation and returns its summary. */
export async function runWorkerInvocation(rt: WorkerRuntime, workerId: string): Promise<InvocationSummary> {
  const s = rt.settings;
  const now = rt.now ?? Date.now;
  const started = now();
  const budget = invocationBudget(s, rt.platform, now);
  const summary: InvocationSummary = {
    workerId, stuckRunsSettled: 0, claimed: 0, completed: 0, failed: 0, retried: 0, released: 0, lost: 0,
    probed: { quiet: 0, changed: 0, handed_over: 0, lost: 0 },
    durationMs: 0, cpuMs: null, isolateCpuMs: null, stopReason: 'queue_empty', lanes: 0, moreWorkAsked: 0,
  };
  summary.stuckRunsSettled = (await runStartMaintenance(rt)).stuckRunsSettled;

  const maxLanes = laneCap(s);
  const probesPerLane = Math.max(1, s.probesPerLane ?? 1);
  const inv: Invocation = {
    rt, workerId, budget, summary,
    lanes: { started: 0, live: 0, busy: 0, looking: false },
    limits: { maxLanes, canAskInvocation: rt.moreWork !== undefined },
    scheduleProbeCapacity: scheduleProbeCapacity(probesPerLane, Math.max(maxLanes, probesPerLane)),
    idle: idleLanesOf(rt.sql),
    running: [],
    handingBack: false,
    lastWorkEndedAt: now(),
  };
  for (let i = 0; i < Math.max(1, s.lanes); i++) startLane(inv);
  // A lane whose database calls fail stops; the others finish their jobs before the invocation answers.
  let lanes: PromiseSettledResult<void>[] = [];
  while (lanes.length < inv.running.length) lanes = await Promise.allSettled([...inv.running]); // lanes added meanwhile too
  const broken = lanes.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  const shutdown = rt.platform?.shutdown;
  summary.lanes = inv.lanes.started;
  summary.durationMs = now() - started;
  summary.cpuMs = budget.cpuMeasured ? Math.round(budget.cpuMs()) : null;
  summary.isolateCpuMs = budget.cpuMeasured ? Math.round(budget.isolateCpuMs()) : null;
  summary.stopReason = broken ? 'database_error' : shutdown?.aborted ? 'shutdown' : (budget.stopReason() ?? 'queue_empty');
  if (broken) throw broken.reason;
  rt.log.info('worker_invocation_done', { ...summary });
  return summary;
}

function startLane(inv: Invocation): void {
  const no = inv.lanes.started++;
  inv.lanes.live++;
  inv.running.push(runLane(inv, no).finally(() => inv.lanes.live--));
}

/** Time is left to start a unit of work of `wallMs` (asking sets the stop reason when not). */
const hasTime = (inv: Invocation, wallMs: number) => inv.budget.outOfBudget({ wallMs }) === null;

/**
 * Whether an idle lane may linger no longer: the invocation is handing work back or out of time to start
 * more, or no lane is busy and lingerMs passed since the last work ended.
 */
function lingerOver(inv: Invocation): boolean {
  const s = inv.rt.settings;
  return inv.handingBack || !hasTime(inv, s.minStartMs / 2)
    || (inv.lanes.busy === 0 && inv.budget.now() - inv.lastWorkEndedAt >= (s.lingerMs ?? 0));
}

/** One lane: carries out its state machine's actions and tells it what they found. */
async function runLane(inv: Invocation, laneNo: number): Promise<void> {
  const { rt, summary } = inv;
  const s = rt.settings;
  const laneId = inv.limits.maxLanes > 1 ? `${inv.workerId}/${laneNo}` : inv.workerId;
  const lingers = (s.lingerMs ?? 0) > 0;
  let step: LaneStep = { state: newLane(lingers), action: { kind: 'ready' } };
  let job: ClaimedJob | null = null;
  let probes: ScheduleProbe[] = []; // in hand: just claimed, or handed by the last report
  let woken = false; // woken by the idle poll: what its claims found is reported back to it
  try {
    for (;;) {
      const { action } = step;
      if (woken && action.kind !== 'ready' && action.kind !== 'claim_job' && action.kind !== 'claim_probes') {
        inv.idle.claimed(action.kind === 'run_job' || action.kind === 'run_probes');
        woken = false;
      }
      let event: LaneEvent;
      switch (action.kind) {
        case 'ready':
          event = { type: 'ready', canStart: hasTime(inv, s.minStartMs / 2), lingering: lingers && !lingerOver(inv) };
          break;
        case 'claim_job':
          job = await claimNextJob(rt.sql, laneId);
          event = { type: 'claimed', claim: 'job', found: job !== null };
          break;
        case 'claim_probes':
          probes = await claimProbes(inv, laneId);
          event = { type: 'claimed', claim: 'probes', found: probes.length > 0 };
          break;
        case 'run_probes': {
          const done = await working(inv, () => reportProbes(inv, laneId, probes, action.chain));
          probes = done.next ?? [];
          event = { type: 'probes_reported', handed: done.next?.length, jobsWaiting: done.jobsWaiting,
            runMade: done.results.some((r) => r === 'changed' || r === 'handed_over') };
          break;
        }
        case 'run_job': {
          summary.claimed++;
          const outcome = await working(inv, () => runJob(rt, job!, laneId, inv.budget));
          summary[outcome.kind]++;
          // A job handed back for lack of budget is due again at once: claiming on would
          // take it straight back and release it again, in a busy loop.
          if (outcome.kind === 'released') {
            inv.budget.stopWith(rt.platform?.shutdown?.aborted ? 'shutdown' : 'time_budget', 'released');
            inv.handingBack = true;
          }
          event = { type: 'job_done', released: outcome.kind === 'released' };
          break;
        }
        case 'linger':
          woken = await inv.idle.wait(() => lingerOver(inv), action.soon);
          event = { type: 'linger_ended', woken };
          break;
        case 'stop':
          return;
      }
      step = laneNext(step.state, event);
    }
  } finally {
    if (woken) inv.idle.claimed(false); // woken but stopped (budget, error) before claiming
  }
}

/** A lane busy with work: counted while it runs, and the invocation may grow meanwhile. */
async function working<T>(inv: Invocation, work: () => Promise<T>): Promise<T> {
  inv.lanes.busy++;
  grow(inv);
  try {
    return await work();
  } finally {
    inv.lanes.busy--;
    inv.lastWorkEndedAt = inv.budget.now();
  }
}

/** After a lane took work: with every lane busy and more work due, one more lane, or another invocation. */
function grow(inv: Invocation): void {
  const { rt, lanes, limits } = inv;
  const minStartMs = rt.settings.minStartMs;
  if (!shouldLook(lanes, limits, inv.handingBack, () => hasTime(inv, minStartMs))) return;
  lanes.looking = true;
  (async () => {
    const look = firstLook(inv.scheduleProbeCapacity.full());
    const found = await claimableJobsExist(rt.sql, null, look === 'work');
    if (inv.handingBack || !hasTime(inv, minStartMs)) return;
    let growth = afterLook(look, found, lanes, limits);
    if (growth === 'look_for_schedules') growth = afterLook('schedules', await claimableJobsExist(rt.sql), lanes, limits);
    if (growth === 'add_lane') startLane(inv);
    else if (growth === 'ask_invocation' && rt.moreWork?.()) inv.summary.moreWorkAsked++;
  })().catch(() => {}).finally(() => {
    lanes.looking = false;
  });
}

/** A schedule probe's claim hands out the portal's token (to a new holder) and the first requests' grant too. */
function probeClaimArgs(inv: Invocation, laneId: string): ScheduleProbeClaimArgs {
  return {
    holder: holderOf(laneId), refreshLeaseSeconds: TOKEN_REFRESH_DEFAULTS.refreshLeaseSeconds,
    minValidSeconds: TOKEN_REFRESH_DEFAULTS.minValidSeconds, budget: budgetArguments(inv.rt.settings.rateLimit),
  };
}

/** A lane's first probes, as many as the invocation's room allows (a report claims the next ones). */
async function claimProbes(inv: Invocation, laneId: string): Promise<ScheduleProbe[]> {
  const room = inv.scheduleProbeCapacity.reserve();
  if (room === 0) return [];
  let claimed: ScheduleProbe[] = [];
  try {
    claimed = (await reportAndClaimScheduleProbes(inv.rt.sql, [], room, probeClaimArgs(inv, laneId))).next;
    return claimed;
  } finally {
    inv.scheduleProbeCapacity.settle(room, claimed.length);
  }
}

/** Runs a lane's probes to their report, which with `chain` claims the next ones as room and time allow. */
async function reportProbes(inv: Invocation, laneId: string, probes: ScheduleProbe[], chain: boolean) {
  const nextCount = chain && hasTime(inv, inv.rt.settings.minStartMs / 2) ? inv.scheduleProbeCapacity.reserve(probes.length) : 0;
  let done: Awaited<ReturnType<typeof runScheduleProbes>> | undefined;
  try {
    done = await runScheduleProbes(inv.rt, probes, laneId, inv.budget,
      nextCount > 0 ? { args: probeClaimArgs(inv, laneId), count: nextCount } : null);
  } finally {
    inv.scheduleProbeCapacity.settle(probes.length + nextCount, done?.next?.length ?? 0);
  }
  for (const result of done.results) inv.summary.probed[result]++;
  return done;
}
