// The requests chart's truth: every HubSpot request granted by the shared
// budget (or recorded after the fact) is counted in its portal's 10-second
// window, one row per window; hubspot_request_history reads them back; old
// windows are deleted by retention. Real Postgres, racing connections.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../shared/db.ts';
import { acquireHubSpotRequest } from '../shared/sql/budget.ts';
import { useTestDatabase } from './support/database.ts';
import { pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();
let nextPortal = 7_000_000;

async function counted(sql: Sql, portal: number): Promise<{ window_start: Date; requests: number }[]> {
  return [...(await sql`select window_start, requests from private.hubspot_request_counts
                         where hubspot_portal_id = ${portal} order by window_start`)] as never;
}
async function history(portals: number[], since: Date, until: Date | null = null) {
  return db.sql`select hubspot_portal_id::text as portal, window_start, requests
                  from public.hubspot_request_history(${portals}::bigint[], ${since}, ${until})`;
}

describe('HubSpot requests per 10-s window', () => {
  it('counts each grant (not a refused ask) and each recorded request in its aligned window', async () => {
    const portal = (nextPortal += 10);
    for (let i = 0; i < 5; i++) expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 60_000)).toBe(0);
    expect(await acquireHubSpotRequest(db.sql, String(portal), 5, 60_000)).toBeGreaterThan(0); // refused: not sent
    await db.sql`select public.record_hubspot_request(${portal})`;
    const rows = await counted(db.sql, portal);
    expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(6);
    expect(rows.length).toBeLessThanOrEqual(2); // a window boundary may fall between the calls
    for (const r of rows) expect(r.window_start.getTime() % 10_000).toBe(0);
    // Through the learned-limit path too (an auth kind).
    const learned = (nextPortal += 10);
    for (let i = 0; i < 3; i++) expect(await acquireHubSpotRequest(db.sql, String(learned), 190, 10_000, { authKind: 'private_app', ceiling: null, dailyReservePercent: 0 })).toBe(0);
    expect((await counted(db.sql, learned)).reduce((n, r) => n + r.requests, 0)).toBe(3);
  });

  it('20 racing connections: the count equals the grants, per window', async () => {
    const portal = (nextPortal += 10);
    const conns = Array.from({ length: 20 }, () => db.connect(1));
    await Promise.all(conns.map((c) => c`select 1`));
    const waits = (await Promise.all(conns.map(async (c) => {
      const out: number[] = [];
      for (let i = 0; i < 5; i++) out.push(await acquireHubSpotRequest(c, String(portal), 40, 60_000));
      return out;
    }))).flat();
    // (Recorded requests take room in the window too: made after every ask.)
    await Promise.all(conns.map((c) => c`select public.record_hubspot_request(${portal})`));
    const granted = waits.filter((w) => w === 0).length;
    expect(granted).toBe(40);
    expect((await counted(db.sql, portal)).reduce((n, r) => n + r.requests, 0)).toBe(granted + 20);
  });

  it('history returns the portals\' windows in range, oldest first, at most the last 24 hours', async () => {
    const a = (nextPortal += 10);
    const b = (nextPortal += 10);
    const base = Math.floor(Date.now() / 10_000) * 10_000;
    const at = (ms: number) => new Date(base - ms);
    await db.sql`insert into private.hubspot_request_counts (hubspot_portal_id, window_start, requests) values
      (${a}, ${at(60_000)}, 7), (${a}, ${at(30_000)}, 3), (${b}, ${at(30_000)}, 9), (${a}, ${at(25 * 3_600_000)}, 4)`;
    const rows = await history([a, b], at(2 * 86_400_000));
    expect(rows.map((r) => [r.portal, (r.window_start as Date).getTime(), r.requests])).toEqual([
      [String(a), at(60_000).getTime(), 7], [String(a), at(30_000).getTime(), 3], [String(b), at(30_000).getTime(), 9]]);
    // The window holding `since` counts; `until` is exclusive.
    const mid = await history([a], new Date(at(30_000).getTime() + 4_000), new Date(base));
    expect(mid.map((r) => r.requests)).toEqual([3]);
    expect((await pgError(() => history([], at(0)))).code).toBe('22023');
    expect((await pgError(() => history(Array.from({ length: 21 }, (_, i) => i + 1), at(0)))).code).toBe('22023');
  });

  it('windows older than 24 hours are deleted by retention, a batch at a time, never by a grant', async () => {
    const old = (nextPortal += 10);
    const base = Math.floor(Date.now() / 10_000) * 10_000 - 25 * 3_600_000;
    await db.sql`insert into private.hubspot_request_counts (hubspot_portal_id, window_start, requests)
                 select ${old}, to_timestamp((${base}::bigint - g * 10000) / 1000.0), 1 from generate_series(0, 11) g`;
    const fresh = (nextPortal += 10);
    await acquireHubSpotRequest(db.sql, String(fresh), 5, 60_000); // a new window: counted, nothing deleted
    expect(await counted(db.sql, old)).toHaveLength(12);
    expect(await counted(db.sql, fresh)).toHaveLength(1);
    const [first] = await db.sql`select public.prune_queue_history(null, 8) as r`;
    expect(first!.r).toMatchObject({ request_windows: 8 });
    expect(await counted(db.sql, old)).toHaveLength(4);
    const [second] = await db.sql`select public.prune_queue_history(null, 8) as r`;
    // Its 4 left, and any other test's old windows in this database.
    expect((second!.r as { request_windows: number }).request_windows).toBeGreaterThanOrEqual(4);
    expect(await counted(db.sql, old)).toEqual([]);
    // The last 24 hours stay (the requests chart reads them).
    expect(await counted(db.sql, fresh)).toHaveLength(1);
  });
});

describe('hubspot_rate_window', () => {
  it('says when a full window lets the next request through, as acquire_hubspot_requests decides', async () => {
    const portal = (nextPortal += 10);
    const learned = { authKind: 'private_app' as const, ceiling: 10, dailyReservePercent: 0 };
    // A ceiling of 10 per 10 s: 10 less the headroom of 2 = 8 grants, then a wait.
    let granted = 0;
    while ((await acquireHubSpotRequest(db.sql, String(portal), 190, 10_000, learned)) === 0) granted++;
    expect(granted).toBe(8);
    const wait = await acquireHubSpotRequest(db.sql, String(portal), 190, 10_000, learned);
    const [row] = await db.sql`select requests, allowed, full_until, extract(epoch from full_until - now()) * 1000 as ms_left
                                 from public.hubspot_rate_window(${[portal]}::bigint[])`;
    expect(row).toMatchObject({ requests: 8, allowed: 8 });
    expect(Math.abs(Number(row!.ms_left) - wait)).toBeLessThan(1_000);
    // Back-dated past the window: nothing left in it, not full.
    await db.sql`update private.hubspot_request_budgets set granted_at = array[now() - interval '20 s']
                  where hubspot_portal_id = ${portal}`;
    const [after] = await db.sql`select requests, full_until from public.hubspot_rate_window(${[portal]}::bigint[])`;
    expect(after).toMatchObject({ requests: 0, full_until: null });
    // Without a ceiling: the learned limit (a private app's 100) less the headroom of 2.
    const open = (nextPortal += 10);
    for (let i = 0; i < 3; i++) await acquireHubSpotRequest(db.sql, String(open), 190, 10_000, { ...learned, ceiling: null });
    const [free] = await db.sql`select requests, allowed, full_until from public.hubspot_rate_window(${[open]}::bigint[])`;
    expect(free).toMatchObject({ requests: 3, allowed: 98, full_until: null });
  });
});
