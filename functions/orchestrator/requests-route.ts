// GET /orchestrator/requests?portalId=&since=: the portal's real HubSpot
// requests per 10-s window (the budget's own counts, supabase/schemas/0451),
// its learned limit per 10 s, and its rolling rate window now (full: when the next
// request can go). The page's requests chart. The portal must be the caller's (RLS).
import { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { HttpError, json } from '../../shared/http.ts';
import { hubspotLimitsOfPortal } from '../../shared/sql/budget.ts';
import { rateWindow, requestHistory } from '../../shared/sql/operator.ts';
import { ownPortal } from '../../shared/sql/portals.ts';
import type { ApiOperation } from './api-operation.ts';
import type { OrchestratorDeps } from './deps.ts';
import { requestWindows } from './operator-routes.ts';
import { apiSchemas, errorBody } from './schemas.ts';

const timestamp = z.iso.datetime({ offset: true });

export const requestsQuery = z.object({
  portalId: z.string().uuid(),
  since: timestamp.optional().describe('Default: 10 minutes ago; at most 24 hours back, and never before the portal was connected by this user.'),
});

export const requestsResponse = z.strictObject({
  portalId: z.string().uuid(),
  hubspotPortalId: z.number().int(),
  windows: requestWindows,
  limitPer10s: z.number().nullable().describe("HubSpot's limit for this portal per 10 s, as learned; null while unknown."),
  rateWindow: z.strictObject({
    requests: z.number().int().describe('Requests in the rolling rate window now.'),
    allowed: z.number().int().describe('How many it lets through (the limit less headroom and other apps).'),
    fullUntil: timestamp.nullable().describe('While the rate window is full: when the next request can go.'),
  }).nullable(),
});
apiSchemas.add(requestsResponse, { id: 'HubSpotRequests' });

export async function getRequests(deps: OrchestratorDeps, user: VerifiedUser, q: z.infer<typeof requestsQuery>): Promise<Response> {
  const portal = await ownPortal(deps.sql, user.claims, q.portalId);
  if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  const hubspotPortalId = String(portal.hubspot_portal_id);
  // The counts are per HubSpot account, which another user may have connected too: the
  // history shown starts no earlier than this user's connection of it.
  const asked = q.since ? new Date(q.since) : new Date(Date.now() - 600_000);
  const since = new Date(Math.max(asked.getTime(), portal.created_at.getTime()));
  const [windows, limits, win] = await Promise.all([
    requestHistory(deps.sql, hubspotPortalId, since),
    hubspotLimitsOfPortal(deps.sql, q.portalId),
    rateWindow(deps.sql, hubspotPortalId),
  ]);
  return json(200, {
    portalId: q.portalId,
    hubspotPortalId: Number(hubspotPortalId),
    windows: windows.map((w) => ({ windowStart: w.window_start.toISOString(), requests: w.requests })),
    limitPer10s: limits?.maxPerInterval && limits.intervalMs ? (limits.maxPerInterval * 10_000) / limits.intervalMs : null,
    rateWindow: win ? { requests: win.requests, allowed: win.allowed, fullUntil: win.full_until ? win.full_until.toISOString() : null } : null,
  });
}

export const REQUESTS_OPERATION: ApiOperation = {
  method: 'get', path: '/orchestrator/requests', operationId: 'getHubSpotRequests',
  summary: "A portal's HubSpot requests per 10 s, its learned limit, and whether its rate window is full now",
  description: "From the shared request budget's own counts (every request any worker or the orchestrator sent for the portal), kept 24 hours.",
  query: requestsQuery,
  responses: {
    200: { description: 'The windows.', json: [requestsResponse] },
    400: { description: 'INVALID_QUERY.', json: [errorBody] },
    404: { description: 'PORTAL_NOT_FOUND: not yours or no such portal.', json: [errorBody] },
  },
};
