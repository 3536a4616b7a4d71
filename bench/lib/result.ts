// What one timed queue run reports, and the correctness checks every scenario records.

export interface QueueRunResult {
  jobs: number;
  /** From the first job in hand to the last completion being durable. */
  elapsedMs: number;
  jobsPerSec: number;
  clientCpuMs: number;
  serverCpuMs: number | null;
  /** Per-job claim→complete latencies in ms (when recorded). */
  latenciesMs?: number[];
}

export function queueRunResult(jobs: number, elapsedMs: number, cpu: { clientMs: number; serverMs: number | null }, latenciesMs?: number[]): QueueRunResult {
  return { jobs, elapsedMs, jobsPerSec: (jobs * 1000) / elapsedMs, clientCpuMs: cpu.clientMs, serverCpuMs: cpu.serverMs, latenciesMs };
}

export interface Check {
  scenario: string;
  name: string;
  ok: boolean;
  detail: string;
}

/** Collects correctness checks; a failed one makes the bench exit non-zero. */
export class Checks {
  readonly all: Check[] = [];
  constructor(private readonly log: (s: string) => void) {}

  expect(scenario: string, name: string, ok: boolean, detail: string): boolean {
    this.all.push({ scenario, name, ok, detail });
    if (!ok) this.log(`CHECK FAILED [${scenario}] ${name}: ${detail}`);
    return ok;
  }

  equal(scenario: string, name: string, actual: unknown, expected: unknown): boolean {
    return this.expect(scenario, name, actual === expected, `expected ${String(expected)}, got ${String(actual)}`);
  }

  get failed(): Check[] {
    return this.all.filter((c) => !c.ok);
  }
}

/** Counts how often each job id was handed to a worker; exactly once is the contract. */
export class ExactlyOnce {
  private readonly seen = new Map<string, number>();
  /** performance.now() of the first delivery. */
  firstAt: number | null = null;
  record(id: string | number): void {
    this.firstAt ??= performance.now();
    const key = String(id);
    this.seen.set(key, (this.seen.get(key) ?? 0) + 1);
  }
  get distinct(): number {
    return this.seen.size;
  }
  get duplicates(): number {
    let d = 0;
    for (const n of this.seen.values()) if (n > 1) d += n - 1;
    return d;
  }
  get total(): number {
    let t = 0;
    for (const n of this.seen.values()) t += n;
    return t;
  }
  /** Checks that `expected` distinct jobs were each processed once. */
  check(checks: Checks, scenario: string, label: string, expected: number): boolean {
    return checks.expect(scenario, `${label}: every job processed exactly once`, this.distinct === expected && this.duplicates === 0,
      `${this.distinct} distinct of ${expected} expected, ${this.duplicates} duplicate deliveries`);
  }
}
