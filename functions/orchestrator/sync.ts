// Sync endpoints (docs/sync.md): a portal's sync status (schedule, last and
// next sync, the last sync's changes), its change feed, and setting or
// deleting its schedule. Everything runs as the user, so RLS decides: only a
// portal's owner reads its marks, schedule and content, or writes its schedule.
import { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { CONTENT_TYPES, type ContentType } from '../../shared/content-types.ts';
import { HttpError, json } from '../../shared/http.ts';
import { ownPortal, type PortalRow } from '../../shared/sql/portals.ts';
import { deleteSyncSchedule as deleteSchedule, readChangeFeed, syncState, upsertSyncSchedule, type ScheduleFields, type ScheduleRow } from '../../shared/sql/sync.ts';
import type { ApiOperation } from './api-operation.ts';
import type { OrchestratorDeps } from './deps.ts';
import { apiSchemas, errorBody } from './schemas.ts';

function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemas.add(schema, description ? { id, description } : { id });
  return schema;
}

const uuid = z.string().uuid();
const timestamp = z.iso.datetime({ offset: true });
const contentType = z.enum(CONTENT_TYPES);
const contentTypes = z.array(contentType).min(1).max(CONTENT_TYPES.length)
  .refine((ts) => new Set(ts).size === ts.length, 'content types must be distinct');

// ---------- requests ----------

export const setScheduleBody = named(
  'SetSyncScheduleRequest',
  z.object({
    action: z.literal('set_sync_schedule'),
    portalId: uuid,
    incrementalEveryMinutes: z.number().int().min(1).max(1440).nullable().optional()
      .describe('An incremental sync every N minutes (1-1440); null: none. Default for a new schedule: 15.'),
    fullEveryMinutes: z.number().int().min(15).max(10080).nullable().optional()
      .describe('A full reconcile (every item; finds hard deletions) every M minutes (15-10080); null: none. Default: 1440 (daily).'),
    contentTypes: contentTypes.optional().describe('Default for a new schedule: all eight.'),
    overlapSeconds: z.number().int().min(0).max(3600).optional()
      .describe('An incremental sync re-reads items updated this long before the mark (default 120).'),
    paused: z.boolean().optional().describe('A paused schedule creates no runs.'),
    hubdbSweepEveryMinutes: z.number().int().min(0).max(10080).optional()
      .describe('An incremental sync sweeps HubDB tables for deleted rows at most this often (0: every cycle; default 60); a deleted row is seen up to this much later.'),
  }).strict().refine((b) => b.incrementalEveryMinutes !== null || b.fullEveryMinutes !== null, {
    message: 'schedule an incremental sync, a full reconcile, or both', path: ['incrementalEveryMinutes'],
  }),
  "Create or change a portal's sync schedule (fields left out keep their value).",
);

export const deleteScheduleBody = named(
  'DeleteSyncScheduleRequest',
  z.object({ action: z.literal('delete_sync_schedule'), portalId: uuid }).strict(),
  "Delete a portal's sync schedule (its stored content and marks stay).",
);

export const syncStatusQuery = z.object({ portalId: uuid });

export const changesQuery = z.object({
  portalId: uuid,
  contentType: contentType.optional().describe('Only this type (default: every type).'),
  cursor: z.string().max(2000).optional().describe('`nextCursor` of the previous page; `now`: from the current end of the feed; none: from the first stored item.'),
  limit: z.coerce.number().int().min(1).max(500).optional().describe('Changes per page, 1-500 (default 100).'),
});

// ---------- responses ----------

export const syncSchedule = named('SyncSchedule', z.strictObject({
  portalId: uuid,
  contentTypes: z.array(contentType),
  incrementalEveryMinutes: z.number().int().nullable(),
  fullEveryMinutes: z.number().int().nullable(),
  overlapSeconds: z.number().int(),
  paused: z.boolean(),
  hubdbSweepEveryMinutes: z.number().int(),
  nextIncrementalAt: timestamp.nullable(),
  nextFullAt: timestamp.nullable(),
  lastScheduledAt: timestamp.nullable(),
  updatedAt: timestamp,
}));

const changeCounts = z.strictObject({ added: z.number().int(), updated: z.number().int(), deleted: z.number().int() });

export const syncStatusResponse = named('SyncStatus', z.strictObject({
  portalId: uuid,
  schedule: syncSchedule.nullable(),
  nextSyncAt: timestamp.nullable().describe('When the schedule creates its next run; null without a schedule, paused, or disconnected.'),
  activeSyncRunId: uuid.nullable().describe('A fetch run of the portal still in flight.'),
  lastSync: z.strictObject({
    runId: uuid,
    mode: z.enum(['full', 'incremental']),
    trigger: z.enum(['user', 'schedule']),
    status: z.string(),
    startedAt: timestamp.nullable(),
    finishedAt: timestamp,
    changes: changeCounts.describe('Items the sync added, updated and marked deleted, over its types.'),
    checked: z.number().int().describe('Items HubSpot listed to the sync, over its types (a full sync: every item; changes only: what changed since the mark).'),
    changesByType: z.record(z.string(), changeCounts),
  }).nullable().describe('The portal\'s most recently finished fetch run (stopped runs aside). A scheduled check that found nothing makes no run: see the types\' lastIncrementalAt.'),
  types: z.array(z.strictObject({
    contentType,
    highWater: timestamp.describe('The mark: the next incremental sync reads what changed after it (less the overlap).'),
    lastFullAt: timestamp.nullable(),
    lastIncrementalAt: timestamp.nullable().describe('When an incremental fetch last ended for the type, or a scheduled check last found it unchanged (such a check makes no run).'),
  })).describe('Each synced type\'s mark.'),
}));

export const changeFeedResponse = named('ChangeFeed', z.strictObject({
  changes: z.array(z.strictObject({
    contentType,
    hubspotId: z.string(),
    change: z.enum(['inserted', 'updated', 'deleted']),
    hubspotUpdatedAt: timestamp.nullable(),
    deletedAt: timestamp.nullable(),
    data: z.unknown().describe('The item as last stored (a deleted item: as last seen).'),
  })),
  nextCursor: z.string().describe('Pass as `cursor` to read on; the same cursor later returns what changed since. An item is `inserted` when it was created after the cursor the read began from, however the read is paged.'),
  more: z.boolean().describe('true: more changes wait right now (read again with nextCursor).'),
}));

const err = (description: string) => ({ description, json: [errorBody] });

/** The sync operations, for openapi.json (api.ts lists them with the others). */
export const SYNC_OPERATIONS: ApiOperation[] = [
  {
    method: 'get',
    path: '/orchestrator/sync',
    operationId: 'getSyncStatus',
    summary: "A portal's sync: its schedule, last and next sync, the last sync's changes, each type's mark",
    query: syncStatusQuery,
    responses: {
      200: { description: 'The sync status.', json: [syncStatusResponse] },
      400: err('INVALID_QUERY: portalId is not a uuid.'),
      401: err('UNAUTHENTICATED: missing, invalid or expired access token.'),
      404: err('PORTAL_NOT_FOUND: not yours or no such portal.'),
    },
  },
  {
    method: 'get',
    path: '/orchestrator/changes',
    operationId: 'listChanges',
    summary: "What changed in a portal's stored content since a cursor: items inserted, updated and deleted, per type",
    description: 'Ordered per content type by the order the changes were stored. Follow it by passing each page\'s `nextCursor` back.',
    query: changesQuery,
    responses: {
      200: { description: 'One page of changes.', json: [changeFeedResponse] },
      400: err('INVALID_QUERY: a bad portalId, contentType or limit. INVALID_CURSOR: a cursor this API did not give out.'),
      401: err('UNAUTHENTICATED: missing, invalid or expired access token.'),
      404: err('PORTAL_NOT_FOUND: not yours or no such portal.'),
    },
  },
];

// ---------- handlers ----------

const iso = (v: unknown): string | null => (v instanceof Date ? v.toISOString() : null);

async function requireOwnPortal(deps: OrchestratorDeps, user: VerifiedUser, portalId: string): Promise<PortalRow> {
  const portal = await ownPortal(deps.sql, user.claims, portalId);
  if (!portal) throw new HttpError(404, 'PORTAL_NOT_FOUND', 'No such portal among yours.');
  return portal;
}

function scheduleOf(r: ScheduleRow): z.infer<typeof syncSchedule> {
  return {
    portalId: r.portal_id as string,
    contentTypes: r.content_types as ContentType[],
    incrementalEveryMinutes: (r.incremental_every_minutes as number | null) ?? null,
    fullEveryMinutes: (r.full_every_minutes as number | null) ?? null,
    overlapSeconds: r.overlap_seconds as number,
    paused: r.paused as boolean,
    hubdbSweepEveryMinutes: r.hubdb_sweep_every_minutes as number,
    nextIncrementalAt: iso(r.next_incremental_at),
    nextFullAt: iso(r.next_full_at),
    lastScheduledAt: iso(r.last_scheduled_at),
    updatedAt: iso(r.updated_at)!,
  };
}

/** POST action set_sync_schedule: upserts the schedule as the user (RLS: the portal's owner only). */
export async function setSyncSchedule(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof setScheduleBody>): Promise<Response> {
  await requireOwnPortal(deps, user, body.portalId);
  const fields: ScheduleFields = {};
  if (body.incrementalEveryMinutes !== undefined) fields.incremental_every_minutes = body.incrementalEveryMinutes;
  if (body.fullEveryMinutes !== undefined) fields.full_every_minutes = body.fullEveryMinutes;
  if (body.contentTypes !== undefined) fields.content_types = body.contentTypes;
  if (body.overlapSeconds !== undefined) fields.overlap_seconds = body.overlapSeconds;
  if (body.paused !== undefined) fields.paused = body.paused;
  if (body.hubdbSweepEveryMinutes !== undefined) fields.hubdb_sweep_every_minutes = body.hubdbSweepEveryMinutes;
  let schedule;
  try {
    schedule = await upsertSyncSchedule(deps.sql, user.claims, body.portalId, fields);
  } catch (e) {
    // The table's own checks (e.g. both intervals null on an existing schedule).
    if ((e as { code?: string }).code === '23514') {
      throw new HttpError(400, 'INVALID_BODY', 'The schedule needs an incremental sync, a full reconcile, or both.', {
        fieldErrors: [{ path: 'incrementalEveryMinutes', message: 'schedule an incremental sync, a full reconcile, or both' }],
      });
    }
    throw e;
  }
  deps.log.info('sync_schedule_set', { portal_id: body.portalId });
  return json(200, { schedule: scheduleOf(schedule) });
}

/** POST action delete_sync_schedule. */
export async function deleteSyncSchedule(deps: OrchestratorDeps, user: VerifiedUser, body: z.infer<typeof deleteScheduleBody>): Promise<Response> {
  await requireOwnPortal(deps, user, body.portalId);
  return json(200, { portalId: body.portalId, deleted: await deleteSchedule(deps.sql, user.claims, body.portalId) });
}

export const scheduleResponse = named('SyncScheduleSet', z.strictObject({ schedule: syncSchedule }));
export const scheduleDeletedResponse = named('SyncScheduleDeleted', z.strictObject({ portalId: uuid, deleted: z.boolean() }));

/** GET /sync?portalId=: schedule, next sync, last sync and its changes, the marks. */
export async function getSyncStatus(deps: OrchestratorDeps, user: VerifiedUser, query: z.infer<typeof syncStatusQuery>): Promise<Response> {
  const portal = await requireOwnPortal(deps, user, query.portalId);
  const { schedule, last, jobs, active, marks } = await syncState(deps.sql, user.claims, query.portalId);
  const byType: Record<string, z.infer<typeof changeCounts>> = {};
  let checked = 0;
  const add = (type: string, c: z.infer<typeof changeCounts>) => {
    const t = (byType[type] ??= { added: 0, updated: 0, deleted: 0 });
    byType[type] = { added: t.added + c.added, updated: t.updated + c.updated, deleted: t.deleted + c.deleted };
  };
  for (const j of jobs) {
    const r = (j.result ?? {}) as Record<string, unknown>;
    checked += Number(r.fetched ?? 0);
    add(j.content_type as string, { added: Number(r.added ?? 0), updated: Number(r.updated ?? 0), deleted: Number(r.deleted ?? 0) });
    // The rows of the HubDB tables the tables job tombstoned went with them (docs/sync.md).
    if (r.hubdbRowsDeleted !== undefined) add('hubdb_rows', { added: 0, updated: 0, deleted: Number(r.hubdbRowsDeleted) });
  }
  const total = Object.values(byType).reduce((a, c) => ({ added: a.added + c.added, updated: a.updated + c.updated, deleted: a.deleted + c.deleted }), { added: 0, updated: 0, deleted: 0 });
  const next = schedule && !schedule.paused && !portal.disconnected_at
    ? [schedule.next_incremental_at, schedule.next_full_at].filter((d): d is Date => d instanceof Date).sort((a, b) => a.getTime() - b.getTime())[0] ?? null
    : null;
  return json(200, {
    portalId: query.portalId,
    schedule: schedule ? scheduleOf(schedule) : null,
    nextSyncAt: next ? next.toISOString() : null,
    activeSyncRunId: (active?.id as string | undefined) ?? null,
    lastSync: last ? {
      runId: last.id, mode: last.fetch_mode ?? 'full', trigger: last.trigger, status: last.status,
      startedAt: iso(last.started_at), finishedAt: iso(last.finished_at)!, changes: total, checked, changesByType: byType,
    } : null,
    types: marks.map((m) => ({
      contentType: m.content_type, highWater: iso(m.high_water)!, lastFullAt: iso(m.last_full_at), lastIncrementalAt: iso(m.last_incremental_at),
    })),
  });
}

// The feed's cursor: per content type, the change_seq read up to (`after`; each type's sequence
// follows its commit order), and where the reader's read began (`origin`): an item is `inserted`
// when its insert comes after the origin, so its label never depends on how the read is paged. The
// origin moves to the position once a page reaches the end of the feed (`more: false`).
interface ChangeCursor {
  after: Record<string, string>;
  origin: Record<string, string>;
}

const MAX_BIGINT = 9223372036854775807n;

function encodeChangeCursor(cursor: ChangeCursor): string {
  return btoa(JSON.stringify(cursor)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

function seqsOf(value: unknown): Record<string, string> | null {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (!(CONTENT_TYPES as readonly string[]).includes(k) || typeof v !== 'string' || !/^[0-9]{1,19}$/.test(v) || BigInt(v) > MAX_BIGINT) return null;
    out[k] = v;
  }
  return out;
}

// A cursor this API gave out, or null. A cursor of the first form (the positions alone) reads as its own origin.
function decodeChangeCursor(text: string): ChangeCursor | null {
  let value: unknown;
  try {
    value = JSON.parse(atob(text.replaceAll('-', '+').replaceAll('_', '/')));
  } catch {
    return null;
  }
  if (value && typeof value === 'object' && 'after' in value && 'origin' in value && Object.keys(value).length === 2) {
    const { after, origin } = value as { after: unknown; origin: unknown };
    const a = seqsOf(after);
    const o = seqsOf(origin);
    return a && o ? { after: a, origin: o } : null;
  }
  const flat = seqsOf(value);
  return flat ? { after: flat, origin: { ...flat } } : null;
}

/**
 * GET /changes?portalId=&cursor=&limit=: what changed after the cursor, type by type, in stored order.
 * `cursor=now` starts at the current end of the feed (only what changes from now on).
 */
export async function listChanges(deps: OrchestratorDeps, user: VerifiedUser, query: z.infer<typeof changesQuery>): Promise<Response> {
  const cursor = query.cursor === undefined || query.cursor === 'now' ? { after: {}, origin: {} } : decodeChangeCursor(query.cursor);
  if (cursor === null) {
    throw new HttpError(400, 'INVALID_CURSOR', 'The cursor is not one this API gave out: pass a nextCursor, "now", or none.', {
      fieldErrors: [{ path: 'cursor', message: 'not a change cursor' }],
    });
  }
  await requireOwnPortal(deps, user, query.portalId);
  const limit = query.limit ?? 100;
  const types = query.contentType ? [query.contentType] : CONTENT_TYPES;
  const seqs = cursor.after;
  const changes: unknown[] = [];
  const read = await readChangeFeed(deps.sql, user.claims, query.portalId, types,
    query.cursor === 'now' ? { now: true } : { now: false, after: seqs, origin: cursor.origin, limit });
  Object.assign(seqs, read.ends);
  for (const { type, row: r } of read.rows) {
    changes.push({
      contentType: type, hubspotId: r.hubspot_id, change: r.deleted_at ? 'deleted' : r.inserted ? 'inserted' : 'updated',
      hubspotUpdatedAt: iso(r.hubspot_updated_at), deletedAt: iso(r.deleted_at), data: r.data,
    });
    seqs[type] = r.seq;
  }
  const more = read.more;
  // At the end of the feed the next read begins here; until then it keeps the origin it began from.
  const origin = more ? cursor.origin : { ...seqs };
  return json(200, { changes, nextCursor: encodeChangeCursor({ after: seqs, origin }), more });
}
