// The per-portal HubSpot request budget shared by every worker and the
// orchestrator: each request first takes a grant from Postgres.
import type { Sql } from './db.ts';
import { acquireHubSpotRequest } from './queue.ts';

export interface RateLimitSettings {
  /** HubSpot's limit per rolling 10 s for this app (default 190). */
  maxPer10s: number;
}

/** What we actually allow ourselves: a little under the limit, over a slightly longer window, so network jitter never crosses it. */
export function effectiveBudget(settings: RateLimitSettings): { maxRequests: number; windowMs: number } {
  const headroom = Math.max(2, Math.ceil(settings.maxPer10s * 0.02));
  return { maxRequests: Math.max(1, settings.maxPer10s - headroom), windowMs: 10_150 };
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The budget would make the caller wait past its own deadline: checkpoint and let go instead. */
export class BudgetWaitPastDeadline extends Error {
  override name = 'BudgetWaitPastDeadline';
}

/** Returns a `beforeRequest` hook that waits until the portal's shared budget grants a request. */
export function sharedRequestBudget(
  sql: Sql,
  hubspotPortalId: string,
  settings: RateLimitSettings,
  sleep: (ms: number) => Promise<void> = defaultSleep,
  /** Milliseconds the caller has left; waiting longer than that throws BudgetWaitPastDeadline. */
  timeLeft?: () => number,
): () => Promise<void> {
  const { maxRequests, windowMs } = effectiveBudget(settings);
  return async () => {
    for (;;) {
      const waitMs = await acquireHubSpotRequest(sql, hubspotPortalId, maxRequests, windowMs);
      if (waitMs <= 0) return;
      if (timeLeft && waitMs >= timeLeft()) throw new BudgetWaitPastDeadline(`the HubSpot request budget asks for a ${waitMs} ms wait`);
      await sleep(Math.min(waitMs, 1000) + Math.floor(Math.random() * 25));
    }
  };
}
