// The portal routes: list the user's portals with their learned HubSpot
// limits, and connect one with a private app's token (sealed before it is
// stored; the portal learnt from HubSpot's answer). Disconnecting is
// ./portal-disconnect.ts, connecting through OAuth ./install-routes.ts.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import type { HubSpotContentClient, RateLimitHeaders } from '../../shared/hubspot/client.ts';
import { HubSpotAuthError } from '../../shared/hubspot/errors.ts';
import { connectPrivateAppPortal, knownHubSpotPortalForToken } from '../../shared/hubspot/portal-connect.ts';
import { HttpError, json } from '../../shared/http.ts';
import { hubspotPortalLimits, NO_LIMITS_KNOWN, recordHubSpotRateHeaders, recordHubSpotRequest, recordHubSpotTimeZone } from '../../shared/sql/budget.ts';
import { ownPortals, portalNameOf } from '../../shared/sql/portals.ts';
import type { OrchestratorDeps } from './deps.ts';
import { hubspotFailure, requireExistingUser, requireKeys } from './route-helpers.ts';
import type { connectPortalBody } from './schemas.ts';

export async function listPortals(deps: OrchestratorDeps, user: VerifiedUser): Promise<Response> {
  const rows = await ownPortals(deps.sql, user.claims);
  const limits = await hubspotPortalLimits(deps.sql, rows.map((p) => p.hubspot_portal_id));
  return json(200, {
    portals: rows.map((p) => ({
      id: p.id, hubspotPortalId: Number(p.hubspot_portal_id), name: p.name, createdAt: p.created_at,
      authKind: p.auth_kind, disconnectedAt: p.disconnected_at, disconnectedReason: p.disconnected_reason,
      hubspotLimits: limits.get(String(p.hubspot_portal_id)) ?? NO_LIMITS_KNOWN,
    })),
  });
}

export async function connect(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof connectPortalBody>): Promise<Response> {
  const keys = requireKeys(deps);
  await requireExistingUser(deps, user);
  // A reconnect with a token this user already stored: its portal is known, so the call waits for the shared budget.
  const known = await knownHubSpotPortalForToken(deps.sql, keys, user.userId, body.accessToken);
  let hubspotPortalId: number;
  let details: Awaited<ReturnType<HubSpotContentClient['accountDetails']>>;
  let firstAnswer: RateLimitHeaders | null = null; // the portal's limits, as HubSpot's first answer says
  try {
    details = await deps.hubspotClient({ accessToken: body.accessToken }, known, 'private_app', (h) => void (firstAnswer ??= h)).accountDetails();
    hubspotPortalId = Number(details.portalId);
  } catch (e) {
    if (e instanceof HubSpotAuthError) throw new HttpError(400, 'HUBSPOT_TOKEN_REJECTED', e.message);
    throw hubspotFailure(e);
  }
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not return a portal id; nothing was stored.');
  }
  // Otherwise the portal was learnt from the answer: the request is counted in its budget now.
  if (known !== String(hubspotPortalId)) await recordHubSpotRequest(deps.sql, hubspotPortalId);
  await recordHubSpotTimeZone(deps.sql, hubspotPortalId, details.timeZone); // where its daily limit resets
  if (firstAnswer && known !== String(hubspotPortalId)) await recordHubSpotRateHeaders(deps.sql, hubspotPortalId, firstAnswer);
  // No name given: a reconnect keeps the portal's name (connect_portal_with_tokens).
  const portalId = await connectPrivateAppPortal(deps.sql, keys, { ownerId: user.userId, hubspotPortalId, name: body.name ?? null, accessToken: body.accessToken });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId, auth_kind: 'private_app' });
  return json(201, { portalId, hubspotPortalId, name: body.name ?? (await portalNameOf(deps.sql, user.userId, hubspotPortalId)) ?? `HubSpot portal ${hubspotPortalId}` });
}
