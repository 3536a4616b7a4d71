// The orchestrator's endpoints as data, and the OpenAPI 3.1 document generated
// from the zod schemas (scripts/openapi.ts writes it to openapi.json; a test checks that file and the handler's real
// answers against this description).
import { z } from 'zod';
import {
  apiSchemas, completeInstallBody, connectPortalBody, connectPortalResponse, createRunBody, createRunResponse, disconnectPortalBody, disconnectPortalResponse,
  errorBody, installStartedResponse, latestExportsQuery, latestExportsResponse, portalListResponse, runDetailResponse, runListResponse, runQuery, runsQuery,
  startInstallBody, statsResponse, stopRunBody, stopRunResponse,
} from './schemas.ts';
import type { ApiOperation, ApiResponse } from './api-operation.ts';
import { CONTENT_OPERATION } from './content-route.ts';
import {
  jobActionResponse, OPERATOR_OPERATIONS, pausePortalBody, portalPauseResponse, resumePortalBody, retryJobBody, stopJobBody,
} from './operator-routes.ts';
import { PUBLISH_OPERATIONS, PUBLISH_WRITE_ERRORS } from './publish-api.ts';
import {
  approvePlanBody, createPlanBody, discardPlanBody, planApprovedResponse, planCreatedResponse, planDiscardedResponse, rollbackRunBody, runRolledBackResponse,
} from './publish-schemas.ts';
import { REQUESTS_OPERATION } from './requests-route.ts';
import { deleteScheduleBody, scheduleDeletedResponse, scheduleResponse, setScheduleBody, SYNC_OPERATIONS } from './sync.ts';

export type { ApiOperation, ApiResponse } from './api-operation.ts';

const err = (description: string): ApiResponse => ({ description, json: [errorBody] });
const common = {
  401: err('TOKEN_EXPIRED: the access token has expired (refresh the session, as supabase-js does, and retry); UNAUTHENTICATED: no token, an invalid one, or its user no longer exists (sign in again).'),
};

export const OPERATIONS: ApiOperation[] = [
  {
    method: 'post',
    path: '/orchestrator',
    operationId: 'write',
    summary: 'Create or stop a run, connect (private app or HubSpot OAuth install) or disconnect a portal, set or delete its sync schedule, plan, approve, roll back or discard a publish, and the operators\' job and portal actions (by `action`)',
    description:
      'The body decides: no `action` (or `"create_run"`) creates a run; `"stop"` stops one; `"connect_portal"` connects a portal with a private app token; ' +
      '`"disconnect_portal"` disconnects one (its tokens are deleted, its pending and running fetch jobs fail; content, runs and files stay); ' +
      '`"start_hubspot_install"` starts connecting one with HubSpot OAuth (answers the authorize URL to send the browser to) and ' +
      '`"complete_hubspot_install"` finishes it with the `code` (or `error`) and `state` HubSpot passed back to the redirect URL. ' +
      'An install\'s state is bound to the user who started it, works once and expires at the `expiresAt` its start answered (10 minutes by default, `state_ttl` in `private.oauth_install_settings`). ' +
      'Every POST but `"stop"` counts against a per-user write limit (default 60 per rolling minute, in `private.write_limit_settings`); stopping is never limited. ' +
      'Create: a type is a duplicate while a run in flight covers it (its job there is pending, running, or completed while that run goes on); ' +
      'a 201 may cover only some of the requested types, and `duplicateRunIds` says which run has the others. ' +
      '`"set_sync_schedule"` and `"delete_sync_schedule"` create, change or delete the portal\'s sync schedule (docs/sync.md). ' +
      'A fetch is `full` by default; `fetchMode: "incremental"` syncs only what changed ("sync changes now"), joining a sync in flight as any duplicate does. ' +
      'Operators only (403 NOT_AN_OPERATOR otherwise): `"retry_job"` gives a failed job one more attempt (its run reopens), `"stop_job"` stops one job, ' +
      '`"pause_portal"` / `"resume_portal"` hold or release every job of a portal (and its schedule). ' +
      'Publish (docs/publish.md): `"create_publish_plan"` plans the portal\'s pending edits (202: a plan run reads each item from HubSpot), ' +
      '`"approve_publish_plan"` approves a ready plan while fresh (202: its publish run writes), `"rollback_publish_run"` rolls a finished publish run back (202: a restore run), ' +
      '`"discard_publish_plan"` drops an unapproved plan (its edits pending again).',
    body: [createRunBody, stopRunBody, connectPortalBody, disconnectPortalBody, startInstallBody, completeInstallBody, setScheduleBody, deleteScheduleBody,
      retryJobBody, stopJobBody, pausePortalBody, resumePortalBody, createPlanBody, approvePlanBody, rollbackRunBody, discardPlanBody],
    responses: {
      200: {
        description: 'Stopped (or already finished: `stopped: false`), portal disconnected, install started, sync schedule set or deleted, job retried or stopped, portal paused or resumed, plan discarded.',
        json: [stopRunResponse, disconnectPortalResponse, installStartedResponse, scheduleResponse, scheduleDeletedResponse, jobActionResponse, portalPauseResponse, planDiscardedResponse],
      },
      201: { description: 'Run created (maybe with only some types), or portal connected (private app or OAuth install).', json: [createRunResponse, connectPortalResponse] },
      202: {
        description: 'Publish: plan created (its plan run reads the items), plan approved (its publish run writes), or publish run rolled back (its restore run writes back). Follow the run with GET ?runId=.',
        json: [planCreatedResponse, planApprovedResponse, runRolledBackResponse],
      },
      400: err(
        'INVALID_BODY (with details.fieldErrors); HUBSPOT_TOKEN_REJECTED on connect; on completing an install: OAUTH_STATE_INVALID (unknown, expired, ' +
          "used, or another user's state), HUBSPOT_CODE_REJECTED (code expired or used), HUBSPOT_INSTALL_FAILED (HubSpot sent another error). Nothing stored.",
      ),
      ...common,
      403: err('HUBSPOT_ACCESS_DENIED: the user cancelled the install on HubSpot (`error=access_denied`); nothing connected. NOT_AN_OPERATOR: an operator action by anyone else; nothing changed.'),
      404: err(`PORTAL_NOT_FOUND / RUN_NOT_FOUND: not yours (decided by RLS) or no such thing; JOB_NOT_FOUND (operator actions). ${PUBLISH_WRITE_ERRORS[404]}`),
      409: err(`ALL_DUPLICATE_JOBS: a run in flight already covers every requested type; details.duplicateRunIds says which. JOB_NOT_FAILED / JOB_TYPE_BUSY: retry_job of a job that is not failed, or whose type another run is working on; nothing changed. ${PUBLISH_WRITE_ERRORS[409]}`),
      408: err('REQUEST_TIMEOUT: the body did not arrive whole within 10 s (fewer bytes than its Content-Length); nothing was done.'),
      413: err(`PAYLOAD_TOO_LARGE: body over MAX_BODY_BYTES. ${PUBLISH_WRITE_ERRORS[413]}`),
      415: err('UNSUPPORTED_MEDIA_TYPE: the body must be sent as application/json.'),
      424: err('HUBSPOT_AUTH_FAILED (reconnect HubSpot; nothing created), HUBSPOT_DISCONNECTED (access was removed: reconnect; also retry_job of such a portal\'s job, and planning, approving or rolling back a publish of it) or HUBSPOT_NOT_CONNECTED.'),
      429: { description: 'RATE_LIMITED: too many writes; wait Retry-After seconds (also details.retryAfterSeconds). Nothing was done.', json: [errorBody], headers: { 'Retry-After': 'Seconds to wait.' } },
      501: err('OAUTH_NOT_CONFIGURED: the install actions need HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET and HUBSPOT_REDIRECT_URI.'),
      502: err('HUBSPOT_UNAVAILABLE: HubSpot failed; nothing was created. HUBSPOT_OAUTH_REJECTED: HubSpot refused the app\'s client id, secret or redirect URL.'),
      503: err('TOKEN_KEYS_MISSING: HUBSPOT_TOKEN_KEYS is not set, so no token can be stored; TOKEN_DECRYPTION_FAILED: stored tokens need a key no longer configured.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator',
    operationId: 'getRun',
    summary: "A run's progress: the run and each of its jobs",
    description: 'Completed export jobs get a freshly signed `result.url` (valid one hour, `result.urlExpiresAt`) on every call: Storage deployed, a signed orchestrator link locally.',
    query: runQuery,
    responses: {
      200: { description: 'The run and its jobs.', json: [runDetailResponse] },
      400: err('INVALID_QUERY: runId is not a uuid.'),
      ...common,
      404: err('RUN_NOT_FOUND: not yours or no such run.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator/portals',
    operationId: 'listPortals',
    summary: 'Your connected portals, oldest first',
    responses: { 200: { description: 'Your portals.', json: [portalListResponse] }, ...common },
  },
  {
    method: 'get',
    path: '/orchestrator/runs',
    operationId: 'listRuns',
    summary: 'Your runs, newest first, with overall items done and total',
    description: 'Keyset pagination: pass the `nextCursor` of a page as `cursor` to get the next (older) page. Pages are stable while runs are created.',
    query: runsQuery,
    responses: {
      200: { description: 'One page of runs.', json: [runListResponse] },
      400: err('INVALID_QUERY: a bad portalId, kind, limit or cursor.'),
      ...common,
    },
  },
  {
    method: 'get',
    path: '/orchestrator/exports',
    operationId: 'latestExports',
    summary: 'The newest completed export of each content type of a portal',
    description: 'Each with its job id, run and `result` as GET ?runId= gives it (a fresh `url`, `fromFetch`). Types never exported are absent.',
    query: latestExportsQuery,
    responses: {
      200: { description: 'The latest exports.', json: [latestExportsResponse] },
      400: err('INVALID_QUERY: portalId is missing or not a uuid.'),
      ...common,
      404: err('PORTAL_NOT_FOUND: not yours or no such portal.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator/exports/{jobId}',
    operationId: 'downloadExport',
    summary: "An export job's CSV file (its owner, or a signed link's holder)",
    description:
      'Streams the file of a completed export job: from the local export directory (npm start), or from Storage when deployed. ' +
      'Send the access token as for every call (then fetch it and save the blob), or open the `result.url` link, which needs none: ' +
      'locally that link is this endpoint with `expires` and `signature`.',
    pathParams: { jobId: { schema: z.string().regex(/^[1-9][0-9]{0,18}$/), description: 'The export job id (from GET ?runId=).' } },
    auth: 'or-signed-link',
    query: z.object({
      expires: z.string().optional().describe('With `signature`: a signed link (`result.url` locally), instead of an access token.'),
      signature: z.string().optional().describe('The link\'s signature.'),
    }),
    responses: {
      200: { description: 'The CSV file (Content-Disposition: attachment; filename="<type>-<run id prefix>.csv").', csv: true },
      400: err('INVALID_PATH: not a job id.'),
      ...common,
      403: err('LINK_INVALID: a signed link that is forged or expired (get a fresh `result.url`).'),
      404: err('EXPORT_NOT_FOUND: not yours, no such job, or not an export job.'),
      409: {
        description: 'EXPORT_NOT_READY: pending or running; ask again after Retry-After seconds. EXPORT_STOPPED / EXPORT_FAILED: the job ended without a file (it never will have one): export again.',
        json: [errorBody],
        headers: { 'Retry-After': 'EXPORT_NOT_READY: seconds to wait.' },
      },
      410: err('EXPORT_FILE_GONE: the file is no longer there.'),
      501: err('DOWNLOADS_UNAVAILABLE: no export store configured.'),
      503: err('STORAGE_MISCONFIGURED: Storage refused this server\'s key (an operator must fix it); STORAGE_UNAVAILABLE: Storage did not answer. The file is kept: try again later.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator/stats',
    operationId: 'queueStats',
    summary: 'Queue statistics (operators only)',
    description:
      "What `public.queue_stats()` returns. Only for users whose `app_metadata.queue_operator` is `true` in auth.users (set it with the service role: " +
      "`update auth.users set raw_app_meta_data = raw_app_meta_data || '{\"queue_operator\": true}' where email = '...'`).",
    responses: {
      200: { description: 'The statistics.', json: [statsResponse] },
      ...common,
      403: err('NOT_AN_OPERATOR.'),
    },
  },
  ...SYNC_OPERATIONS,
  CONTENT_OPERATION,
  REQUESTS_OPERATION,
  ...OPERATOR_OPERATIONS,
  ...PUBLISH_OPERATIONS,
  {
    method: 'options',
    path: '/orchestrator',
    operationId: 'preflight',
    summary: 'CORS preflight',
    description: 'Allows every header supabase-js sends (including x-region and traceparent) and any other well-formed header the browser asks for.',
    auth: false,
    responses: { 204: { description: 'CORS headers, no body.' } },
  },
];

/** Statuses any operation may also answer. */
const EVERYWHERE: Record<number, ApiResponse> = {
  404: err('ROUTE_NOT_FOUND: no such endpoint.'),
  405: err('METHOD_NOT_ALLOWED: only GET, POST and OPTIONS.'),
  500: err('INTERNAL: nothing was changed; try again.'),
};

function strip(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _s, $id: _i, ...rest } = schema;
  return rest;
}

function ref(schema: z.ZodType): { $ref: string } {
  const meta = apiSchemas.get(schema);
  if (!meta) throw new Error('openapi: a schema used by an operation is not registered in apiSchemas');
  return { $ref: `#/components/schemas/${meta.id}` };
}

const oneOf = (schemas: z.ZodType[]) => (schemas.length === 1 ? ref(schemas[0]!) : { oneOf: schemas.map(ref) });

/** The OpenAPI 3.1 document for the orchestrator. */
export function openApiDocument(): Record<string, unknown> {
  const generated = z.toJSONSchema(apiSchemas, { io: 'input', uri: (id) => `#/components/schemas/${id}` }) as { schemas: Record<string, Record<string, unknown>> };
  const schemas = Object.fromEntries(Object.entries(generated.schemas).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, strip(v)]));
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const parameters: unknown[] = [];
    for (const [name, p] of Object.entries(op.pathParams ?? {})) {
      parameters.push({ name, in: 'path', required: true, description: p.description, schema: strip(z.toJSONSchema(p.schema, { io: 'input' }) as Record<string, unknown>) });
    }
    for (const [name, field] of Object.entries(op.query?.shape ?? {})) {
      const f = field as z.ZodType;
      const schema = strip(z.toJSONSchema(f, { io: 'input' }) as Record<string, unknown>);
      const { description, ...rest } = schema;
      parameters.push({ name, in: 'query', required: !f.safeParse(undefined).success, ...(description ? { description } : {}), schema: rest });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, merged] of Object.entries({ ...(op.auth === false ? {} : EVERYWHERE), ...op.responses }).sort(([a], [b]) => Number(a) - Number(b))) {
      responses[status] = {
        description: merged.description,
        ...(merged.headers ? { headers: Object.fromEntries(Object.entries(merged.headers).map(([h, d]) => [h, { description: d, schema: { type: 'integer' } }])) } : {}),
        ...(merged.json ? { content: { 'application/json': { schema: oneOf(merged.json) } } } : {}),
        ...(merged.csv ? { content: { 'text/csv': { schema: { type: 'string' } } } } : {}),
      };
    }
    paths[op.path] ??= {};
    paths[op.path]![op.method] = {
      operationId: op.operationId,
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      ...(op.auth === false ? { security: [] } : op.auth === 'or-signed-link' ? { security: [{ bearerAuth: [] }, {}] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: oneOf(op.body) } } } } : {}),
      ...(op.csvBody ? { requestBody: { required: true, description: op.csvBody, content: { 'text/csv': { schema: { type: 'string' } } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'pg-edge-queue orchestrator',
      version: '1',
      description:
        'The orchestrator edge function. Every call but the CORS preflight needs the user\'s Supabase access token (`Authorization: Bearer <jwt>`); ' +
        'with supabase-js, `supabase.functions.invoke("orchestrator…")` sends it. Errors are `{code, message, details?}`. Generated from the zod schemas by `npx tsx scripts/openapi.ts`.',
    },
    servers: [{
      url: '{supabaseUrl}/functions/v1',
      variables: {
        supabaseUrl: {
          default: 'http://127.0.0.1:54321',
          description: 'Your SUPABASE_URL: hosted https://<project-ref>.supabase.co; the Supabase CLI (`supabase start`) http://127.0.0.1:54321, the default; ' +
            '`npm start -- --serve` prints its own, on a free port each run unless started with `--port N`.',
        },
      },
    }],
    security: [{ bearerAuth: [] }],
    paths,
    components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } }, schemas },
  };
}
