// What a worker lane runs next (functions/worker/lane-decisions.ts), without a
// database: the lane's state machine driven by the events its actions would
// bring back. The same rules run against Postgres in worker-lanes,
// worker-linger, schedule-probes and idle-lanes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  laneNext, newLane, PROBES_BEFORE_JOBS, type LaneAction, type LaneEvent, type LaneState,
} from '../functions/worker/lane-decisions.ts';

/** Feeds `events` to a lane from `state` (a new lane by default); returns each action and the last state. */
function drive(events: LaneEvent[], state: LaneState = newLane(false)): { actions: LaneAction[]; state: LaneState } {
  const actions: LaneAction[] = [];
  let s = state;
  for (const e of events) {
    const step = laneNext(s, e);
    s = step.state;
    actions.push(step.action);
  }
  return { actions, state: s };
}

const ready = (canStart = true, lingering = false): LaneEvent => ({ type: 'ready', canStart, lingering });
const claimed = (claim: 'job' | 'probes', found: boolean): LaneEvent => ({ type: 'claimed', claim, found });
const reported = (handed: number | undefined, jobsWaiting?: boolean, runMade = false): LaneEvent =>
  ({ type: 'probes_reported', handed, jobsWaiting, runMade });
const kinds = (actions: LaneAction[]) => actions.map((a) => (a.kind === 'run_probes' ? `run_probes${a.chain ? '+chain' : ''}` : a.kind));

/** A lane running its `n`-th probe batch in a row (each report handing it the next probes, with no word on jobs). */
function probing(n: number, lingers = false): LaneState {
  let s = drive([ready(), claimed('job', false), claimed('probes', true)], newLane(lingers)).state;
  for (let i = 1; i < n; i++) s = drive([reported(1), ready()], s).state; // handed probes run at once
  return s;
}

describe('a lane with no word from a report', () => {
  it('asks for a job first, then for probes, and stops (or lingers) when neither is there', () => {
    expect(kinds(drive([ready(), claimed('job', false), claimed('probes', false)]).actions))
      .toEqual(['claim_job', 'claim_probes', 'stop']);
    // A lingering invocation's lane waits instead, expecting more soon (its last work was no probe).
    expect(drive([ready(), claimed('job', false), claimed('probes', false)], newLane(true)).actions.at(-1))
      .toEqual({ kind: 'linger', soon: true });
  });

  it('runs a job it finds, then starts a round again; a job handed back for lack of budget stops the lane', () => {
    expect(kinds(drive([ready(), claimed('job', true), { type: 'job_done', released: false }]).actions))
      .toEqual(['claim_job', 'run_job', 'ready']);
    expect(drive([ready(), claimed('job', true), { type: 'job_done', released: true }]).actions.at(-1)).toEqual({ kind: 'stop' });
  });

  it('stops at a round start without time to start work', () => {
    expect(drive([ready(false)]).actions).toEqual([{ kind: 'stop' }]);
  });
});

describe('a lane going from probes to probes', () => {
  it('chains: each report claims the next probes, which run even when the time to start more ran out', () => {
    const { actions } = drive([ready(), claimed('job', false), claimed('probes', true), reported(3), ready(false)]);
    expect(kinds(actions)).toEqual(['claim_job', 'claim_probes', 'run_probes+chain', 'ready', 'run_probes+chain']);
  });

  it('without word on jobs, asks for a job first every PROBES_BEFORE_JOBS reports', () => {
    let s = probing(1);
    const chains: boolean[] = [!s.jobsFirst]; // the first batch's report is chained
    for (let i = 0; i < 2 * PROBES_BEFORE_JOBS; i++) {
      const { actions, state } = drive([reported(1), ready()], s);
      const run = actions.at(-1)!;
      expect(run.kind).toBe('run_probes');
      chains.push(run.kind === 'run_probes' && run.chain);
      s = state;
    }
    // Batch n (from 1) is not chained when n is a multiple of PROBES_BEFORE_JOBS: its report claims nothing.
    expect(chains.map((c, i) => (c ? null : i + 1)).filter((n) => n !== null)).toEqual([PROBES_BEFORE_JOBS, 2 * PROBES_BEFORE_JOBS]);
  });

  it('asks for a job right after a report that said jobs wait; the report before the claim, claiming nothing, brings no word', () => {
    const { actions, state } = drive([reported(2, true), ready(), reported(undefined), ready(), claimed('job', false), claimed('probes', true)], probing(1));
    // The handed probes run unchained (the lane asks for a job next), then the job claim, then probes again, by turn.
    expect(kinds(actions)).toEqual(['ready', 'run_probes', 'ready', 'claim_job', 'claim_probes', 'run_probes+chain']);
    expect(state.jobsWaiting).toBeUndefined();
    // The next report that says jobs wait is followed again at once.
    expect(drive([reported(1, true), ready()], state).actions.at(-1)).toEqual({ kind: 'run_probes', chain: false });
  });

  it('claims the jobs of a run its report made right after the probes handed with it', () => {
    // Whatever the report said of jobs before its run (none wait, or no word), the next batch is the last before a job.
    for (const said of [false, undefined]) {
      const { actions } = drive([reported(2, said, true), ready(), reported(undefined), ready()], probing(3));
      expect(kinds(actions)).toEqual(['ready', 'run_probes', 'ready', 'claim_job']);
    }
    // A run made while jobs wait anyway: followed as any such word.
    expect(kinds(drive([reported(2, true, true), ready()], probing(3)).actions)).toEqual(['ready', 'run_probes']);
  });

  it('with no next probe due, goes straight to the idle poll when lingering, else asks for a job once', () => {
    const lingering = drive([reported(0), ready(true, true)], probing(1, true));
    expect(lingering.actions.at(-1)).toEqual({ kind: 'linger', soon: false }); // the poll's pause stays as it is
    expect(kinds(drive([reported(0), ready(true, false), claimed('job', false)], probing(1, true)).actions))
      .toEqual(['ready', 'claim_job', 'linger']);
    expect(kinds(drive([reported(0), ready(true, false), claimed('job', false)], probing(1)).actions))
      .toEqual(['ready', 'claim_job', 'stop']);
  });

  it('woken from the idle poll, asks for a probe first; a job resets that', () => {
    const s = drive([reported(0), ready(true, true), { type: 'linger_ended', woken: true }, ready()], probing(1, true));
    expect(kinds(s.actions)).toEqual(['ready', 'linger', 'ready', 'claim_probes']);
    expect(kinds(drive([claimed('probes', false), claimed('job', true), { type: 'job_done', released: false }, ready()], s.state).actions))
      .toEqual(['claim_job', 'run_job', 'ready', 'claim_job']);
    // A lane the poll lets go stops.
    expect(drive([{ type: 'linger_ended', woken: false }], s.state).actions).toEqual([{ kind: 'stop' }]);
  });
});

describe('whatever happens', () => {
  /** Events a lane's actions could bring back, at random. */
  const world = fc.record({
    canStart: fc.boolean(), lingering: fc.boolean(), found: fc.boolean(), released: fc.boolean(), woken: fc.boolean(),
    handed: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }), jobsWaiting: fc.option(fc.boolean(), { nil: undefined }),
    runMade: fc.boolean(),
  });
  type World = { canStart: boolean; lingering: boolean; found: boolean; released: boolean; woken: boolean;
    handed: number | undefined; jobsWaiting: boolean | undefined; runMade: boolean };
  /** The event an action brings back in world `w`; null for stop. */
  const answer = (a: LaneAction, w: World): LaneEvent | null => {
    switch (a.kind) {
      case 'ready': return { type: 'ready', canStart: w.canStart, lingering: w.lingering };
      case 'claim_job': return { type: 'claimed', claim: 'job', found: w.found };
      case 'claim_probes': return { type: 'claimed', claim: 'probes', found: w.found };
      case 'run_job': return { type: 'job_done', released: w.released };
      case 'run_probes': return { type: 'probes_reported', handed: w.handed, jobsWaiting: w.jobsWaiting, runMade: w.runMade };
      case 'linger': return { type: 'linger_ended', woken: w.woken };
      case 'stop': return null;
    }
  };

  it('a round makes at most one job claim and one probe claim, and a lane that does not linger never lingers', () => {
    fc.assert(fc.property(fc.boolean(), fc.array(world, { minLength: 1, maxLength: 200 }), (lingers, worlds) => {
      let step = { state: newLane(lingers), action: { kind: 'ready' } as LaneAction };
      let claims: string[] = [];
      for (const w of worlds) {
        const event = answer(step.action, w);
        if (!event) return;
        step = laneNext(step.state, event);
        const a = step.action;
        if (a.kind === 'claim_job' || a.kind === 'claim_probes') {
          expect(claims).not.toContain(a.kind);
          claims.push(a.kind);
        } else claims = [];
        if (!lingers) expect(a.kind).not.toBe('linger');
      }
    }));
  });

  it('jobs never wait behind a burst: with jobs waiting, a lane asks for one at least every PROBES_BEFORE_JOBS probe batches', () => {
    // Jobs wait all along, though claim_jobs may find none (capped); every report hands more probes and says so, or gives no word.
    fc.assert(fc.property(fc.array(fc.record({ said: fc.constantFrom(true, undefined), runMade: fc.boolean(), found: fc.boolean() }), { minLength: 1, maxLength: 100 }),
      (reports) => {
        let step = laneNext(newLane(false), ready());
        let batchesSinceJobClaim = 0;
        for (const r of reports) {
          const a = step.action;
          if (a.kind === 'claim_job') {
            batchesSinceJobClaim = 0;
            step = laneNext(step.state, claimed('job', false)); // capped: none found
          } else if (a.kind === 'claim_probes') {
            step = laneNext(step.state, claimed('probes', true));
          } else if (a.kind === 'run_probes') {
            batchesSinceJobClaim++;
            expect(batchesSinceJobClaim).toBeLessThanOrEqual(PROBES_BEFORE_JOBS);
            step = laneNext(step.state, reported(a.chain ? 1 : undefined, r.said, r.runMade));
          } else if (a.kind === 'ready') {
            step = laneNext(step.state, ready());
          } else {
            throw new Error(`unexpected ${a.kind}`);
          }
        }
      }));
  });
});
