// The per-portal HubSpot request budget shared by every worker and the
// orchestrator: each request first takes a grant from Postgres, and each
// answer's X-HubSpot-RateLimit-* headers teach the budget the portal's own
// limits (docs/hubspot-limits.md).
import type { Sql } from '../db.ts';
import { DeadlineReached, HubSpotRateLimitError } from './errors.ts';
import type { RateLimitHeaders } from '../rate-limit-headers.ts';
import { acquireHubSpotRequests, recordHubSpotRateHeaders, type BudgetArguments } from '../sql/budget.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export { DeadlineReached };

/** How a portal is connected: HubSpot's limits differ (private apps share the account's; OAuth apps have their own per install). */
export type HubSpotAuthKind = 'private_app' | 'oauth';

export interface RateLimitSettings {
  /**
   * HUBSPOT_RATE_LIMIT_PER_10S: a ceiling per 10 s over every portal's learned
   * limit; null or absent: none (each portal gets what HubSpot says it has).
   * Without an auth kind (legacy callers) it is the limit itself, 190 when absent.
   */
  maxPer10s?: number | null;
  /** HUBSPOT_DAILY_RESERVE_PERCENT: share of a daily quota never spent, left for the account's other work (default 0). */
  dailyReservePercent?: number;
}

/** What we actually allow ourselves: a little under the limit, over a slightly longer rate window, so network jitter never crosses it. */
export function effectiveBudget(settings: RateLimitSettings): { maxRequests: number; windowMs: number } {
  const limit = settings.maxPer10s ?? 190;
  const headroom = Math.max(2, Math.ceil(limit * 0.02));
  return { maxRequests: Math.max(1, limit - headroom), windowMs: 10_150 };
}

/** acquire_hubspot_requests's arguments for a portal whose auth kind is known: the claim of a schedule probe grants with them too. */
export function budgetArguments(settings: RateLimitSettings): BudgetArguments {
  return { ...effectiveBudget(settings), ceiling: settings.maxPer10s ?? null, dailyReservePercent: settings.dailyReservePercent ?? 0 };
}

const defaultSleep = (ms: number) => sleep(ms);

/** The former name of DeadlineReached (what the budget throws when its wait would pass the caller's deadline). */
export const BudgetWaitPastDeadline = DeadlineReached;
export type BudgetWaitPastDeadline = DeadlineReached;

/**
 * Returns a `beforeRequest` hook that waits until the portal's shared budget
 * grants a request. With `authKind` the budget is the portal's learned limit
 * (seeded from the auth kind until HubSpot has answered, capped by
 * `settings.maxPer10s` when set); a day whose quota is down to the reserve
 * throws HubSpotRateLimitError with policy DAILY. Requests that wait at once
 * (a probe sends a dozen together) share one grant call: those asking while a
 * call is in flight go in the next. `granted`: requests granted already (with
 * a schedule probe's claim), taken before the budget is asked.
 */
export function sharedRequestBudget(
  sql: Sql,
  hubspotPortalId: string,
  settings: RateLimitSettings,
  sleep: (ms: number) => Promise<void> = defaultSleep,
  /** Milliseconds the caller has left; waiting longer than that throws DeadlineReached. */
  timeLeft?: () => number,
  authKind?: HubSpotAuthKind,
  granted = 0,
): () => Promise<void> {
  const { maxRequests, windowMs, ceiling, dailyReservePercent } = budgetArguments(settings);
  const learned = authKind ? { authKind, ceiling, dailyReservePercent } : undefined;
  type Waiter = { resolve: () => void; reject: (e: unknown) => void };
  const waiting: Waiter[] = [];
  let granting = false;

  const grant = async () => {
    granting = true;
    try {
      while (waiting.length > 0) {
        const batch = waiting.splice(0, 1000);
        let waitMs: number;
        try {
          const g = await acquireHubSpotRequests(sql, hubspotPortalId, batch.length, maxRequests, windowMs, learned);
          for (const w of batch.splice(0, g.granted)) w.resolve();
          waitMs = g.waitMs;
        } catch (e) {
          for (const w of batch) w.reject(e);
          continue;
        }
        if (batch.length === 0) continue;
        const refusal = waitMs < 0 ? new HubSpotRateLimitError(60_000, 'DAILY')
          : timeLeft && waitMs >= timeLeft() ? new DeadlineReached(`the HubSpot request budget asks for a ${waitMs} ms wait, past the deadline`, waitMs)
          : null;
        if (refusal) {
          for (const w of batch) w.reject(refusal);
          continue;
        }
        // The rest ask again after the wait, ahead of anyone who came meanwhile.
        try {
          await sleep(Math.min(waitMs, 1000) + Math.floor(Math.random() * 25));
        } catch (e) {
          for (const w of batch) w.reject(e); // the wait was cut short (an aborted signal)
          continue;
        }
        waiting.unshift(...batch);
      }
    } finally {
      granting = false;
    }
  };

  let prepaid = granted;
  return () => new Promise<void>((resolve, reject) => {
    if (prepaid > 0) {
      prepaid--;
      resolve();
      return;
    }
    waiting.push({ resolve, reject });
    // A microtask later: requests started in the same turn (Promise.all) share the call.
    if (!granting) {
      granting = true;
      queueMicrotask(() => void grant());
    }
  });
}

/** What this isolate last told each portal's budget (shared by every client of the isolate). */
const lastRecorded = new Map<string, { max: number; intervalMs: number; daily: number | null; at: number }>();

/**
 * Returns an `onRateLimitHeaders` hook that tells the portal's budget what
 * HubSpot's answers say: the first answer this isolate sees for the portal, any
 * change of limit, and then at most every 200 ms while the interval's remaining
 * is below half (where other apps' use matters), else every second; in between
 * the budget counts on its own.
 */
export function rateLimitLearner(sql: Sql, hubspotPortalId: string, now: () => number = Date.now): (h: RateLimitHeaders) => Promise<void> {
  return async (h) => {
    const t = now();
    const last = lastRecorded.get(hubspotPortalId);
    const due = last === undefined || last.max !== h.max || last.intervalMs !== h.intervalMs || last.daily !== h.daily
      || t - last.at >= (h.remaining < h.max / 2 ? 200 : 1_000);
    if (!due) return;
    lastRecorded.set(hubspotPortalId, { max: h.max, intervalMs: h.intervalMs, daily: h.daily, at: t });
    if (lastRecorded.size > 10_000) lastRecorded.delete(lastRecorded.keys().next().value!);
    await recordHubSpotRateHeaders(sql, hubspotPortalId, h);
  };
}
