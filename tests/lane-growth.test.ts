// Lane growth (functions/worker/lane-growth.ts) and the invocation's cap on
// schedule probes held (its schedule-probe capacity,
// schedule-probe-capacity.ts), without a database. The same rules run against
// Postgres in tests/worker-lanes.test.ts and schedule-probes.
import { describe, expect, it } from 'vitest';
import { afterLook, firstLook, laneCap, shouldLook, type LaneCounts } from '../functions/worker/lane-growth.ts';
import { scheduleProbeCapacity } from '../functions/worker/schedule-probe-capacity.ts';

const busy = (started: number, over: Partial<LaneCounts> = {}): LaneCounts => ({ started, live: started, busy: started, looking: false, ...over });
const limits = (maxLanes: number, canAskInvocation = true) => ({ maxLanes, canAskInvocation });

describe('laneCap', () => {
  it('is maxLanes, at least the lanes an invocation starts with, at least one', () => {
    expect(laneCap({ lanes: 2, maxLanes: 16 })).toBe(16);
    expect(laneCap({ lanes: 4, maxLanes: 2 })).toBe(4);
    expect(laneCap({ lanes: 3 })).toBe(3);
    expect(laneCap({ lanes: 0, maxLanes: 0 })).toBe(1);
  });
});

describe('whether an invocation looks for more work', () => {
  it('looks only while every lane is busy, no look is in flight and work is not being handed back', () => {
    const yes = () => true;
    expect(shouldLook(busy(2), limits(4), false, yes)).toBe(true);
    expect(shouldLook(busy(2, { busy: 1 }), limits(4), false, yes)).toBe(false);
    expect(shouldLook(busy(2, { looking: true }), limits(4), false, yes)).toBe(false);
    expect(shouldLook(busy(2), limits(4), true, yes)).toBe(false);
    expect(shouldLook(busy(2), limits(4), false, () => false)).toBe(false);
  });

  it('at maxLanes, only when another invocation can be asked for', () => {
    expect(shouldLook(busy(4), limits(4, true), false, () => true)).toBe(true);
    expect(shouldLook(busy(4), limits(4, false), false, () => true)).toBe(false);
  });

  it('asks whether time is left only once the lanes are all busy (asking sets the stop reason when short)', () => {
    let asked = 0;
    const hasTime = () => (asked++, true);
    shouldLook(busy(2, { busy: 1 }), limits(4), false, hasTime);
    shouldLook(busy(2, { looking: true }), limits(4), false, hasTime);
    shouldLook(busy(2), limits(4), true, hasTime);
    expect(asked).toBe(0);
    shouldLook(busy(4), limits(4, false), false, hasTime); // at maxLanes with no invocation to ask: asked all the same, as before
    expect(asked).toBe(1);
  });
});

describe('what a look leads to', () => {
  it('work found: a lane below maxLanes, another invocation at maxLanes', () => {
    expect(afterLook('work', true, busy(2), limits(4))).toBe('add_lane');
    expect(afterLook('work', true, busy(4), limits(4))).toBe('ask_invocation');
    expect(afterLook('work', true, busy(4), limits(4, false))).toBe('none');
    expect(afterLook('work', false, busy(2), limits(4))).toBe('none');
  });

  it('with the invocation\'s probes at their cap: jobs only get a lane, due schedules another invocation', () => {
    expect(firstLook(true)).toBe('jobs');
    expect(firstLook(false)).toBe('work');
    expect(afterLook('jobs', true, busy(2), limits(4))).toBe('add_lane');
    expect(afterLook('jobs', false, busy(2), limits(4))).toBe('look_for_schedules');
    expect(afterLook('schedules', true, busy(2), limits(4))).toBe('ask_invocation'); // below maxLanes too: a lane could not take them
    expect(afterLook('schedules', false, busy(2), limits(4))).toBe('none');
    // No invocation to ask for: no look for schedules at all.
    expect(afterLook('jobs', false, busy(2), limits(4, false))).toBe('none');
  });
});

describe('schedule-probe capacity', () => {
  it('lets lanes claim up to perLane each and all of them up to the cap', () => {
    const capacity = scheduleProbeCapacity(4, 6);
    expect(capacity.reserve()).toBe(4);
    expect(capacity.reserve()).toBe(2);
    expect(capacity.full()).toBe(true);
    expect(capacity.reserve()).toBe(0);
    capacity.settle(4, 1); // the first claim got one probe
    expect(capacity.full()).toBe(false);
    expect(capacity.reserve()).toBe(3);
  });

  it('a report that ends probes makes room for its own next claim', () => {
    const capacity = scheduleProbeCapacity(4, 4);
    capacity.settle(capacity.reserve(), 4); // a lane holds 4: full
    expect(capacity.reserve()).toBe(0);
    const next = capacity.reserve(4); // its report ends those 4 and claims the next
    expect(next).toBe(4);
    capacity.settle(4 + next, 2);
    expect(capacity.reserve()).toBe(2);
  });
});
