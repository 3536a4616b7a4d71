// HubSpot's CMS audit log in the simulator: one event per write (PublicAuditLog),
// and GET /cms/audit-logs/<version> with its published query (schema-facts-writes.ts).

import { badRequest, json, type SimResponse } from './responses.ts';
import { AUDIT_EVENTS, AUDIT_OBJECT_TYPES } from './schema-facts-writes.ts';

/** Who made a change: HubSpot's user (VersionUser in revisions, userId/fullName in the audit log). */
export interface SimUser {
  id: string;
  fullName: string;
  email: string;
}

/** The user a portal's private-app token writes as (the simulator's stand-in for the app's service user). */
export function integrationUser(portalId: number): SimUser {
  return { id: String(6_000_000 + portalId), fullName: 'Private App Integration', email: `integration@portal-${portalId}.example.com` };
}

/** The user an OAuth install writes as (the installing user, the token's user_id). */
export function oauthUser(portalId: number, userId: number): SimUser {
  return { id: String(userId), fullName: `OAuth User ${userId}`, email: `user-${userId}@portal-${portalId}.example.com` };
}

/** The person who edits in HubSpot's editor when a test edits an item "in HubSpot" (unless it names another). */
export function personUser(portalId: number): SimUser {
  return { id: String(7_000_000 + portalId), fullName: 'Dana Editor', email: `dana@portal-${portalId}.example.com` };
}

export type AuditEventType = (typeof AUDIT_EVENTS)[number];
export type AuditObjectType = (typeof AUDIT_OBJECT_TYPES)[number];

/** One event as the API answers it (PublicAuditLog), plus its sequence number. */
export interface AuditEvent {
  seq: number;
  event: AuditEventType;
  fullName: string;
  meta: Record<string, unknown>;
  objectId: string;
  objectName: string;
  objectType: AuditObjectType;
  timestamp: string;
  userId: string;
}

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

/** A portal's events, in the order they happened (timestamps never decrease: each is a write's stamp). */
export class AuditLog {
  private readonly events: AuditEvent[] = [];

  record(event: Omit<AuditEvent, 'seq' | 'timestamp' | 'fullName' | 'userId'>, user: SimUser, atMs: number): void {
    this.events.push({ ...event, seq: this.events.length + 1, timestamp: new Date(atMs).toISOString(), userId: user.id, fullName: user.fullName });
  }

  all(): AuditEvent[] {
    return this.events.map((e) => ({ ...e, meta: { ...e.meta } }));
  }

  /**
   * GET /cms/audit-logs/<version>: objectType, objectId, userId, eventType (each repeatable, or
   * comma-separated), `after` (our cursor, or a time: events strictly after it), `before`
   * (a time: strictly before), `sort` (`timestamp`, default, or `-timestamp`), `limit`
   * (default 20, at most 100). Times are ISO 8601 or epoch milliseconds.
   */
  query(query: URLSearchParams, pathname: string, baseUrl: string): SimResponse {
    const list = (name: string) => query.getAll(name).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '');
    const objectTypes = list('objectType');
    const bad = objectTypes.find((t) => !(AUDIT_OBJECT_TYPES as readonly string[]).includes(t));
    if (bad !== undefined) return badRequest(`Invalid objectType: ${bad}`);
    const eventTypes = list('eventType');
    const badEvent = eventTypes.find((t) => !(AUDIT_EVENTS as readonly string[]).includes(t));
    if (badEvent !== undefined) return badRequest(`Invalid eventType: ${badEvent}`);
    const objectIds = new Set(list('objectId'));
    const userIds = new Set(list('userId'));
    const sorts = list('sort');
    if (sorts.length > 1 || (sorts.length === 1 && sorts[0] !== 'timestamp' && sorts[0] !== '-timestamp')) return badRequest(`Invalid sort: ${sorts.join(',')}`);
    const desc = sorts[0] === '-timestamp';
    const rawLimit = query.get('limit');
    const limit = rawLimit === null ? DEFAULT_LIMIT : Number(rawLimit);
    if (!Number.isInteger(limit) || limit < 1) return badRequest(`Invalid limit: ${rawLimit}`);
    let afterMs = -Infinity;
    let cursorSeq: number | null = null;
    const after = query.get('after');
    if (after !== null) {
      cursorSeq = decodeAuditCursor(after);
      if (cursorSeq === null) {
        afterMs = timeOf(after);
        if (Number.isNaN(afterMs)) return badRequest(`Invalid after: ${after}`);
      }
    }
    const before = query.get('before');
    const beforeMs = before === null ? Infinity : timeOf(before);
    if (Number.isNaN(beforeMs)) return badRequest(`Invalid before: ${before}`);
    const matching = this.events.filter((e) => {
      const ms = Date.parse(e.timestamp);
      return ms > afterMs && ms < beforeMs
        && (objectTypes.length === 0 || objectTypes.includes(e.objectType))
        && (eventTypes.length === 0 || eventTypes.includes(e.event))
        && (objectIds.size === 0 || objectIds.has(e.objectId))
        && (userIds.size === 0 || userIds.has(e.userId))
        && (cursorSeq === null || (desc ? e.seq < cursorSeq : e.seq > cursorSeq));
    });
    if (desc) matching.reverse();
    const page = matching.slice(0, Math.min(limit, MAX_LIMIT));
    const body: Record<string, unknown> = { results: page.map(({ seq: _seq, ...e }) => e) };
    if (matching.length > page.length) {
      const next = encodeAuditCursor(page[page.length - 1]!.seq);
      const params = new URLSearchParams(query);
      params.set('after', next);
      body['paging'] = { next: { after: next, link: `${baseUrl}${pathname}?${params.toString()}` } };
    }
    return json(200, body);
  }
}

// A time bound: epoch milliseconds or an ISO 8601 date-time (NaN when neither).
function timeOf(value: string): number {
  return /^\d+$/.test(value) ? Number(value) : Date.parse(value);
}

function encodeAuditCursor(seq: number): string {
  return Buffer.from(`audit:${seq}`).toString('base64url');
}

function decodeAuditCursor(after: string): number | null {
  const match = /^audit:(\d+)$/.exec(Buffer.from(after, 'base64url').toString('utf8'));
  return match ? Number(match[1]) : null;
}

/** The name the audit log shows for an item (PublicAuditLog.objectName). */
export function objectNameOf(body: Record<string, unknown>): string {
  const name = body['name'] ?? body['routePrefix'] ?? body['fullName'] ?? '';
  return String(name);
}
