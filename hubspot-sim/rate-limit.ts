// HubSpot's request limits as its API usage guidelines document them: a rolling
// window per bucket (every private app of an account shares one; each OAuth app
// has its own per installing account), a daily quota for private apps that resets
// at midnight in the account's time zone, and the X-HubSpot-RateLimit-* headers
// HubSpot sends per auth kind (OAuth answers carry no daily headers).

/** An account's subscription tier: it sets its private apps' limits. */
export type AccountTier = 'free' | 'starter' | 'professional' | 'enterprise';

/** Private apps of an account, per tier: requests per 10 s and per day (the API limit increase: 250 / 1,000,000). */
export const PRIVATE_APP_LIMITS: Readonly<Record<AccountTier | 'api_limit_increase', { maxPer10s: number; daily: number }>> = {
  free: { maxPer10s: 100, daily: 250_000 },
  starter: { maxPer10s: 100, daily: 250_000 },
  professional: { maxPer10s: 190, daily: 650_000 },
  enterprise: { maxPer10s: 190, daily: 1_000_000 },
  api_limit_increase: { maxPer10s: 250, daily: 1_000_000 },
};

/** A public (OAuth) app: per installing account, no daily limit. */
export const OAUTH_APP_LIMIT_PER_10S = 110;

/** One bucket's limits: `daily` null = none (OAuth). */
export interface BucketLimits {
  maxPerWindow: number;
  windowMs: number;
  daily: number | null;
  /** The account's time zone: the daily count resets at midnight there. */
  timeZone: string;
  /** Share of maxPerWindow other apps of the account spend, steadily (private-app buckets only). */
  otherAppsShare: number;
}

export interface RateLimitConfig {
  maxPer10s: number;
  daily: number;
  windowMs: number;
}

export type RateDecision =
  | { allowed: true; headers: Record<string, string> }
  | { allowed: false; policy: 'TEN_SECONDLY_ROLLING' | 'DAILY'; headers: Record<string, string> };

/** The calendar day of `now` in `timeZone` (YYYY-MM-DD). */
export function dayIn(timeZone: string, now: number): string {
  return dayFormat(timeZone).format(now);
}

const dayFormats = new Map<string, Intl.DateTimeFormat>();
function dayFormat(timeZone: string): Intl.DateTimeFormat {
  let f = dayFormats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    dayFormats.set(timeZone, f);
  }
  return f;
}

class Bucket {
  private times: number[] = [];
  private head = 0;
  daily = 0;
  day = '';

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

/** Rolling-window + daily limiter per bucket key; `peak` is the busiest window of admitted requests of any bucket. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  peak = 0;

  /** `config`: the default limits of `take(key)` without bucket limits (the former one-size form). */
  constructor(private readonly config: RateLimitConfig = { maxPer10s: 190, daily: 1_000_000, windowMs: 10_000 }) {}

  // Admits or rejects one request of the bucket `key`; only admitted requests count toward the window and the day.
  take(key: string, now = Date.now(), limits?: BucketLimits): RateDecision {
    const l = limits ?? {
      maxPerWindow: this.config.maxPer10s, windowMs: this.config.windowMs, daily: this.config.daily, timeZone: 'UTC', otherAppsShare: 0,
    };
    let bucket = this.buckets.get(key);
    if (!bucket) {
      bucket = new Bucket();
      this.buckets.set(key, bucket);
    }
    const day = dayIn(l.timeZone, now);
    if (bucket.day !== day) {
      bucket.day = day; // midnight in the account's time zone: the day's count starts again
      bucket.daily = 0;
    }
    const others = Math.round(l.otherAppsShare * l.maxPerWindow);
    const inWindow = bucket.count(now, l.windowMs) + others;
    if (l.daily !== null && bucket.daily >= l.daily) return { allowed: false, policy: 'DAILY', headers: headers(l, inWindow, bucket.daily) };
    if (inWindow >= l.maxPerWindow) return { allowed: false, policy: 'TEN_SECONDLY_ROLLING', headers: headers(l, inWindow, bucket.daily) };
    bucket.add(now);
    this.peak = Math.max(this.peak, inWindow + 1 - others);
    return { allowed: true, headers: headers(l, inWindow + 1, bucket.daily) };
  }

  // Forgets daily usage (e.g. to simulate midnight) without touching the rolling windows.
  resetDaily(): void {
    for (const bucket of this.buckets.values()) bucket.daily = 0;
  }
}

// The headers HubSpot sends: the interval's three always; the daily two only where there is a daily limit (private apps).
function headers(l: BucketLimits, used: number, usedToday: number): Record<string, string> {
  const h: Record<string, string> = {
    'X-HubSpot-RateLimit-Max': String(l.maxPerWindow),
    'X-HubSpot-RateLimit-Remaining': String(Math.max(0, l.maxPerWindow - used)),
    'X-HubSpot-RateLimit-Interval-Milliseconds': String(l.windowMs),
  };
  if (l.daily !== null) {
    h['X-HubSpot-RateLimit-Daily'] = String(l.daily);
    h['X-HubSpot-RateLimit-Daily-Remaining'] = String(Math.max(0, l.daily - usedToday));
  }
  return h;
}
