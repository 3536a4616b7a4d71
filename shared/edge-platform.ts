// The edge runtime's lifecycle, injected: `EdgeRuntime.waitUntil`, the
// `beforeunload` event (CPU, memory or wall-clock limit reached), when the
// isolate started, and a CPU clock. Handlers take a Platform, so tests can
// drive a shutdown without patching globals.
import process from 'node:process';

export interface Platform {
  /** Keeps the isolate alive until `promise` settles (after the response went out). */
  waitUntil(promise: Promise<unknown>): void;
  /** Aborted when the runtime announces the isolate's end (`beforeunload`); its reason says why. */
  shutdown: AbortSignal;
  /** The `beforeunload` reason (hosted: cpu, memory, wall_clock, early_drop, termination), or null while running. */
  shutdownReason(): string | null;
  /** When the isolate started (ms since the epoch): its wall-clock limit counts from here. */
  isolateStartedAt: number;
  /** CPU ms this isolate's process has used so far, or null where it cannot be measured. */
  cpuMs(): number | null;
}

interface EdgeRuntimeGlobal {
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Whether this runtime has a real process CPU clock. Supabase's edge runtime
 * answers `process.cpuUsage()` with zeros ("not implemented"): by the time this
 * module has loaded, a real clock cannot read zero. Checked once, so the
 * runtime's not-implemented warning is printed at most once.
 */
const HAS_CPU_CLOCK = (() => {
  try {
    const u = process.cpuUsage();
    return u.user + u.system > 0;
  } catch {
    return false;
  }
})();

/** CPU ms of this process (user + system), or null where the runtime has no such clock (hosted Supabase). */
export function processCpuMs(): number | null {
  if (!HAS_CPU_CLOCK) return null;
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * The platform of the running isolate: Supabase's `EdgeRuntime` global and
 * `beforeunload` event where they exist; elsewhere (plain Deno, Node) promises
 * passed to waitUntil just run, and a shutdown never comes.
 */
export function platformFromGlobals(): Platform {
  const g = globalThis as { EdgeRuntime?: EdgeRuntimeGlobal; addEventListener?: (type: string, fn: (e: Event) => void) => void };
  const controller = new AbortController();
  let reason: string | null = null;
  g.addEventListener?.('beforeunload', (e: Event) => {
    const detail = (e as CustomEvent<{ reason?: unknown } | undefined>).detail;
    reason = typeof detail?.reason === 'string' ? detail.reason : 'unknown';
    controller.abort(new Error(`isolate shutting down: ${reason}`));
  });
  const runtime = g.EdgeRuntime;
  // The isolate's CPU counts from here (the function is loaded and about to serve),
  // as the local runtime counts it; hosted also counts module evaluation, which
  // the worker's margins cover.
  const cpuAtReady = processCpuMs();
  return {
    waitUntil: (p) => {
      p.catch(() => undefined);
      runtime?.waitUntil(p);
    },
    shutdown: controller.signal,
    shutdownReason: () => reason,
    isolateStartedAt: performance.timeOrigin,
    cpuMs: () => {
      const c = processCpuMs();
      return c === null || cpuAtReady === null ? null : c - cpuAtReady;
    },
  };
}

/**
 * A platform for tests and Node processes: records waitUntil promises (await
 * `settled()`), and `shutDown(reason)` plays the runtime's `beforeunload`.
 */
export function manualPlatform(opts: { isolateStartedAt?: number; cpuMs?: () => number | null } = {}): Platform & {
  shutDown(reason: string): void;
  settled(): Promise<void>;
} {
  const controller = new AbortController();
  let reason: string | null = null;
  const pending = new Set<Promise<unknown>>();
  return {
    waitUntil(p) {
      const tracked = p.catch(() => undefined).finally(() => pending.delete(tracked));
      pending.add(tracked);
    },
    shutdown: controller.signal,
    shutdownReason: () => reason,
    isolateStartedAt: opts.isolateStartedAt ?? Date.now(),
    cpuMs: opts.cpuMs ?? processCpuMs,
    shutDown(r) {
      reason = r;
      controller.abort(new Error(`isolate shutting down: ${r}`));
    },
    async settled() {
      while (pending.size > 0) await Promise.all([...pending]);
    },
  };
}
