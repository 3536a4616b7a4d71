// The per-portal HubSpot request budget shared by every worker and the
// orchestrator: each request first takes a grant from Postgres.
import type { Sql } from './db.ts';
import { DeadlineReached } from './hubspot/errors.ts';
import { acquireHubSpotRequest } from './queue.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export { DeadlineReached };

export interface RateLimitSettings {
  /** HubSpot's limit per rolling 10 s for this app (default 190). */
  maxPer10s: number;
}

/** What we actually allow ourselves: a little under the limit, over a slightly longer window, so network jitter never crosses it. */
export function effectiveBudget(settings: RateLimitSettings): { maxRequests: number; windowMs: number } {
  const headroom = Math.max(2, Math.ceil(settings.maxPer10s * 0.02));
  return { maxRequests: Math.max(1, settings.maxPer10s - headroom), windowMs: 10_150 };
}

const defaultSleep = (ms: number) => sleep(ms);

/** The former name of DeadlineReached (what the budget throws when its wait would pass the caller's deadline). */
export const BudgetWaitPastDeadline = DeadlineReached;
export type BudgetWaitPastDeadline = DeadlineReached;

/** Returns a `beforeRequest` hook that waits until the portal's shared budget grants a request. */
export function sharedRequestBudget(
  sql: Sql,
  hubspotPortalId: string,
  settings: RateLimitSettings,
  sleep: (ms: number) => Promise<void> = defaultSleep,
  /** Milliseconds the caller has left; waiting longer than that throws DeadlineReached. */
  timeLeft?: () => number,
): () => Promise<void> {
  const { maxRequests, windowMs } = effectiveBudget(settings);
  return async () => {
    for (;;) {
      const waitMs = await acquireHubSpotRequest(sql, hubspotPortalId, maxRequests, windowMs);
      if (waitMs <= 0) return;
      if (timeLeft && waitMs >= timeLeft()) throw new DeadlineReached(`the HubSpot request budget asks for a ${waitMs} ms wait, past the deadline`, waitMs);
      await sleep(Math.min(waitMs, 1000) + Math.floor(Math.random() * 25));
    }
  };
}
