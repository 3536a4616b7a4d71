// Lane growth, as pure decisions (decision 0043): after a lane takes work (a
// job or schedule probes), while every lane of the invocation is busy it looks
// for more work (claimable_jobs_exist) and adds a lane when there is some, up
// to maxLanes; at that many it asks for another invocation beside it. With the
// invocation's schedule-probe capacity full (schedule-probe-capacity.ts) it
// looks for jobs only, adds a lane for them, and due schedules ask for another
// invocation instead (decision 0065). So lanes follow the work that is due.
// No I/O: invocation.ts looks and starts lanes; tests/lane-growth.test.ts.
import type { WorkerSettings } from './runtime.ts';

/**
 * The lanes an invocation may grow to (WorkerSettings.maxLanes, at least the
 * lanes it starts with).
 */
export function laneCap(s: Pick<WorkerSettings, 'lanes' | 'maxLanes'>): number {
  return Math.max(1, s.lanes, s.maxLanes ?? s.lanes);
}

/** An invocation's lanes, as growth sees them. */
export interface LaneCounts {
  /** Lanes started so far. */
  started: number;
  /** Lanes still running. */
  live: number;
  /** Lanes running a job or probes right now. */
  busy: number;
  /** A look for more work is in flight (one at a time). */
  looking: boolean;
}

export interface GrowthLimits {
  maxLanes: number;
  /** Another invocation can be asked for (the handler gave the invocation a `moreWork`). */
  canAskInvocation: boolean;
}

/**
 * Whether to look for more work now: every lane busy, no look in flight, the
 * invocation not handing work back (`stopping`), time left to start a lane,
 * and a lane or another invocation could follow. `hasTime` is asked last, and
 * only then: asking sets the invocation's stop reason when time is short.
 */
export function shouldLook(c: LaneCounts, limits: GrowthLimits, stopping: boolean, hasTime: () => boolean): boolean {
  if (c.looking || c.busy < c.live || stopping || !hasTime()) return false;
  return c.started < limits.maxLanes || limits.canAskInvocation;
}

/**
 * What a look asks claimable_jobs_exist: `work`, jobs and due schedules; `jobs`, jobs only (the
 * invocation's probes are at their cap); `schedules`, then due schedules too, for another invocation.
 */
export type Look = 'work' | 'jobs' | 'schedules';

/** The first look: jobs only while the invocation holds as many probes as it may. */
export function firstLook(probesFull: boolean): Look {
  return probesFull ? 'jobs' : 'work';
}

export type Growth = 'add_lane' | 'ask_invocation' | 'look_for_schedules' | 'none';

/** What follows a look that found (or did not find) what it asked for. */
export function afterLook(look: Look, found: boolean, c: Pick<LaneCounts, 'started'>, limits: GrowthLimits): Growth {
  const ask: Growth = limits.canAskInvocation ? 'ask_invocation' : 'none';
  if (look === 'schedules') return found ? ask : 'none';
  if (found) return c.started < limits.maxLanes ? 'add_lane' : ask;
  return look === 'jobs' && limits.canAskInvocation ? 'look_for_schedules' : 'none';
}
