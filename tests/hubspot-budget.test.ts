// The shared HubSpot budget hook: waits for a grant, but never past the caller's
// deadline; requests that wait at once share one grant call (a partial grant
// lets the rest wait), and the batch grant counts every request it grants.
// An answer's rate headers are written only when they say something new.
import { describe, expect, it } from 'vitest';
import { BudgetWaitPastDeadline, effectiveBudget, sharedRequestBudget } from '../shared/hubspot/request-budget.ts';
import { HubSpotRateLimitError } from '../shared/hubspot/errors.ts';
import { acquireHubSpotRequests, recordHubSpotRateHeaders } from '../shared/sql/budget.ts';
import type { Sql } from '../shared/db.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

describe('sharedRequestBudget', () => {
  it('keeps headroom under HubSpot limit', () => {
    expect(effectiveBudget({ maxPer10s: 190 })).toEqual({ maxRequests: 186, windowMs: 10_150 });
    expect(effectiveBudget({ maxPer10s: 3 }).maxRequests).toBe(1);
  });

  it('waits for a grant when the window is full, and refuses to wait past the deadline', async () => {
    const sleeps: number[] = [];
    // maxPer10s 3 -> one grant per window.
    const take = sharedRequestBudget(db.sql, '777', { maxPer10s: 3 }, async (ms) => {
      sleeps.push(ms);
      await db.sql`update private.hubspot_request_budgets set granted_at = '{}' where hubspot_portal_id = 777`;
    });
    await take();
    expect(sleeps).toEqual([]);
    await take(); // full window: sleeps once (the fake sleep empties the window), then gets its grant
    expect(sleeps.length).toBe(1);
    expect(sleeps[0]).toBeGreaterThan(0);

    const hurried = sharedRequestBudget(db.sql, '777', { maxPer10s: 3 }, async () => {}, () => 500);
    await expect(hurried()).rejects.toBeInstanceOf(BudgetWaitPastDeadline);
  });

  it('grants 13 requests started together in one call, and counts all 13', async () => {
    const portal = '778';
    const calls = await countedCalls((sql) => {
      const take = sharedRequestBudget(sql, portal, { maxPer10s: 190 });
      return Promise.all(Array.from({ length: 13 }, () => take()));
    });
    expect(calls).toBe(1);
    const [row] = await db.sql`select cardinality(granted_at) as n from private.hubspot_request_budgets where hubspot_portal_id = 778`;
    expect(row!.n).toBe(13);
    const [counted] = await db.sql`select coalesce(sum(requests), 0)::int as n from private.hubspot_request_counts where hubspot_portal_id = 778`;
    expect(counted!.n).toBe(13);
  });

  it('a partial grant lets the first through and the rest wait for room, in order', async () => {
    // maxPer10s 10 -> 8 a window: 5 already taken leaves room for 3 of 6.
    const portal = '779';
    expect(await acquireHubSpotRequests(db.sql, portal, 5, 8, 10_150)).toEqual({ granted: 5, waitMs: 0 });
    const sleeps: number[] = [];
    const take = sharedRequestBudget(db.sql, portal, { maxPer10s: 10 }, async (ms) => {
      sleeps.push(ms);
      await db.sql`update private.hubspot_request_budgets set granted_at = '{}' where hubspot_portal_id = 779`;
    });
    const done: number[] = [];
    await Promise.all(Array.from({ length: 6 }, (_, i) => take().then(() => done.push(i))));
    expect(done).toEqual([0, 1, 2, 3, 4, 5]);
    expect(sleeps.length).toBe(1); // the 3 left over waited once, together
    expect(sleeps[0]).toBeGreaterThan(0);
  });

  it('a batch past the deadline or the day\'s reserve is refused whole; those granted go', async () => {
    const portal = '780';
    await acquireHubSpotRequests(db.sql, portal, 7, 8, 10_150);
    const hurried = sharedRequestBudget(db.sql, portal, { maxPer10s: 10 }, async () => {}, () => 500);
    const outcomes = await Promise.allSettled(Array.from({ length: 3 }, () => hurried()));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(BudgetWaitPastDeadline);

    // A known day with 3 left above a 10% reserve of 100: 3 of 5 granted, the rest refused for the day.
    const daily = '781';
    await db.sql`insert into private.hubspot_request_budgets (hubspot_portal_id, max_per_interval, interval_ms, limit_source, daily_limit, daily_remaining, daily_seen_at)
                 values (781, 100, 10000, 'headers', 100, 13, now())`;
    expect(await acquireHubSpotRequests(db.sql, daily, 5, 190, 10_000, { authKind: 'private_app', ceiling: null, dailyReservePercent: 10 }))
      .toEqual({ granted: 3, waitMs: -1 });
    const day = sharedRequestBudget(db.sql, daily, { dailyReservePercent: 10 }, undefined, undefined, 'private_app');
    await expect(day()).rejects.toBeInstanceOf(HubSpotRateLimitError);
  });
});

describe('record_hubspot_rate_headers', () => {
  it('writes what an answer says that is new (limits, other apps, the day drifting, a new day), and nothing when it repeats the row', async () => {
    const portal = 782;
    const row = async () => (await db.sql`select xmin::text as version, max_per_interval, limit_source, other_apps_requests, daily_remaining
        from private.hubspot_request_budgets where hubspot_portal_id = ${portal}`)[0]!;
    const { granted } = await acquireHubSpotRequests(db.sql, String(portal), 13, 190, 10_000, { authKind: 'private_app', ceiling: null, dailyReservePercent: 0 });
    expect(granted).toBe(13);
    const at = Date.now() + 5; // sent after the grant: HubSpot counted our 13
    const answer = { max: 190, intervalMs: 10_000, remaining: 177, daily: 1_000_000, dailyRemaining: 900_000, sentAt: at, answeredAt: at + 150 };
    await recordHubSpotRateHeaders(db.sql, portal, answer);
    const learned = await row();
    expect(learned).toMatchObject({ max_per_interval: 190, limit_source: 'headers', other_apps_requests: 0, daily_remaining: 900_000 });
    // The same again, and the day within one interval of requests of the stored remaining: no write.
    await recordHubSpotRateHeaders(db.sql, portal, answer);
    await recordHubSpotRateHeaders(db.sql, portal, { ...answer, dailyRemaining: 900_000 - 190 });
    expect((await row()).version).toBe(learned.version);
    // Another app's 20 requests: written, and written again when they are gone.
    await recordHubSpotRateHeaders(db.sql, portal, { ...answer, remaining: 157 });
    const other = await row();
    expect(other).toMatchObject({ other_apps_requests: 20 });
    expect(other.version).not.toBe(learned.version);
    await recordHubSpotRateHeaders(db.sql, portal, answer);
    expect(await row()).toMatchObject({ other_apps_requests: 0 });
    // The day drifting by more than an interval's requests, a new limit, a new day: each written.
    const before = (await row()).version;
    await recordHubSpotRateHeaders(db.sql, portal, { ...answer, dailyRemaining: 899_000 });
    expect(await row()).toMatchObject({ daily_remaining: 899_000 });
    expect((await row()).version).not.toBe(before);
    await recordHubSpotRateHeaders(db.sql, portal, { ...answer, max: 110, remaining: 97, dailyRemaining: 899_000 });
    expect(await row()).toMatchObject({ max_per_interval: 110 });
    await db.sql`update private.hubspot_request_budgets set daily_seen_at = daily_seen_at - interval '1 day' where hubspot_portal_id = ${portal}`;
    const yesterday = (await row()).version;
    await recordHubSpotRateHeaders(db.sql, portal, { ...answer, max: 110, remaining: 97, dailyRemaining: 899_000 });
    expect((await row()).version).not.toBe(yesterday);
  });
});

/** The statements the budget sends while `f` runs: db.sql behind a counting tag. */
async function countedCalls(f: (sql: Sql) => Promise<unknown>): Promise<number> {
  let calls = 0;
  const counting = ((...args: Parameters<Sql>) => {
    calls++;
    return (db.sql as unknown as (...a: Parameters<Sql>) => unknown)(...args);
  }) as unknown as Sql;
  await f(counting);
  return calls;
}
