// Per-token rolling-window and daily request counters, as HubSpot applies to private-app tokens.

export interface RateLimitConfig {
  maxPer10s: number;
  daily: number;
  windowMs: number;
}

export type RateDecision =
  | { allowed: true; headers: Record<string, string> }
  | { allowed: false; policy: 'TEN_SECONDLY_ROLLING' | 'DAILY'; headers: Record<string, string> };

class TokenWindow {
  private times: number[] = [];
  private head = 0;
  daily = 0;

  // Requests still inside the window ending at `now`.
  count(now: number, windowMs: number): number {
    const cutoff = now - windowMs;
    while (this.head < this.times.length && this.times[this.head]! <= cutoff) this.head++;
    if (this.head > 4096 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
    return this.times.length - this.head;
  }

  add(now: number): void {
    this.times.push(now);
    this.daily++;
  }
}

/** Rolling-window + daily limiter keyed by token hash; `peak` is the busiest window of admitted requests. */
export class RateLimiter {
  private readonly windows = new Map<string, TokenWindow>();
  peak = 0;

  constructor(private readonly config: RateLimitConfig) {}

  // Admits or rejects one request of `tokenKey`; only admitted requests count toward the window.
  take(tokenKey: string, now = Date.now()): RateDecision {
    let window = this.windows.get(tokenKey);
    if (!window) {
      window = new TokenWindow();
      this.windows.set(tokenKey, window);
    }
    const { maxPer10s, daily, windowMs } = this.config;
    const inWindow = window.count(now, windowMs);
    if (window.daily >= daily) return { allowed: false, policy: 'DAILY', headers: this.headers(inWindow, window.daily) };
    if (inWindow >= maxPer10s) return { allowed: false, policy: 'TEN_SECONDLY_ROLLING', headers: this.headers(inWindow, window.daily) };
    window.add(now);
    this.peak = Math.max(this.peak, inWindow + 1);
    return { allowed: true, headers: this.headers(inWindow + 1, window.daily) };
  }

  // Forgets daily usage (e.g. to simulate midnight) without touching the rolling windows.
  resetDaily(): void {
    for (const window of this.windows.values()) window.daily = 0;
  }

  private headers(used: number, usedToday: number): Record<string, string> {
    const { maxPer10s, daily, windowMs } = this.config;
    return {
      'X-HubSpot-RateLimit-Max': String(maxPer10s),
      'X-HubSpot-RateLimit-Remaining': String(Math.max(0, maxPer10s - used)),
      'X-HubSpot-RateLimit-Interval-Milliseconds': String(windowMs),
      'X-HubSpot-RateLimit-Daily': String(daily),
      'X-HubSpot-RateLimit-Daily-Remaining': String(Math.max(0, daily - usedToday)),
    };
  }
}
