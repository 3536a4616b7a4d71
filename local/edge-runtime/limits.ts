// The resource limits of one edge-function isolate, with hosted Supabase's
// values as defaults. Where each number comes from (supabase/edge-runtime):
// - CPU soft 1000 ms / hard 2000 ms, memory 256 MiB, wall clock 400 s: the
//   runtime's built-in user-worker defaults (.cargo/config.toml,
//   SUPABASE_RESOURCE_LIMIT_*); the platform docs give 150 s on the free plan.
// - beforeunload at 90% of the CPU hard limit, of memory and of the wall clock:
//   the `--dispatch-beforeunload-*-ratio` defaults (cli/src/flags.rs).
// - retiring at 50% of the wall clock and at 50% of memory:
//   crates/base/src/worker/supervisor/strategy_per_worker.rs and
//   crates/base/src/runtime/mod.rs (mem_reached_half).
// - request idle timeout 150 s (504): the platform docs' limits page.

export interface EdgeLimits {
  /** Accumulated isolate CPU at which the isolate retires (no new requests; dropped once idle). 0 with cpuHardLimitMs 0 disables CPU limits. */
  cpuSoftLimitMs: number;
  /** Accumulated isolate CPU at which the isolate is terminated (in-flight requests get 546). */
  cpuHardLimitMs: number;
  /** Wall clock per isolate, from its start. 0 disables. */
  wallClockLimitMs: number;
  /** Used V8 heap + external memory at which the isolate is terminated; also its V8 old-space limit. 0 disables. */
  memoryLimitMb: number;
  /** % of cpuHardLimitMs at which beforeunload("cpu") is dispatched (once). */
  beforeunloadCpuPct: number;
  /** % of memoryLimitMb at which beforeunload("memory") is dispatched (once). */
  beforeunloadMemoryPct: number;
  /** % of wallClockLimitMs at which beforeunload("wall_clock") is dispatched (once). */
  beforeunloadWallClockPct: number;
  /** A request without response headers after this long gets 504 IDLE_TIMEOUT. 0 disables. */
  requestIdleTimeoutMs: number;
}

/** Wall clock per isolate by plan (platform docs: 150 s free, 400 s paid). */
export const WALL_CLOCK_BY_PLAN = { free: 150_000, paid: 400_000 } as const;
export type Plan = keyof typeof WALL_CLOCK_BY_PLAN;

export const HOSTED_LIMITS: Readonly<EdgeLimits> = Object.freeze({
  cpuSoftLimitMs: 1000,
  cpuHardLimitMs: 2000,
  wallClockLimitMs: WALL_CLOCK_BY_PLAN.free,
  memoryLimitMb: 256,
  beforeunloadCpuPct: 90,
  beforeunloadMemoryPct: 90,
  beforeunloadWallClockPct: 90,
  requestIdleTimeoutMs: 150_000,
});

export type LimitOptions = Partial<EdgeLimits> & { plan?: Plan };

/** Hosted defaults, the plan's wall clock, then explicit overrides. */
export function resolveLimits(opts: LimitOptions = {}): EdgeLimits {
  const { plan, ...overrides } = opts;
  const limits: EdgeLimits = { ...HOSTED_LIMITS, ...(plan ? { wallClockLimitMs: WALL_CLOCK_BY_PLAN[plan] } : {}) };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new Error(`edge limits: ${k} must be a number >= 0`);
    (limits as unknown as Record<string, number>)[k] = v;
  }
  for (const k of ['beforeunloadCpuPct', 'beforeunloadMemoryPct', 'beforeunloadWallClockPct'] as const) {
    if (limits[k] > 99) throw new Error(`edge limits: ${k} must be at most 99 (as hosted)`);
  }
  return limits;
}

/** Shutdown reasons: hosted's ShutdownReason names, plus two for what only happens locally. */
export type ShutdownReason =
  | 'EarlyDrop'
  | 'WallClockTime'
  | 'CPUTime'
  | 'Memory'
  | 'TerminationRequested'
  | 'EventLoopCompleted'
  /** The isolate exited on its own with an error (uncaught exception, crash). */
  | 'UncaughtException'
  /** Killed from outside (killIsolates / restart, e.g. by the chaos soak). */
  | 'Killed'
  /** The function failed to start. */
  | 'BootFailure';

/** The limit reasons: terminations that cut off whatever was still running. */
export const LIMIT_REASONS: readonly ShutdownReason[] = ['CPUTime', 'Memory', 'WallClockTime'];
