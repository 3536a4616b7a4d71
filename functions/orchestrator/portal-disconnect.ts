// POST {action: "disconnect_portal", portalId}: the owner disconnects a portal.
// disconnect_portal marks it disconnected and fails its pending and
// running fetch jobs (their runs settle); its stored HubSpot tokens are deleted
// in the same transaction. Its content, runs and export files stay; connecting
// it again (connect_portal or an OAuth install) reconnects it. Idempotent.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { HttpError, json } from '../../shared/http.ts';
import { disconnectPortalAndDeleteTokens } from '../../shared/sql/credentials.ts';
import { ownPortal } from '../../shared/sql/portals.ts';
import type { OrchestratorDeps } from './deps.ts';
import type { disconnectPortalBody } from './schemas.ts';

/** The reason stored on the portal (and in its failed fetch jobs' last_error). */
export const DISCONNECTED_BY_OWNER = 'disconnected by its owner';

export async function disconnectOwnPortal(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof disconnectPortalBody>): Promise<Response> {
  if (!(await ownPortal(deps.sql, user.claims, body.portalId))) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  const row = await disconnectPortalAndDeleteTokens(deps.sql, body.portalId, DISCONNECTED_BY_OWNER);
  deps.log.info('portal_disconnected', { portal_id: body.portalId, failed_jobs: row.failed });
  return json(200, { portalId: body.portalId, disconnectedAt: row.disconnectedAt, disconnectedReason: row.reason, failedFetchJobs: row.failed });
}
