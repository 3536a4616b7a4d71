// The shared HubSpot budget hook: waits for a grant, but never past the caller's deadline.
import { describe, expect, it } from 'vitest';
import { BudgetWaitPastDeadline, effectiveBudget, sharedRequestBudget } from '../shared/hubspot-budget.ts';
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
});
