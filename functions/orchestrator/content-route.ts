// GET /orchestrator/content?portalId=: how many items the portal's stored copy
// holds per content type, live items only (tombstones of deleted items not
// counted), counted from the content itself as the user (RLS; shared/sql/content.ts).
// The page's content overview shows these, never a job's progress: a
// changes-only sync's jobs count what they checked, not what is stored.
import { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES } from '../../shared/content-types.ts';
import { HttpError, json } from '../../shared/http.ts';
import { storedContentCounts } from '../../shared/sql/content.ts';
import type { ApiOperation } from './api-operation.ts';
import type { OrchestratorDeps } from './deps.ts';
import { apiSchemas, errorBody } from './schemas.ts';

export const contentQuery = z.object({ portalId: z.string().uuid() });

export const contentResponse = z.strictObject({
  portalId: z.string().uuid(),
  types: z.array(z.strictObject({
    contentType: z.enum(CONTENT_TYPES),
    items: z.number().int().min(0).describe('Live items stored (deleted ones, kept as tombstones, not counted); 0 when none.'),
  })).describe('Every content type, in the registry\'s order.'),
});
apiSchemas.add(contentResponse, { id: 'StoredContent' });

export async function getStoredContent(deps: OrchestratorDeps, user: VerifiedUser, q: z.infer<typeof contentQuery>): Promise<Response> {
  const counts = await storedContentCounts(deps.sql, user.claims, q.portalId);
  if (!counts) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return json(200, { portalId: q.portalId, types: CONTENT_TYPES.map((contentType) => ({ contentType, items: counts.get(contentType) ?? 0 })) });
}

export const CONTENT_OPERATION: ApiOperation = {
  method: 'get', path: '/orchestrator/content', operationId: 'getStoredContent',
  summary: "How many items a portal's stored copy holds, per content type",
  description: 'Counted from the stored content (live items; deleted ones are kept as tombstones and not counted), not from any job\'s progress. ' +
    'Only a fetch changes it, as it saves pages: read it when a fetch job (one type) or run ends.',
  query: contentQuery,
  responses: {
    200: { description: 'The counts.', json: [contentResponse] },
    400: { description: 'INVALID_QUERY: portalId is missing or not a uuid.', json: [errorBody] },
    401: { description: 'UNAUTHENTICATED / TOKEN_EXPIRED: no valid access token.', json: [errorBody] },
    404: { description: 'PORTAL_NOT_FOUND: not yours or no such portal.', json: [errorBody] },
  },
};
