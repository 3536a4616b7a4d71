// The schedule-probe capacity: the schedule probes an invocation holds at
// once (held, or reserved for a claim in flight): a lane claims up to
// `perLane`, and all lanes together at most `cap`, max(maxLanes,
// probesPerLane): lanes × probes per lane had one
// isolate's HubSpot requests in the thousands, and 4,000 portals broke
// (decision 0065). Pure bookkeeping; tests/lane-growth.test.ts.

export interface ScheduleProbeCapacity {
  /** Reserves room for a lane's next claim and says how much; `ending`: probes held whose report makes the claim. */
  reserve(ending?: number): number;
  /** A claim or report done: `before` (what it reserved, and the probes it ended) no longer held, `claimed` held. */
  settle(before: number, claimed: number): void;
  /** No room for another claim. */
  full(): boolean;
}

export function scheduleProbeCapacity(perLane: number, cap: number): ScheduleProbeCapacity {
  let held = 0;
  return {
    reserve(ending = 0) {
      const room = Math.max(0, Math.min(perLane, cap - held + ending));
      held += room;
      return room;
    },
    settle(before, claimed) {
      held += claimed - before;
    },
    full: () => held >= cap,
  };
}
