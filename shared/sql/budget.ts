// The HubSpot request budget (supabase/schemas/0370-0375): grants from each
// portal's rolling rate window, what HubSpot's answers teach it (limits, time zone),
// the daily reset and the learned limits the HTTP API shows.
import type { Sql } from '../db.ts';
import type { RateLimitHeaders } from '../rate-limit-headers.ts';

/** What a portal's budget granted: how many of the requests asked for, and ms until the next grant when not all (-1: the day's quota is down to the reserve). */
export interface BudgetGrant { granted: number; waitMs: number }

/** What acquire_hubspot_requests is given besides the portal and count, for a portal whose auth kind is known (shared/hubspot/request-budget.ts). */
export interface BudgetArguments {
  maxRequests: number;
  windowMs: number;
  ceiling: number | null;
  dailyReservePercent: number;
}

/**
 * Takes up to `count` requests from the portal's shared HubSpot budget at once,
 * as many as its rolling window has room for. With `learned` the portal's
 * learned limit applies (seeded from the auth kind) instead of maxRequests per windowMs.
 */
export async function acquireHubSpotRequests(
  sql: Sql, hubspotPortalId: string, count: number, maxRequests: number, windowMs: number,
  learned?: { authKind: 'private_app' | 'oauth'; ceiling: number | null; dailyReservePercent: number },
): Promise<BudgetGrant> {
  const [row] = learned
    ? await sql`select granted, wait_ms from public.acquire_hubspot_requests(${hubspotPortalId}, ${count}, ${maxRequests}, ${windowMs},
        ${learned.authKind}, ${learned.ceiling}, ${learned.dailyReservePercent})`
    : await sql`select granted, wait_ms from public.acquire_hubspot_requests(${hubspotPortalId}, ${count}, ${maxRequests}, ${windowMs})`;
  return { granted: Number(row?.granted ?? 0), waitMs: Number(row?.wait_ms ?? 0) };
}

/** Takes one request from the portal's budget; returns ms to wait (0 = go, -1 = the day's quota is down to the reserve). */
export async function acquireHubSpotRequest(
  sql: Sql, hubspotPortalId: string, maxRequests: number, windowMs: number,
  learned?: { authKind: 'private_app' | 'oauth'; ceiling: number | null; dailyReservePercent: number },
): Promise<number> {
  return (await acquireHubSpotRequests(sql, hubspotPortalId, 1, maxRequests, windowMs, learned)).waitMs;
}

/** Counts an already-made HubSpot request in the portal's shared budget. */
export async function recordHubSpotRequest(sql: Sql, hubspotPortalId: number): Promise<void> {
  await sql`select public.record_hubspot_request(${hubspotPortalId})`;
}

/** Tells the portal's budget what one answer's rate-limit headers say (the limit, other apps' use, the day's quota). */
export async function recordHubSpotRateHeaders(sql: Sql, hubspotPortalId: string | number, h: RateLimitHeaders): Promise<void> {
  await sql`select public.record_hubspot_rate_headers(${String(hubspotPortalId)}, ${h.max}, ${h.intervalMs}, ${h.remaining},
    ${h.daily}, ${h.dailyRemaining}, ${new Date(h.sentAt)}, ${new Date(h.answeredAt)})`;
}

/** Stores the account's time zone (GET /account-info/2026-03/details `timeZone`), where its daily limit resets. */
export async function recordHubSpotTimeZone(sql: Sql, hubspotPortalId: string | number, timeZone: unknown): Promise<void> {
  await sql`select public.record_hubspot_time_zone(${String(hubspotPortalId)}, ${typeof timeZone === 'string' ? timeZone : null})`;
}

/** When the portal's daily HubSpot limit resets: the next midnight after `nowMs` in its account's time zone (UTC while unknown). */
export async function hubspotDailyResetAt(sql: Sql, portalId: string, nowMs: number): Promise<Date> {
  const [row] = await sql`select public.hubspot_daily_reset_at(${portalId}, ${new Date(nowMs)}) as at`;
  return new Date(row!.at as Date);
}

/** A portal's HubSpot limits as the budget knows them (the HTTP API's portal and run views). */
export interface HubSpotPortalLimits {
  maxPerInterval: number | null;
  intervalMs: number | null;
  source: 'headers' | 'auth_kind' | 'configuration' | null;
  learnedAt: string | null;
  dailyLimit: number | null;
  dailyRemaining: number | null;
  dailyResetsAt: string | null;
  timeZone: string | null;
}

export const NO_LIMITS_KNOWN: HubSpotPortalLimits = {
  maxPerInterval: null, intervalMs: null, source: null, learnedAt: null, dailyLimit: null, dailyRemaining: null, dailyResetsAt: null, timeZone: null,
};

/** The learned limits of one of our portals (by its uuid), in one statement; null when nothing is known yet. */
export async function hubspotLimitsOfPortal(sql: Sql, portalId: string): Promise<HubSpotPortalLimits | null> {
  const rows = await sql`select l.* from public.portals p
    cross join lateral public.hubspot_portal_limits(array[p.hubspot_portal_id]) l where p.id = ${portalId}`;
  return rows[0] ? limitsOf(rows[0]) : null;
}

/** The learned limits of these HubSpot portals, by HubSpot portal id (missing: nothing known yet). */
export async function hubspotPortalLimits(sql: Sql, hubspotPortalIds: readonly (string | number)[]): Promise<Map<string, HubSpotPortalLimits>> {
  const out = new Map<string, HubSpotPortalLimits>();
  if (hubspotPortalIds.length === 0) return out;
  const rows = await sql`select * from public.hubspot_portal_limits(${hubspotPortalIds.map(String)}::bigint[])`;
  for (const r of rows) out.set(String(r.hubspot_portal_id), limitsOf(r));
  return out;
}

// One row of public.hubspot_portal_limits as the HTTP API shows it (the ceiling, when lower, is the limit).
function limitsOf(r: Record<string, unknown>): HubSpotPortalLimits {
  const max = r.max_per_interval as number | null;
  const interval = r.interval_ms as number | null;
  const ceiling = r.configured_max as number | null;
  const ceilingPerInterval = ceiling !== null && interval !== null ? Math.max(1, Math.floor((ceiling * interval) / 10_000)) : null;
  const capped = max !== null && ceilingPerInterval !== null && ceilingPerInterval < max;
  return {
    maxPerInterval: capped ? ceilingPerInterval : max,
    intervalMs: interval,
    source: capped ? 'configuration' : (r.limit_source as HubSpotPortalLimits['source']),
    learnedAt: r.limit_learned_at ? (r.limit_learned_at as Date).toISOString() : null,
    dailyLimit: r.daily_limit as number | null,
    dailyRemaining: r.daily_remaining as number | null,
    dailyResetsAt: r.daily_resets_at ? (r.daily_resets_at as Date).toISOString() : null,
    timeZone: r.time_zone as string | null,
  };
}

/** When the account's time zone was last learned (null: never), from the portal's limits. */
export async function timeZoneLearnedAt(sql: Sql, hubspotPortalId: string): Promise<Date | null> {
  const [row] = await sql`select time_zone_learned_at from public.hubspot_portal_limits(${[hubspotPortalId]}::bigint[])`;
  return (row?.time_zone_learned_at as Date | null | undefined) ?? null;
}
