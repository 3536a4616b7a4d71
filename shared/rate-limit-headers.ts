// HubSpot's rate-limit headers as one answer gives them: a type only, in a leaf,
// so the SQL layer (shared/sql/budget.ts, fetch.ts) records what the HubSpot
// transport parses without importing shared/hubspot/, which imports it.
/** What one HubSpot answer says of the app's limits (X-HubSpot-RateLimit-* headers). */
export interface RateLimitHeaders {
  /** X-HubSpot-RateLimit-Max: requests allowed per interval. */
  max: number;
  /** X-HubSpot-RateLimit-Remaining: left in the current interval, this request counted. */
  remaining: number;
  /** X-HubSpot-RateLimit-Interval-Milliseconds (10 000 when absent). */
  intervalMs: number;
  /** X-HubSpot-RateLimit-Daily: the day's quota; null when HubSpot sends none (OAuth apps have no daily limit). */
  daily: number | null;
  /** X-HubSpot-RateLimit-Daily-Remaining; null with `daily`. */
  dailyRemaining: number | null;
  /**
   * When the request was sent and its answer came (epoch ms, the caller's
   * clock): HubSpot counted it somewhere in between, so it surely counted in
   * `remaining` every request of ours granted in (answeredAt − interval, sentAt].
   */
  sentAt: number;
  answeredAt: number;
}
