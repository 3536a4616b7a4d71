// HubSpot's write side for a publish (docs/publish.md): batch reads and
// updates of the five batch types, HubDB rows (draft rows, then the table
// published), one URL redirect at a time, page and post drafts with push-live
// and scheduling, and the audit log and revisions that find what landed in a
// batch's window. Every path comes from shared/hubspot/api-paths.ts (the
// table the simulator routes from); every request goes through the Transport
// as the content client's do (shared request budget, rate headers, deadline).
//
// Reads may be retried; a write never is after a 5xx, a timeout or a dropped
// connection: it may have landed, so it is thrown as WriteOutcomeUnknown and
// the job re-reads (the SQL recognises its own write). Only a 429 (HubSpot
// applied nothing) is waited out. Bodies come back as text: Postgres parses
// them (shared/sql/publish.ts).

import type { ContentType } from './content-types.ts';
import { DEFAULT_BASE_PATH, officialRequestSender, type HubSpotClientOptions } from './client.ts';
import { HubSpotError, HubSpotRequestError, HubSpotTransientError } from './errors.ts';
import { fixedAccessToken, Transport, type HubSpotAnswer, type HubSpotRequest } from './transport.ts';
import {
  AUDIT_LOGS_PATH, auditObjectType, BATCH_LIMIT, batchReadBody, batchReadPath, batchUpdatePath, draftPath, hubdbDraftRowsUpdatePath,
  hubdbPublishPath, hubdbRowsReadPath, pushLivePath, redirectPath, revisionsPath, schedulePath,
  type BatchContentType, type VersionedContentType,
} from './write-endpoints.ts';

export type { HubSpotAnswer };

/**
 * A write HubSpot may or may not have applied (a 5xx, a timeout, a dropped
 * connection): never sent again by the client. Retryable: the caller re-reads
 * the items and lets the database decide (its own earlier write, or still to write).
 */
export class WriteOutcomeUnknown extends HubSpotTransientError {
  constructor(cause: HubSpotTransientError) {
    super(`${cause.message.replace(/^HubSpot is temporarily unavailable: /, '').replace(/\.$/, '')}; the write may have been applied`,
      cause.status, cause.correlationId);
  }
}

/** One input of a batch update: the object's id and the fields to set (sparse). */
export type WriteInput = { id: string } & Record<string, unknown>;

/**
 * A query of the CMS audit log: one object type, events strictly between two
 * times, newest first. The audit log's `after` is a time or a cursor: a page
 * after the first is bounded by its cursor and `before` only, so a reader
 * stops once a page's oldest event is at or before `after` (auditPageOf).
 */
export interface AuditLogQuery {
  objectType: string;
  /** Events strictly after this time (the first page). */
  after: Date;
  /** Events strictly before this time. */
  before: Date;
  /** The page after this cursor (a previous page's paging.next.after). */
  cursor?: string | null;
  limit?: number;
}

export interface HubSpotWriteClient {
  /** `POST …/batch/read` of up to BATCH_LIMIT ids: HubSpot's answer text (200, or 207 naming the ids it lacks). */
  batchRead(type: BatchContentType, ids: readonly string[], signal?: AbortSignal): Promise<string>;
  /** `POST …/batch/update` (sparse inputs): 200, 207 with errors per input, or a 4xx refusal of the whole batch. */
  batchUpdate(type: BatchContentType, inputs: readonly WriteInput[], signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `POST …/rows/batch/read` (published rows); null when the table is gone (404). */
  rowsBatchRead(tableId: string, rowIds: readonly string[], signal?: AbortSignal): Promise<string | null>;
  /** `POST …/rows/draft/batch/update`: the rows' drafts (published by publishTable). */
  rowsDraftBatchUpdate(tableId: string, inputs: readonly WriteInput[], signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `POST …/draft/publish`: every draft row of the table goes live. */
  publishTable(tableId: string, signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `GET /cms/url-redirects/<version>/{id}`: the redirect's text and HubSpot's time of the answer (its Date header), or null when HubSpot has none (404). */
  getRedirect(id: string, signal?: AbortSignal): Promise<{ body: string; date: Date | null } | null>;
  /** `PATCH /cms/url-redirects/<version>/{id}`: 200 with the redirect, or a 4xx refusal. */
  patchRedirect(id: string, patch: Record<string, unknown>, signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `PATCH …/{id}/draft`: the draft as edited, or a 4xx refusal. */
  patchDraft(type: VersionedContentType, id: string, patch: Record<string, unknown>, signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `POST …/{id}/draft/push-live`: 204, or a 4xx refusal. */
  pushLive(type: VersionedContentType, id: string, signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** `POST …/schedule` `{id, publishDate}`: 204, or a 4xx refusal. */
  schedule(type: VersionedContentType, id: string, publishAt: Date, signal?: AbortSignal): Promise<HubSpotAnswer>;
  /** One page of the CMS audit log (newest first), as HubSpot sent it. */
  auditLog(query: AuditLogQuery, signal?: AbortSignal): Promise<string>;
  /** One page of a page's or post's revisions, newest first, as HubSpot sent it. */
  revisions(type: VersionedContentType, id: string, page: { limit: number; after?: string | null }, signal?: AbortSignal): Promise<string>;
}

export { auditObjectType };

const READ = { write: false, answerRefusals: false } as const;
const READ_OR_MISSING = { write: false, answerRefusals: true } as const;
const WRITE = { write: true, answerRefusals: true } as const;
const AUDIT_PAGE = 100;

function checkBatch(what: string, n: number): void {
  if (n < 1 || n > BATCH_LIMIT) throw new RangeError(`${what}: 1 to ${BATCH_LIMIT} inputs, got ${n}`);
}

/** Creates the write client; no request is made until a method is called. Options as the content client's. */
export function createHubSpotWriteClient(o: HubSpotClientOptions): HubSpotWriteClient {
  const basePath = (o.basePath ?? DEFAULT_BASE_PATH).replace(/\/+$/, '');
  const tokens = o.tokens ?? (o.accessToken !== undefined ? fixedAccessToken(o.accessToken) : null);
  if (!tokens) throw new TypeError('createHubSpotWriteClient: pass accessToken or tokens');
  const transport = new Transport({ ...o, tokens }, officialRequestSender(basePath));

  const read = async (req: HubSpotRequest, signal?: AbortSignal) => (await transport.send(READ, req, signal)).body;
  /** A read whose 404 means "HubSpot has none": null; any other refusal is thrown. */
  const readOrMissing = async (req: HubSpotRequest, signal?: AbortSignal): Promise<HubSpotAnswer | null> => {
    const answer = await transport.send(READ_OR_MISSING, req, signal);
    if (answer.status === 404) return null;
    if (answer.status >= 400) throw refusal(answer, transport);
    return answer;
  };
  const write = async (req: HubSpotRequest, signal?: AbortSignal): Promise<HubSpotAnswer> => {
    try {
      return await transport.send(WRITE, req, signal);
    } catch (e) {
      throw e instanceof HubSpotTransientError ? new WriteOutcomeUnknown(e) : e;
    }
  };
  const post = (body: unknown) => ({ method: 'POST' as const, body });
  const patch = (body: unknown) => ({ method: 'PATCH' as const, body });

  return {
    batchRead(type, ids, signal) {
      checkBatch('batchRead', ids.length);
      return read({ path: batchReadPath(type), request: post(batchReadBody(ids)) }, signal);
    },
    batchUpdate(type, inputs, signal) {
      checkBatch('batchUpdate', inputs.length);
      return write({ path: batchUpdatePath(type), request: post({ inputs }) }, signal);
    },
    async rowsBatchRead(tableId, rowIds, signal) {
      checkBatch('rowsBatchRead', rowIds.length);
      return (await readOrMissing({ path: hubdbRowsReadPath(tableId), request: post(batchReadBody(rowIds)) }, signal))?.body ?? null;
    },
    rowsDraftBatchUpdate(tableId, inputs, signal) {
      checkBatch('rowsDraftBatchUpdate', inputs.length);
      return write({ path: hubdbDraftRowsUpdatePath(tableId), request: post({ inputs }) }, signal);
    },
    publishTable(tableId, signal) {
      return write({ path: hubdbPublishPath(tableId), request: post(undefined) }, signal);
    },
    async getRedirect(id, signal) {
      const answer = await readOrMissing({ path: redirectPath(id) }, signal);
      if (!answer) return null;
      const date = answer.date ? Date.parse(answer.date) : NaN;
      return { body: answer.body, date: Number.isNaN(date) ? null : new Date(date) };
    },
    patchRedirect(id, fields, signal) {
      return write({ path: redirectPath(id), request: patch(fields) }, signal);
    },
    patchDraft(type, id, fields, signal) {
      return write({ path: draftPath(type, id), request: patch(fields) }, signal);
    },
    pushLive(type, id, signal) {
      return write({ path: pushLivePath(type, id), request: post(undefined) }, signal);
    },
    schedule(type, id, publishAt, signal) {
      return write({ path: schedulePath(type), request: post({ id, publishDate: publishAt.toISOString() }) }, signal);
    },
    auditLog(q, signal) {
      const qs: Record<string, string> = {
        objectType: q.objectType, sort: '-timestamp', limit: String(q.limit ?? AUDIT_PAGE),
        after: q.cursor ?? q.after.toISOString(), before: q.before.toISOString(),
      };
      return read({ path: AUDIT_LOGS_PATH, qs }, signal);
    },
    revisions(type, id, page, signal) {
      const qs: Record<string, string> = { limit: String(page.limit) };
      if (page.after) qs['after'] = page.after;
      return read({ path: revisionsPath(type, id), qs }, signal);
    },
  };
}

// A refusal of a read as the error the content client throws for it (message redacted).
function refusal(answer: HubSpotAnswer, transport: Transport): HubSpotError {
  let body: { category?: unknown; message?: unknown; correlationId?: unknown } = {};
  try {
    body = JSON.parse(answer.body) as typeof body;
  } catch {
    // not JSON: status only
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  return new HubSpotRequestError(answer.status, str(body.category), transport.redact(str(body.message)), str(body.correlationId));
}

/** The `paging.next.after` cursor of an audit-log or revisions page (the page is small: parsed here), or null at the end. */
export function nextCursor(pageText: string): string | null {
  const page = JSON.parse(pageText) as { paging?: { next?: { after?: unknown } } };
  const after = page?.paging?.next?.after;
  return typeof after === 'string' && after !== '' ? after : null;
}

/**
 * An audit-log page (newest first, 100 events at most: parsed here): the next
 * page's cursor, null at the end of the query or once the page reached back
 * to `after` (the pages after a cursor are not bounded by it).
 */
export function nextAuditCursor(pageText: string, after: Date): string | null {
  const page = JSON.parse(pageText) as { results?: { timestamp?: unknown }[]; paging?: { next?: { after?: unknown } } };
  const next = page?.paging?.next?.after;
  if (typeof next !== 'string' || next === '') return null;
  const results = Array.isArray(page.results) ? page.results : [];
  const oldest = results.length > 0 ? results[results.length - 1]!.timestamp : undefined;
  const at = typeof oldest === 'number' ? oldest : typeof oldest === 'string' ? Date.parse(oldest) : NaN;
  return !Number.isNaN(at) && at <= after.getTime() ? null : next;
}
