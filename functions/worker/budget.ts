// An invocation's budget: wall clock (from the request, capped by the
// isolate's own wall clock less a reserve) and the isolate's accumulated CPU.
// A unit of work starts only when its expected cost still fits; the first
// stop reason met is kept as the invocation's.
import type { Platform } from '../../shared/edge-platform.ts';
import type { StopReason } from '../../shared/stop-reason.ts';
import type { UnitCost } from './job-context.ts';
import type { WorkerSettings } from './runtime.ts';

export type { StopReason };

/** Margins, in ms: what a unit of work must leave in hand, at the least. */
const MIN_WALL_RESERVE_MS = 3_000;
const MIN_CPU_RESERVE_MS = 100;

export interface Budget {
  /** Ms of wall clock left before the invocation must have checkpointed and let go. */
  timeLeft(): number;
  /** Null when a unit of work of this cost still fits; else why not (and the invocation's stop reason is set). */
  outOfBudget(next?: UnitCost): string | null;
  /** CPU ms this invocation has used so far (0 where it cannot be measured). */
  cpuMs(): number;
  /** The isolate's accumulated CPU ms (0 where it cannot be measured). */
  isolateCpuMs(): number;
  /** Whether a CPU clock exists here. */
  readonly cpuMeasured: boolean;
  /** Sets the stop reason if none is set yet; returns `message` (what the caller reports). */
  stopWith(stopReason: StopReason, message: string): string;
  /** The first stop reason set, if any. */
  stopReason(): StopReason | null;
  now(): number;
  shutdown?: AbortSignal;
}

/** The budget of an invocation starting now. */
export function invocationBudget(s: WorkerSettings, platform: Platform | undefined, now: () => number): Budget {
  const started = now();
  const isolateDeadline = platform && s.isolateWallClockMs
    ? platform.isolateStartedAt + s.isolateWallClockMs - (s.wallReserveMs ?? 10_000)
    : Infinity;
  const deadline = Math.min(started + s.budgetMs, isolateDeadline);
  const timeLeft = () => deadline - now();
  // The edge runtime accumulates CPU per isolate, across its requests: the
  // budget is the isolate's total, so a request landing on a busy isolate gets less.
  const cpuClock = platform?.cpuMs ?? (() => null);
  const cpuAtStart = cpuClock();
  const isolateCpuMs = () => cpuClock() ?? 0;
  const cpuMs = () => isolateCpuMs() - (cpuAtStart ?? 0);
  const shutdown = platform?.shutdown;
  let stopReason: StopReason | null = null;
  const stopWith = (reason: StopReason, message: string) => {
    stopReason ??= reason;
    return message;
  };
  const outOfBudget = (next: UnitCost = {}): string | null => {
    if (shutdown?.aborted) return stopWith('shutdown', `isolate shutting down (${platform?.shutdownReason() ?? 'unknown'})`);
    if (timeLeft() < Math.max(MIN_WALL_RESERVE_MS, (next.wallMs ?? 0) * 2)) return stopWith('time_budget', 'wall-clock budget spent');
    if (s.cpuBudgetMs !== undefined && cpuAtStart !== null
        && isolateCpuMs() + Math.max(MIN_CPU_RESERVE_MS, (next.cpuMs ?? 0) * 2) > s.cpuBudgetMs) {
      return stopWith('cpu_budget', 'CPU budget spent');
    }
    return null;
  };
  return { timeLeft, outOfBudget, cpuMs, isolateCpuMs, cpuMeasured: cpuAtStart !== null, stopWith, stopReason: () => stopReason, now, shutdown };
}
