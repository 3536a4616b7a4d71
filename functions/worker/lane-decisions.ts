// What a worker lane runs next, as a pure state machine: the lane's state and
// what just happened (an event) give its new state and the next thing to do
// (an action): claim a job, claim schedule probes, run what was claimed,
// linger for work, or stop. No I/O and no clock: invocation.ts carries the
// actions out and feeds back what they found (tests/lane-decisions.test.ts
// drives it without a database). The rules:
//
// - A round starts (`ready`) after the lane's start, its work or a wake-up.
//   Probes the last report claimed for the lane are run even when the time to
//   start more ran out (they are leased); otherwise a lane out of time stops.
// - A job first; with none, due schedules' probes (decision 0058), which leave
//   no run when nothing changed.
// - After probes a lane asks for probes first (a fleet's lanes go from probes
//   to probes), and its report claims the next ones (decisions 0061, 0065),
//   unless the lane is due to ask for a job first: when the last report said
//   jobs wait (decision 0063) or, without word, every PROBES_BEFORE_JOBS
//   reports, so jobs never wait behind a burst of due schedules. A report
//   that claims nothing brings no word, so a lane that followed "jobs wait" to
//   no job (capped jobs) asks by turn until a report says so again. A report
//   that made a run has its jobs claimed right after the probes handed with it.
// - A report that found no next probe due sends a lingering lane straight to
//   the idle poll (linger.ts), which looks for jobs too; otherwise a job is
//   asked for once.
// - Nothing found: the lane lingers when its invocation lingers (`soon`: its
//   last work was a job, whose run may add more), else it stops. Woken again, a
//   lane that was probing asks for a probe first.
// - A job handed back for lack of budget stops the lane: claiming on would take
//   it straight back.

/**
 * A lane going from schedule probes to schedule probes asks for a job first
 * every this many reports when they do not say whether jobs wait.
 */
export const PROBES_BEFORE_JOBS = 8;

export interface LaneState {
  /** The invocation lingers for work (its lingerMs > 0): a lane with nothing to do waits instead of stopping. */
  readonly lingers: boolean;
  /** Probe batches since the lane's last job (PROBES_BEFORE_JOBS - 1 after a report that made a run). */
  readonly probesInARow: number;
  /** What the last report said: jobs wait, none wait, or no word (undefined). */
  readonly jobsWaiting: boolean | undefined;
  /** The next claim is a job's. */
  readonly jobsFirst: boolean;
  /** Probes the last report claimed for the lane (0: none was due); undefined: it did not ask. */
  readonly handed: number | undefined;
  /** What this round still claims if the claim in flight finds nothing, in order. */
  readonly thenClaim: readonly Claim[];
}

export type Claim = 'job' | 'probes';

export type LaneEvent =
  /** A round starts. `canStart`: time is left to start work; `lingering`: the invocation may still linger. */
  | { type: 'ready'; canStart: boolean; lingering: boolean }
  /** A claim came back; `found`: it got a job, or at least one probe. */
  | { type: 'claimed'; claim: Claim; found: boolean }
  /** The probes' report came back: the next probes it claimed (undefined: not asked), what it said of jobs, and whether a probe made a run. */
  | { type: 'probes_reported'; handed: number | undefined; jobsWaiting: boolean | undefined; runMade: boolean }
  /** The job ran; `released`: it was handed back for lack of budget. */
  | { type: 'job_done'; released: boolean }
  /** The idle poll let the lane go: woken to claim, or its invocation lingers no longer. */
  | { type: 'linger_ended'; woken: boolean };

export type LaneAction =
  /** Start a round: send `ready`. */
  | { kind: 'ready' }
  | { kind: 'claim_job' }
  | { kind: 'claim_probes' }
  | { kind: 'run_job' }
  /** Run the probes in hand (just claimed, or handed by the last report); `chain`: their report claims the next ones. */
  | { kind: 'run_probes'; chain: boolean }
  /** Wait in the idle poll; `soon`: more may come at once (the lane's last work was a job). */
  | { kind: 'linger'; soon: boolean }
  | { kind: 'stop' };

export interface LaneStep {
  state: LaneState;
  action: LaneAction;
}

/** A new lane: its first action is `ready`. */
export function newLane(lingers: boolean): LaneState {
  return { lingers, probesInARow: 0, jobsWaiting: undefined, jobsFirst: false, handed: undefined, thenClaim: [] };
}

/** The lane's next action after `event`. */
export function laneNext(s: LaneState, event: LaneEvent): LaneStep {
  switch (event.type) {
    case 'ready':
      return roundStart(s, event.canStart, event.lingering);
    case 'claimed':
      return claimed(s, event.claim, event.found);
    case 'probes_reported': {
      let { probesInARow, jobsWaiting } = s;
      jobsWaiting = event.jobsWaiting;
      if (event.runMade) {
        // A run made by the report: its jobs are claimed right after the probes handed with it
        // (which may be capped behind others: with "none wait", asked after the next probe).
        probesInARow = PROBES_BEFORE_JOBS - 1;
        if (jobsWaiting === false) jobsWaiting = undefined;
      }
      return { state: { ...s, handed: event.handed, jobsWaiting, probesInARow }, action: { kind: 'ready' } };
    }
    case 'job_done':
      return { state: s, action: event.released ? { kind: 'stop' } : { kind: 'ready' } };
    case 'linger_ended':
      return { state: s, action: event.woken ? { kind: 'ready' } : { kind: 'stop' } };
  }
}

function roundStart(s: LaneState, canStart: boolean, lingering: boolean): LaneStep {
  const handed = s.handed;
  if (handed !== undefined && handed > 0) return runProbes({ ...s, handed: undefined });
  if (!canStart) return { state: s, action: { kind: 'stop' } };
  const next = { ...s, handed: undefined };
  if (handed === 0) {
    // The report found no next probe due: a lingering lane goes to the idle poll, which looks for jobs too.
    if (lingering) return idle(next);
    return claim(next, 'job', []);
  }
  const probeFirst = s.probesInARow > 0 && !s.jobsFirst;
  return probeFirst ? claim(next, 'probes', ['job']) : claim(next, 'job', ['probes']);
}

function claim(s: LaneState, first: Claim, then: readonly Claim[]): LaneStep {
  return { state: { ...s, thenClaim: then }, action: { kind: first === 'job' ? 'claim_job' : 'claim_probes' } };
}

function claimed(s: LaneState, what: Claim, found: boolean): LaneStep {
  let next = what === 'job' ? { ...s, jobsFirst: false } : s;
  if (found) {
    next = { ...next, thenClaim: [] };
    if (what === 'probes') return runProbes(next);
    return { state: { ...next, probesInARow: 0, jobsWaiting: undefined }, action: { kind: 'run_job' } };
  }
  const [then, ...rest] = next.thenClaim;
  if (then) return claim(next, then, rest);
  return idle(next);
}

/** Probes in hand: counted, and their report claims the next ones unless it is time to ask for a job. */
function runProbes(s: LaneState): LaneStep {
  const probesInARow = s.probesInARow + 1;
  const jobsFirst = s.jobsWaiting ?? probesInARow % PROBES_BEFORE_JOBS === 0;
  return { state: { ...s, probesInARow, jobsFirst, thenClaim: [] }, action: { kind: 'run_probes', chain: !jobsFirst } };
}

function idle(s: LaneState): LaneStep {
  return { state: s, action: s.lingers ? { kind: 'linger', soon: s.probesInARow === 0 } : { kind: 'stop' } };
}
