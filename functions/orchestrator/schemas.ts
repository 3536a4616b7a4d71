// What the orchestrator accepts and answers, as zod schemas: request bodies and
// queries are validated with them, and openapi.json is generated from all of
// them (scripts/openapi.ts); a test checks the handler's real answers against them.
import { z } from 'zod';
import { CONTENT_TYPES, JOB_KINDS, REQUESTED_RUN_KINDS, RUN_KINDS } from '../../shared/content-types.ts';
import { INSTALL_STATE } from './oauth-install.ts';
import { WAITING_REASONS } from '../../shared/sql/waiting.ts';

/** Component schemas of the OpenAPI document, by name. */
export const apiSchemas = z.registry<{ id: string; description?: string }>();
function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

const uuid = z.string().uuid();
const timestamp = z.iso.datetime({ offset: true });
const contentType = z.enum(CONTENT_TYPES);
const jobKind = z.enum(RUN_KINDS);

// ---------- request bodies ----------

/** Characters refused in names: C0/C1 controls, line/paragraph separators. */
const FORBIDDEN_IN_NAMES = /[\p{Cc}\u2028\u2029]/u;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The only format characters (Unicode category Cf) a name may hold, each where it shows,
 * so cannot hide anything: a zero-width joiner inside an emoji sequence (👩‍💻), the tag
 * characters of a subdivision flag (🏴 + tags + cancel tag), a zero-width (non-)joiner
 * after a virama or other script-specific combining mark (Indic half forms), and a
 * zero-width non-joiner between letters of a joining script (Persian). Everything else
 * of category Cf is refused: zero-width spaces (U+200B, U+2060, U+FEFF), bidirectional
 * marks, embeddings, overrides and isolates, the soft hyphen, invisible operators, stray tags.
 */
const VISIBLE_FORMAT_SEQUENCES = [
  /(?<=\p{Extended_Pictographic}\uFE0F?[\u{1F3FB}-\u{1F3FF}]?)\u200D(?=\p{Extended_Pictographic})/gu,
  /(?<=\u{1F3F4})[\u{E0030}-\u{E0039}\u{E0061}-\u{E007A}]{1,8}\u{E007F}/gu,
  /(?<=\p{Mn})(?<!\p{sc=Zinh}|\p{sc=Zyyy}|\p{sc=Latn}|\p{sc=Grek}|\p{sc=Cyrl})[\u200C\u200D](?=\p{L})/gu,
  /(?<=[\p{sc=Arab}\p{sc=Syrc}\p{sc=Nkoo}\p{sc=Mong}\p{sc=Adlm}]\p{Mn}*)\u200C(?=\p{Mn}*[\p{sc=Arab}\p{sc=Syrc}\p{sc=Nkoo}\p{sc=Mong}\p{sc=Adlm}])/gu,
];
const FORMAT_CHARACTER = /\p{Cf}/u;

/** Whether `s` holds a Unicode format character (category Cf) outside the visible sequences above. */
export function hasInvisibleFormatCharacter(s: string): boolean {
  if (!FORMAT_CHARACTER.test(s)) return false;
  return FORMAT_CHARACTER.test(VISIBLE_FORMAT_SEQUENCES.reduce((t, re) => t.replace(re, ''), s));
}

/** A display name: valid Unicode, NFC-normalised and trimmed, 1-200 characters, no control or invisible formatting characters. */
export const displayName = z
  .string()
  .max(1000)
  .refine((s) => !LONE_SURROGATE.test(s), 'must be valid Unicode text (no lone surrogates)')
  .transform((s) => s.normalize('NFC').trim())
  .pipe(
    z
      .string()
      .min(1, 'must not be empty')
      .max(200, 'must be at most 200 characters')
      .refine((s) => !FORBIDDEN_IN_NAMES.test(s), 'must not contain control characters or line/paragraph separators')
      .refine(
        (s) => FORBIDDEN_IN_NAMES.test(s) || !hasInvisibleFormatCharacter(s),
        'must not contain invisible formatting characters (Unicode category Cf, e.g. U+200B zero-width space, U+FEFF, U+00AD soft hyphen, bidirectional marks, overrides or isolates)',
      ),
  )
  .describe(
    'Stored NFC-normalised and trimmed: 1-200 characters, valid Unicode, without control characters (U+0000-001F, U+007F-009F), ' +
      'line/paragraph separators, or format characters (Unicode category Cf: zero-width spaces and joiners, U+FEFF, the soft hyphen, ' +
      'bidirectional marks, embeddings, overrides and isolates, tags), except a zero-width joiner inside an emoji sequence, the tags of a ' +
      'subdivision flag, and a zero-width (non-)joiner after a virama or between letters of a joining script such as Persian. ' +
      'A refused name is a 400 INVALID_BODY whose fieldErrors name `name`.',
  );

export const createRunBody = named(
  'CreateRunRequest',
  z
    .object({
      action: z.literal('create_run').optional().describe('Optional; a body without `action` creates a run.'),
      portalId: uuid,
      contentTypes: z
        .array(contentType)
        .min(1)
        .max(CONTENT_TYPES.length)
        .refine((ts) => new Set(ts).size === ts.length, 'content types must be distinct')
        .optional()
        .describe('Default: all eight.'),
      kind: z.enum(REQUESTED_RUN_KINDS).optional().describe('Default: fetch.'),
      fetchMode: z.enum(['full', 'incremental']).optional().describe(
        'A fetch: `full` (default: every item; items HubSpot no longer lists are marked deleted) or `incremental` ("sync changes now": ' +
          'only what changed since each type\'s sync mark, and what was archived; a type never synced is fetched in full). Not for exports.'),
    })
    .strict()
    .refine((b) => b.fetchMode === undefined || (b.kind ?? 'fetch') === 'fetch', { message: 'only a fetch has a fetch mode', path: ['fetchMode'] }),
  'Create a fetch or export run for one of your portals.',
);

export const stopRunBody = named('StopRunRequest', z.object({ action: z.literal('stop'), runId: uuid }).strict(), 'Stop a run. Never counted against the write limit.');

export const disconnectPortalBody = named(
  'DisconnectPortalRequest',
  z.object({ action: z.literal('disconnect_portal'), portalId: uuid }).strict(),
  "Disconnect one of your portals: its stored HubSpot tokens are deleted and its pending and running fetch jobs fail; its content, runs and export files stay. Connect it again to reconnect.",
);

export const connectPortalBody = named(
  'ConnectPortalRequest',
  z
    .object({
      action: z.literal('connect_portal'),
      name: displayName.optional().describe('Display name for the portal. Default: the name it already has (a reconnect), else "HubSpot portal <hub id>".'),
      accessToken: z.string().min(1).max(4096).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces'),
    })
    .strict(),
  'Connect (or reconnect) a HubSpot portal with a private app access token. The name is stored NFC-normalised and trimmed.',
);

export const startInstallBody = named(
  'StartHubSpotInstallRequest',
  z.object({ action: z.literal('start_hubspot_install') }).strict(),
  "Start connecting a portal with HubSpot OAuth: answers HubSpot's authorize URL; send the browser there.",
);

export const completeInstallBody = named(
  'CompleteHubSpotInstallRequest',
  z
    .object({
      action: z.literal('complete_hubspot_install'),
      state: z.string().max(100).regex(INSTALL_STATE, 'must be the `state` HubSpot passed back to the redirect URL').describe('The `state` query parameter of the redirect.'),
      code: z.string().min(1).max(1024).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces').optional()
        .describe('The `code` query parameter of the redirect (when HubSpot granted access).'),
      error: z.string().min(1).max(100).regex(/^[A-Za-z0-9_.-]+$/, 'must be an OAuth error code such as access_denied').optional()
        .describe('The `error` query parameter of the redirect (e.g. access_denied) instead of `code`.'),
      name: displayName.optional().describe('Display name for the portal. Default: the name it already has, else "HubSpot portal <hub id>".'),
    })
    .strict()
    .superRefine((b, ctx) => {
      if ((b.code === undefined) === (b.error === undefined)) {
        ctx.addIssue({ code: 'custom', path: ['code'], message: 'send either `code` or `error` from the redirect, not both or neither' });
      }
    }),
  "Finish an install with the redirect's query parameters (`code` and `state`, or `error` and `state`), sent with the user's access token.",
);

// ---------- queries ----------

export const runQuery = z.object({ runId: uuid });

/** Runs list: newest first, keyset pagination with the previous page's `nextCursor`. */
export const runsQuery = z.object({
  portalId: uuid.optional().describe("Only this portal's runs."),
  kind: jobKind.optional(),
  limit: z.coerce.number().int().min(1).max(100).optional().describe('Page size, 1-100 (default 20).'),
  cursor: z.string().max(200).optional().describe('`nextCursor` of the previous page.'),
});

export const latestExportsQuery = z.object({ portalId: uuid.describe('One of your portals.') });

export const exportJobId = z.string().regex(/^[1-9][0-9]{0,18}$/, 'must be a job id').refine((s) => /^[0-9]{1,19}$/.test(s) && BigInt(s) <= 9223372036854775807n, 'must be a job id');

// ---------- responses ----------

export const errorBody = named(
  'Error',
  z.strictObject({
    code: z.string().describe('Machine-readable, e.g. INVALID_BODY, RATE_LIMITED.'),
    message: z.string().describe('For people.'),
    details: z
      .object({
        fieldErrors: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional().describe('400 INVALID_BODY / INVALID_QUERY: which field, and why.'),
        duplicateTypes: z.array(contentType).optional().describe('409 ALL_DUPLICATE_JOBS: the requested types.'),
        duplicateRunIds: z.record(z.string(), uuid).optional().describe('409 ALL_DUPLICATE_JOBS: content type → the run in flight that covers it.'),
        retryAfterSeconds: z.number().int().optional().describe('429 RATE_LIMITED, 409 EXPORT_NOT_READY: also in the Retry-After header.'),
        errors: z.array(z.strictObject({
          row: z.number().int().nullable().describe('The data row (1-based, the header not counted); null for the header or the whole file.'),
          column: z.string().nullable().describe('The column (its header name), when the error is one cell\'s.'),
          code: z.string().describe('unknown_column, duplicate_column, missing_column, row_shape, not_in_copy, duplicate_row, stale, read_only, wrong_type, ' +
            'unterminated_quote, stray_quote, bare_cr, nul_character, empty_file, not_utf8, too_many_errors.'),
          message: z.string(),
        })).optional().describe('422 INVALID_CSV: every error of the uploaded file (at most 1,000, then one too_many_errors).'),
      })
      .optional(),
  }),
  'Every error: `{code, message, details?}`.',
);

export const fetchResult = named(
  'FetchResult',
  z.looseObject({
    fetched: z.number().int().describe('Items fetched so far (final when completed).'),
    added: z.number().int().optional(),
    updated: z.number().int().optional(),
    unchanged: z.number().int().optional(),
    pages: z.number().int().optional().describe('HubSpot pages saved.'),
    deleted: z.number().int().optional().describe('Set on completion: stored items HubSpot no longer lists (marked deleted).'),
  }),
  "A fetch job's counts, updated with every saved page.",
);

export const probeResult = named(
  'ProbeResult',
  z.looseObject({
    mode: z.literal('probe'),
    probed: z.array(contentType).describe('The types the probe asked HubSpot about.'),
    changed: z.array(contentType).describe('Those HubSpot said changed: each got a fetch job in this run.'),
  }),
  "A probe's answer (a scheduled cycle's first job, which asks HubSpot whether anything changed: docs/sync.md).",
);

export const exportResult = named(
  'ExportResult',
  z.looseObject({
    rows: z.number().int(),
    bytes: z.number().int(),
    location: z.string().describe('The file as `<bucket>/<object path>`, `exports/<owner>/<run>/<type>-<n>.csv`, the same deployed and locally: a name, never a path on the server. Nothing to open; use `url` or GET /orchestrator/exports/{jobId}.'),
    url: z.string().nullable().describe('A download link that works without a token (a plain link or `<a download>`), issued fresh by every GET (valid one hour, see urlExpiresAt): deployed a signed Storage URL; locally (EXPORT_DIR) a signed link to GET /orchestrator/exports/{jobId} when EXPORT_URL_KEY is set (npm start sets it). Null in a 201 or when it cannot be issued (see urlUnavailable).'),
    urlExpiresAt: timestamp.optional().describe('When `url` stops working (GET responses only).'),
    urlUnavailable: z.object({
      code: z.enum(['EXPORT_FILE_GONE', 'STORAGE_MISCONFIGURED', 'STORAGE_UNAVAILABLE']),
      message: z.string(),
    }).optional().describe('GET responses, when no fresh `url` could be signed (then `url` is null): the file is gone (EXPORT_FILE_GONE), or Storage refused this server\'s key (STORAGE_MISCONFIGURED) or did not answer (STORAGE_UNAVAILABLE); the file is kept in those two cases.'),
    fromFetch: z.strictObject({
      runId: uuid,
      jobId: z.string(),
      status: z.enum(['completed', 'failed', 'stopped']).describe('completed: the file holds everything HubSpot listed then; stopped or failed: what was stored by then (that fetch\'s pages over the previous content).'),
      finishedAt: timestamp,
    }).nullable().optional().describe('GET responses: the fetch whose content this file holds (the last fetch of the type that had ended when the export began); null when none is known (never fetched, or its job was deleted by retention).'),
  }),
  "A completed export job's file.",
);

export const planJobResult = named(
  'PlanJobResult',
  z.looseObject({ batches: z.number().int().describe('HubSpot batch reads the job made (its last attempt).') }),
  "A completed plan job's counts (the items' classification is the plan's: GET /orchestrator/publish/plans/{planId}).",
);

export const publishJobResult = named(
  'PublishJobResult',
  z.looseObject({
    audit_pages: z.number().int().describe("HubSpot audit-log pages read after the writes (the publish window check)."),
    overwritten: z.number().int().describe('Items found overwritten in their window.'),
  }),
  "A completed publish job's publish window check (each item's outcome is the plan's: GET /orchestrator/publish/plans/{planId}/items).",
);

export const hubspotLimits = named(
  'HubSpotLimits',
  z.strictObject({
    maxPerInterval: z.number().int().nullable().describe("Requests HubSpot allows this portal per interval, as learned from its X-HubSpot-RateLimit-Max header (until then the auth kind's documented limit: private app 100, OAuth 110 per 10 s); null before the portal's first HubSpot request."),
    intervalMs: z.number().int().nullable().describe('The interval of maxPerInterval in milliseconds (HubSpot: 10 000).'),
    source: z.enum(['headers', 'auth_kind', 'configuration']).nullable().describe("Where maxPerInterval comes from: HubSpot's answers, the auth kind, or HUBSPOT_RATE_LIMIT_PER_10S when that ceiling is lower."),
    learnedAt: timestamp.nullable(),
    dailyLimit: z.number().int().nullable().describe("HubSpot's daily request limit of the account (private apps; null for OAuth installs, which have none, or before it is known)."),
    dailyRemaining: z.number().int().nullable().describe('What remains of the day (HubSpot\'s X-HubSpot-RateLimit-Daily-Remaining less requests since); jobs stop before HUBSPOT_DAILY_RESERVE_PERCENT of dailyLimit is left.'),
    dailyResetsAt: timestamp.nullable().describe("When the daily limit resets: the next midnight in the account's time zone."),
    timeZone: z.string().nullable().describe("The HubSpot account's time zone (account details), e.g. US/Eastern; null: not known yet (UTC is assumed)."),
  }),
  "A portal's HubSpot request limits as this service has learned them from HubSpot's answers.",
);

export const jobStatus = z.enum(['pending', 'running', 'completed', 'failed', 'stopped']);

const waitingReason = z.string().nullable().describe(
  "Why a pending job waits, in words (the jobs table's waiting_reason when the worker parked it, e.g. \"waiting for HubSpot's daily limit until <ISO time>\"; " +
    'else "export waiting for the fetch", "fetch waiting for the export", "retrying after a failure until <ISO time>"). Null when waitingReasonCode is.',
);
const waitingReasonCode = z.enum(WAITING_REASONS).nullable().describe(
  "The same for programs: hubspot_daily_limit (the portal's HubSpot daily limit is spent; until waitingUntil, its reset), " +
    'hubspot_rate_limit (HubSpot asked to wait, Retry-After), fetch_in_flight (an export waits for the fetch of its type to end), ' +
    'export_in_flight (a fetch waits for the running export of its type), retry_backoff (a retry after a failure, at waitingUntil), ' +
    'portal_paused (an operator paused the portal: until it is resumed, no end). ' +
    'Null when it is not waiting for anything but a free worker (or is not pending).',
);
const waitingUntil = timestamp.nullable().describe('When the wait ends, for the reasons with an end (hubspot_daily_limit, hubspot_rate_limit, retry_backoff); else null.');
export const runStatus = z.enum(['pending', 'running', 'completed', 'partially_failed', 'failed', 'stopped']);

export const runSummary = named(
  'Run',
  z.strictObject({
    id: uuid,
    portalId: uuid,
    kind: jobKind,
    status: runStatus,
    contentTypes: z.array(contentType),
    jobsTotal: z.number().int(),
    jobsCompleted: z.number().int(),
    jobsFailed: z.number().int(),
    jobsStopped: z.number().int(),
    itemsDone: z.number().int().nullable().describe('Items fetched (fetch), rows written (export) or items handled (plan, publish, restore), over all jobs; null once retention deleted the jobs.'),
    itemsTotal: z.number().int().nullable().describe('Sum of the jobs\' totals; null while any job\'s total is unknown.'),
    waitingReason: waitingReason.describe('While the run is unfinished and none of its jobs is running: the waitingReason of its first waiting job (see Job). Else null.'),
    waitingReasonCode: waitingReasonCode.describe("The waitingReasonCode of that job (see Job)."),
    waitingUntil,
    createdAt: timestamp,
    startedAt: timestamp.nullable(),
    finishedAt: timestamp.nullable(),
    trigger: z.enum(['user', 'schedule']).describe('Who asked: a user (POST /orchestrator), or the portal\'s sync schedule.'),
    fetchMode: z.enum(['full', 'incremental']).nullable().describe('A fetch: full or incremental (changes only); null for the other kinds.'),
  }),
  'A run. `status` turns `running` when one of its jobs first reports work (its first saved page or heartbeat), not at the claim: a run may read `pending` for a few seconds while a job already says `running`. `waitingReason` says why a run that is not working waits.',
);

export const jobDetail = named(
  'Job',
  z.strictObject({
    id: z.string().describe('A bigint, as a string.'),
    kind: z.enum(JOB_KINDS).describe("The run's kind (fetch, export, or a publish's plan, publish, restore); or probe: a scheduled cycle's first job, which asks HubSpot whether anything changed and adds a fetch job per changed type."),
    contentType: contentType.nullable().describe('Null for a probe (it asks about every type of the run).'),
    status: jobStatus,
    attempts: z.number().int(),
    maxAttempts: z.number().int(),
    done: z.number().int().describe('Items fetched, rows written, or items planned, published or restored so far.'),
    total: z.number().int().nullable().describe('Items expected (HubSpot total at creation, or stored items for an export); null when unknown.'),
    lastError: z.string().nullable(),
    result: z.union([probeResult, fetchResult, exportResult, planJobResult, publishJobResult]).nullable()
      .describe('What the job reported: a fetch\'s or export\'s counts, a probe\'s types, a plan or publish job\'s; null before it completes (and for a restore job).'),
    waitingReason,
    waitingReasonCode,
    waitingUntil,
    retryingUntil: timestamp.nullable().describe(
      'While the job keeps failing with retryable errors (HubSpot not answering, 5xx, timeouts; pending in its backoff, or running ' +
        'its next try) and has made no progress since the last one: when it gives up, its kind\'s retry_for_seconds (30 minutes) ' +
        'after the first of them. Null otherwise. Realtime rows carry it as `retry_until` (with `failing_progress`: it holds ' +
        'while `progress_done` is at most that).',
    ),
    startedAt: timestamp.nullable().describe('First claim.'),
    finishedAt: timestamp.nullable(),
  }),
);

export const runDetailResponse = named('RunDetail', z.strictObject({
  run: runSummary,
  jobs: z.array(jobDetail),
  hubspotLimits,
}));

export const runListResponse = named(
  'RunList',
  z.strictObject({
    runs: z.array(runSummary),
    nextCursor: z.string().nullable().describe('Pass as `cursor` for the next (older) page; null on the last page.'),
  }),
);

export const portalSummary = named(
  'Portal',
  z.strictObject({
    id: uuid,
    hubspotPortalId: z.number().int(),
    name: z.string(),
    createdAt: timestamp,
    authKind: z.enum(['private_app', 'oauth']).describe('How the portal was connected: a private-app token or the HubSpot app (OAuth).'),
    disconnectedAt: timestamp.nullable().describe('Set when HubSpot access was removed (the app was uninstalled): reconnect the portal. Null while connected.'),
    disconnectedReason: z.string().nullable().describe('Why the portal is disconnected, for its owner; null while connected.'),
    hubspotLimits,
  }),
);

export const portalListResponse = named('PortalList', z.strictObject({ portals: z.array(portalSummary) }));

const duplicateRunIds = z.record(z.string(), uuid).describe('Content type → the run in flight that already covers it.');

export const createRunResponse = named(
  'RunCreated',
  z.strictObject({
    runId: uuid,
    kind: jobKind,
    createdTypes: z.array(contentType),
    duplicateTypes: z.array(contentType).describe('Requested types left out because a run in flight already covers them: a job for them is pending or running, or completed in a run not yet finished (this run does not contain them).'),
    duplicateRunIds,
    jobs: z.array(z.strictObject({ id: z.string(), contentType, status: jobStatus, total: z.number().int().nullable() })),
  }),
);

export const disconnectPortalResponse = named(
  'PortalDisconnected',
  z.strictObject({
    portalId: uuid,
    disconnectedAt: timestamp,
    disconnectedReason: z.string().describe('"disconnected by its owner", or the reason it already had (e.g. HubSpot access removed).'),
    failedFetchJobs: z.number().int().describe('Pending and running fetch jobs this failed (0 when already disconnected).'),
  }),
);

export const latestExportsResponse = named(
  'LatestExports',
  z.strictObject({
    exports: z.array(z.strictObject({
      contentType,
      jobId: z.string().describe('The export job (GET /orchestrator/exports/{jobId} downloads its file).'),
      runId: uuid,
      finishedAt: timestamp,
      result: exportResult,
    })).describe('The newest completed export of each content type that has one, in content-type order.'),
  }),
);

export const stopRunResponse = named('RunStopped', z.strictObject({ runId: uuid, stopped: z.boolean().describe('false when the run had already finished'), status: runStatus }));

export const connectPortalResponse = named('PortalConnected', z.strictObject({ portalId: uuid, hubspotPortalId: z.number().int(), name: z.string() }));

export const installStartedResponse = named(
  'HubSpotInstallStarted',
  z.strictObject({
    authorizeUrl: z.string().describe("HubSpot's authorize page for this install (client_id, redirect_uri, scope, state, code_challenge, code_challenge_method=S256). Send the browser there."),
    expiresAt: timestamp.describe('The install must be completed before this (state_ttl in private.oauth_install_settings, 10 minutes by default); the state works once.'),
  }),
);

export const statsResponse = named(
  'QueueStats',
  z.strictObject({ stats: z.record(z.string(), z.unknown()).describe('What the queue_stats() SQL function returns (docs/sql-api.md).') }),
);

export type CreateRunBody = z.infer<typeof createRunBody>;
export type StopRunBody = z.infer<typeof stopRunBody>;
export type ConnectPortalBody = z.infer<typeof connectPortalBody>;
export type CompleteInstallBody = z.infer<typeof completeInstallBody>;

/** Field errors in a stable, JSON-friendly shape (never echoing secret values). */
export function fieldErrors(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String).join('.') || '(body)', message: i.message }));
}
