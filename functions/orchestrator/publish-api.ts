// The publish endpoints' descriptions for openapi.json (./api.ts lists them
// with the others; the publish actions of POST /orchestrator are described
// with that operation there).
import type { ApiOperation, ApiResponse } from './api-operation.ts';
import {
  csvImportedResponse, csvUploadQuery, itemPageResponse, itemsQuery, planDetailResponse, planIdParam, planListResponse, plansQuery,
} from './publish-schemas.ts';
import { errorBody } from './schemas.ts';

const err = (description: string): ApiResponse => ({ description, json: [errorBody] });
const unauthenticated = err('TOKEN_EXPIRED / UNAUTHENTICATED: no valid access token.');
const planPath = { planId: { schema: planIdParam, description: 'The plan id.' } };
const badPlanId = err('INVALID_PATH: planId is not a uuid.');
const planNotFound = err('PLAN_NOT_FOUND: not yours, or no such plan (never which).');

/** The descriptions of the refusals the publish actions of POST /orchestrator answer, for its operation. */
export const PUBLISH_WRITE_ERRORS = {
  409: 'Publish: NO_PENDING_EDITS (create_publish_plan: nothing to plan); PLAN_IN_PROGRESS (a plan of the portal is still being made for one of the types); ' +
    'PLAN_STALE (approve_publish_plan after freshUntil: plan again), PLAN_NOT_READY (still planning, failed or discarded), PLAN_ALREADY_APPROVED (approving twice makes one run), ' +
    'PLAN_NOTHING_READY (every item is a conflict, unchanged, missing or invalid); PUBLISH_RUN_NOT_FINISHED, ALREADY_ROLLED_BACK, NOTHING_TO_ROLL_BACK (rollback_publish_run); ' +
    'PLAN_STILL_PLANNING (discard_publish_plan while planning: stop its run first); PUBLISH_IN_PROGRESS (a publish or restore of the portal runs for one of the types). Nothing changed.',
  404: 'PLAN_NOT_FOUND (approve or discard another user\'s plan, or none); RUN_NOT_FOUND also for rolling back a run that is not your publish run.',
  413: 'TOO_MANY_EDITS: create_publish_plan of more pending edits than one plan takes (max_edits_per_plan, 50,000).',
};

export const PUBLISH_OPERATIONS: ApiOperation[] = [
  {
    method: 'post',
    path: '/orchestrator/publish/csv',
    operationId: 'uploadPublishCsv',
    summary: 'Upload an edited export CSV: its changed cells become pending edits (and, with plan=true, a plan)',
    description:
      'The file is an export of `contentType` (GET /orchestrator/exports/{jobId}) as a person edited it: the header holds `hubspot_id`, `hubspot_updated_at` and otherwise only that export\'s columns, in any order. ' +
      'A cell equal to the stored copy\'s is not an edit (TRUE for true, our export\'s apostrophe before = + - @ read back as it was); an empty unquoted cell is null (a cleared field), `""` the empty string. ' +
      'All or nothing: any error (an unknown column, a changed read-only cell, a wrong type, an id not in the copy, a row whose item changed since the export, a ragged row, a malformed quote) ' +
      'answers 422 INVALID_CSV with every error in `details.errors`, and nothing is stored. Each row with changes becomes one pending edit (source `csv`), replacing the item\'s earlier pending edit. ' +
      'With `plan=true` the type\'s pending edits (the file\'s and any others) are planned in the same transaction: 202 with the plan, or nothing stored. ' +
      'Counted against the per-user write limit. The body is read as UTF-8 (a byte order mark is skipped).',
    csvBody: 'The edited export, RFC 4180 CSV in UTF-8 with its header row; at most `private.publish_settings.max_csv_bytes` (5 MiB by default).',
    query: csvUploadQuery,
    responses: {
      200: { description: 'Imported: the edits stored (plan=false).', json: [csvImportedResponse] },
      202: { description: 'Imported and planned (plan=true): follow `plan.runId`; the plan is `ready` when it completes.', json: [csvImportedResponse] },
      400: err('INVALID_QUERY: portalId, contentType (an editable type), plan, mode or publishAt.'),
      401: unauthenticated,
      404: err('PORTAL_NOT_FOUND: not yours or no such portal. Nothing stored.'),
      408: err('REQUEST_TIMEOUT: the file did not arrive whole within 10 s. Nothing stored.'),
      409: err('With plan=true: PLAN_IN_PROGRESS (a plan of this type is still being made), NO_PENDING_EDITS (the file changes nothing and no edit of the type is pending); EDITS_BUSY: the same items were being changed at the same moment. Nothing stored.'),
      413: err('PAYLOAD_TOO_LARGE: a file over max_csv_bytes (5 MiB); TOO_MANY_EDITS: more rows than one plan takes (50,000). Nothing stored.'),
      415: err('UNSUPPORTED_MEDIA_TYPE: send the file with Content-Type: text/csv (UTF-8).'),
      422: err('INVALID_CSV: the file\'s errors, each {row, column, code, message} in details.errors. Nothing stored.'),
      424: err('HUBSPOT_DISCONNECTED: plan=true for a disconnected portal (reconnect it). Nothing stored.'),
      429: { description: 'RATE_LIMITED: too many writes; wait Retry-After seconds. Nothing stored.', json: [errorBody], headers: { 'Retry-After': 'Seconds to wait.' } },
    },
  },
  {
    method: 'get',
    path: '/orchestrator/publish/plans',
    operationId: 'listPublishPlans',
    summary: "A portal's plans, newest first (keyset pages)",
    query: plansQuery,
    responses: {
      200: { description: 'One page of plans.', json: [planListResponse] },
      400: err('INVALID_QUERY: a bad portalId, limit or cursor.'),
      401: unauthenticated,
      404: err('PORTAL_NOT_FOUND: not yours or no such portal.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator/publish/plans/{planId}',
    operationId: 'getPublishPlan',
    summary: 'One plan: its status, counts, freshness, who planned, approved and rolled back and when, its runs',
    pathParams: planPath,
    responses: {
      200: { description: 'The plan.', json: [planDetailResponse] },
      400: badPlanId,
      401: unauthenticated,
      404: planNotFound,
    },
  },
  {
    method: 'get',
    path: '/orchestrator/publish/plans/{planId}/items',
    operationId: 'listPublishItems',
    summary: "A page of a plan's items: fields before → after, HubSpot's values for conflicts, outcomes and HubSpot's answers",
    pathParams: planPath,
    query: itemsQuery,
    responses: {
      200: { description: 'One page of items, in id order.', json: [itemPageResponse] },
      400: err('INVALID_PATH: planId is not a uuid; INVALID_QUERY: a bad filter, limit or cursor.'),
      401: unauthenticated,
      404: planNotFound,
    },
  },
  {
    method: 'get',
    path: '/orchestrator/publish/plans/{planId}/audit.csv',
    operationId: 'downloadPublishAudit',
    summary: "A plan's audit trail as CSV: who planned, approved and rolled back and when; per item the fields before and after, outcome and HubSpot's answer",
    description: 'Streamed from Postgres (COPY … TO STDOUT, read as the user under RLS), one row per item in id order; JSON cells as text; a cell starting with = + - @ tab or CR gets a leading apostrophe, as in exports.',
    pathParams: planPath,
    responses: {
      200: { description: 'The CSV file (Content-Disposition: attachment; filename="publish-audit-<plan id prefix>.csv").', csv: true },
      400: badPlanId,
      401: unauthenticated,
      404: planNotFound,
    },
  },
];
