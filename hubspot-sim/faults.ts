// Seeded, reproducible fault injection: errors, slow responses, dropped sockets, forced 429s.

import { createRandom, pick, type Random } from './prng.ts';

export interface FaultOptions {
  errorRate?: number; // 0..1
  errorStatuses?: number[]; // default [500, 502, 503]
  slowMs?: number;
  slowRate?: number; // 0..1, default 1 when slowMs is set
  dropRate?: number; // destroy the socket without a response
  forced429Rate?: number;
  retryAfterSeconds?: number; // sent as Retry-After on injected 429s (forced or scripted)
  seed?: number; // reseeds the fault PRNG
}

/** `lost`: the request is carried out (a write applied), then the socket drops before the answer. */
export type FaultAction = { kind: 'none' } | { kind: 'drop' } | { kind: 'lost' } | { kind: 'error'; status: number } | { kind: 'rate_limit' };

export interface FaultDecision {
  action: FaultAction;
  delayMs: number;
}

/** Decides, per admitted request, whether to inject a fault (seeded PRNG, plus scripted failNext). */
export class FaultInjector {
  private options: FaultOptions = {};
  private random: Random;
  private scripted: FaultAction[] = [];

  constructor(private readonly seed: number) {
    this.random = createRandom(seed);
  }

  // Replaces the active fault settings.
  set(options: FaultOptions): void {
    this.options = { ...options };
    if (options.seed !== undefined) this.random = createRandom(options.seed);
  }

  // Turns every fault off (including scripted ones) and restarts the PRNG from the seed.
  clear(): void {
    this.options = {};
    this.scripted = [];
    this.random = createRandom(this.seed);
  }

  // Retry-After (seconds) to send with injected 429s, if any.
  retryAfterSeconds(): number | null {
    return this.options.retryAfterSeconds ?? null;
  }

  // Makes the next `count` admitted requests fail with `status`, drop the socket, or drop it after carrying the request out ('lost').
  failNext(count: number, status: number | 'drop' | 'lost' = 503): void {
    for (let i = 0; i < count; i++) {
      this.scripted.push(status === 'drop' || status === 'lost' ? { kind: status } : status === 429 ? { kind: 'rate_limit' } : { kind: 'error', status });
    }
  }

  // Decides what happens to one request.
  decide(): FaultDecision {
    const o = this.options;
    const slow = o.slowMs !== undefined && o.slowMs > 0 && this.random() < (o.slowRate ?? 1);
    const delayMs = slow ? o.slowMs! : 0;
    const scripted = this.scripted.shift();
    if (scripted) return { action: scripted, delayMs };
    if (o.dropRate && this.random() < o.dropRate) return { action: { kind: 'drop' }, delayMs };
    if (o.errorRate && this.random() < o.errorRate) {
      const statuses = o.errorStatuses?.length ? o.errorStatuses : [500, 502, 503];
      return { action: { kind: 'error', status: pick(this.random, statuses) }, delayMs };
    }
    if (o.forced429Rate && this.random() < o.forced429Rate) return { action: { kind: 'rate_limit' }, delayMs };
    return { action: { kind: 'none' }, delayMs };
  }
}
