// The local Auth's (./auth.ts) rate limits, as GoTrue's (supabase/auth
// internal/api/apilimiter/apilimiter.go, tollbooth over golang.org/x/time/rate):
// a token bucket per client IP, holding up to 30 requests (the burst) and
// refilled at the configured number per 5 minutes; a client's bucket starts full
// and is dropped an hour after it was made (tollbooth's expiring map), so the
// next request starts a full one. GoTrue's defaults: GOTRUE_RATE_LIMIT_TOKEN_REFRESH
// = 150 (every grant of POST /token: password and refresh_token alike) and
// GOTRUE_RATE_LIMIT_OTP = 30 (POST /signup with an email, the dashboard's
// "sign-ups and sign-ins"). Over the limit GoTrue answers 429
// over_request_rate_limit "Request rate limit reached".

/** GoTrue's limits (per client IP, per 5 minutes); the defaults are GoTrue's and hosted Supabase's. */
export interface AuthRateLimits {
  /** GOTRUE_RATE_LIMIT_TOKEN_REFRESH: POST /token requests (every grant) per 5 minutes. Default 150. */
  tokenPer5Minutes: number;
  /** GOTRUE_RATE_LIMIT_OTP: email sign-ups (POST /signup) per 5 minutes. Default 30. */
  signUpsPer5Minutes: number;
}

export const GOTRUE_RATE_LIMITS: AuthRateLimits = { tokenPer5Minutes: 150, signUpsPer5Minutes: 30 };
/** tollbooth's burst in every GoTrue limiter but anonymous sign-ins. */
export const GOTRUE_RATE_LIMIT_BURST = 30;
/** tollbooth's DefaultExpirationTTL: a client's bucket lives an hour from when it was made. */
export const GOTRUE_RATE_LIMIT_TTL_MS = 3_600_000;

interface Bucket {
  tokens: number;
  at: number;
  madeAt: number;
}

/** One limiter (one of GoTrue's `limiterOpts`): a bucket per key, given the time of each request. */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  constructor(
    per5Minutes: number,
    private readonly burst: number = GOTRUE_RATE_LIMIT_BURST,
    private readonly ttlMs: number = GOTRUE_RATE_LIMIT_TTL_MS,
  ) {
    if (!(per5Minutes > 0) || !(burst >= 1)) throw new Error(`rate limit: ${per5Minutes} per 5 minutes with a burst of ${burst} is not a limit`);
    this.perMs = per5Minutes / 300_000;
  }

  /** Takes one request for `key` at `nowMs`: true when it may go on, false when it is over the limit (nothing taken). */
  take(key: string, nowMs: number): boolean {
    let b = this.buckets.get(key);
    if (!b || nowMs - b.madeAt >= this.ttlMs) {
      if (this.buckets.size >= 10_000) this.sweep(nowMs);
      b = { tokens: this.burst, at: nowMs, madeAt: nowMs };
      this.buckets.set(key, b);
    }
    b.tokens = Math.min(this.burst, b.tokens + Math.max(0, nowMs - b.at) * this.perMs);
    b.at = Math.max(b.at, nowMs);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  private sweep(nowMs: number): void {
    for (const [key, b] of this.buckets) if (nowMs - b.madeAt >= this.ttlMs) this.buckets.delete(key);
  }
}
