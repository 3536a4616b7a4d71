// The write side's state of one portal, and the one way every change reaches a
// live item: stamp it (HubSpot's clock, strictly increasing), keep a revision
// (pages and posts), log an audit event, count the API's writes. Also the test
// hooks' state: edits queued to land right after a read, scheduled publishes.

import type { ContentType } from '../shared/hubspot/content-types.ts';
import { auditObjectType, VERSIONED_CONTENT_TYPES, type VersionedContentType } from '../shared/hubspot/write-endpoints.ts';
import { AuditLog, objectNameOf, personUser, type AuditEventType, type AuditObjectType, type SimUser } from './audit-log.ts';
import { changed, type Body, type SimItem } from './collection.ts';
import { updatedField, type Portal } from './portal.ts';
import type { SimResponse } from './responses.ts';
import { Revisions } from './revisions.ts';

/** A change to apply: field → new value (a sparse update; HubDB rows: `values` merges by column). */
export type Fields = Record<string, unknown>;

export function isVersioned(type: ContentType): type is VersionedContentType {
  return (VERSIONED_CONTENT_TYPES as readonly string[]).includes(type);
}

/** What a write endpoint's handler gets: the caller's portal and user, the request, and the edits queued behind reads. */
export interface WriteContext {
  portal: Portal;
  state: PortalWrites;
  user: SimUser;
  query: URLSearchParams;
  params: Readonly<Record<string, string>>;
  body: unknown;
  pathname: string;
  baseUrl: string;
  /** The endpoint's stats key (write counts are kept by it). */
  endpoint: string;
  /**
   * A read of these items: the edits queued before it land, `answer` is built
   * (it sees them), then the edits queued behind it land, before anything
   * else is answered.
   */
  read(items: readonly SimItem[], answer: () => SimResponse): SimResponse;
}

/** An edit (in HubSpot) applied to an item right before, or right after, a read of it. */
export interface QueuedEdit {
  when: 'before' | 'after';
  type: ContentType;
  item: SimItem;
  fields: Fields;
  user: SimUser;
}

interface Schedule {
  type: VersionedContentType;
  item: SimItem;
  atMs: number;
  user: SimUser;
}

export class PortalWrites {
  readonly audit = new AuditLog();
  readonly revisions = new Revisions();
  /** Page and post drafts by item key (none: the draft is the live item). */
  readonly drafts = new Map<string, Body>();
  /** HubDB draft rows: table id → row id → the row's draft. */
  readonly rowDrafts = new Map<number, Map<number, Body>>();
  private readonly schedules = new Map<string, Schedule>();
  private readonly writes = new Map<ContentType, Map<string, Map<string, number>>>();
  private queued: QueuedEdit[] = [];

  constructor(readonly portal: Portal) {}

  key(type: ContentType, item: SimItem): string {
    return `${type}:${this.portal.keyOf(type, item)}`;
  }

  /** The user who made the items as seeded (their first revision's author). */
  get creator(): SimUser {
    return personUser(this.portal.portalId);
  }

  /** Counts one write of the API to an item (by endpoint). */
  countWrite(type: ContentType, item: SimItem, endpoint: string): void {
    let byItem = this.writes.get(type);
    if (!byItem) this.writes.set(type, (byItem = new Map()));
    const key = this.portal.keyOf(type, item);
    let byEndpoint = byItem.get(key);
    if (!byEndpoint) byItem.set(key, (byEndpoint = new Map()));
    byEndpoint.set(endpoint, (byEndpoint.get(endpoint) ?? 0) + 1);
  }

  /** How many times the API wrote each item of a type (keys as `items()` reports them), optionally by one endpoint. */
  writeCounts(type: ContentType, endpoint?: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [key, byEndpoint] of this.writes.get(type) ?? []) {
      let n = 0;
      for (const [e, count] of byEndpoint) if (endpoint === undefined || e === endpoint) n += count;
      if (n > 0) out[key] = n;
    }
    return out;
  }

  /** Logs an event of an item (none for types the audit log has no objectType for). */
  logEvent(type: ContentType, event: AuditEventType, objectId: string, objectName: string, user: SimUser, atMs: number, meta: Record<string, unknown> = {}): void {
    const objectType = auditObjectType(type) as AuditObjectType | null;
    if (objectType === null) return;
    this.audit.record({ event, objectType, objectId, objectName, meta }, user, atMs);
  }

  /**
   * Applies a change to a live item (page, post, author, tag, redirect) as one
   * write: the fields (sparse; a new slug moves the url), updatedById and the
   * update time (returned), a revision of pages and posts, an audit event.
   * `endpoint` counts it as the API's write (null: an edit made in HubSpot).
   */
  applyLive(
    type: ContentType, item: SimItem, fields: Fields, user: SimUser, event: AuditEventType, endpoint: string | null, atMs?: number,
  ): number {
    if (isVersioned(type)) this.revisions.of(this.key(type, item), item, this.creator);
    const stamp = this.portal.writeMs(atMs);
    setFields(item.body, fields);
    if (isVersioned(type)) item.body['updatedById'] = user.id;
    item.body[updatedField(type)] = new Date(stamp).toISOString();
    changed(item);
    if (isVersioned(type)) this.revisions.record(this.key(type, item), item, this.creator, user, stamp);
    this.logEvent(type, event, String(item.id), objectNameOf(item.body), user, stamp);
    if (endpoint !== null) this.countWrite(type, item, endpoint);
    return stamp;
  }

  /** Publishes a page's or post's draft (or the live item unchanged when none): live = draft, PUBLISHED. */
  publishDraft(type: VersionedContentType, item: SimItem, user: SimUser, endpoint: string | null, atMs?: number): number {
    const key = this.key(type, item);
    const draft = this.drafts.get(key);
    const fields: Fields = {};
    if (draft) {
      for (const [k, v] of Object.entries(draft)) if (!DRAFT_KEEPS_LIVE.has(k)) fields[k] = v;
    }
    Object.assign(fields, { state: 'PUBLISHED', currentState: 'PUBLISHED', currentlyPublished: true });
    this.drafts.delete(key);
    this.schedules.delete(key);
    const stamp = this.applyLive(type, item, fields, user, 'PUBLISHED', endpoint, atMs);
    if (type === 'blog_posts') {
      item.body['publishedAt'] = new Date(stamp).toISOString();
      changed(item);
    }
    return stamp;
  }

  schedule(type: VersionedContentType, item: SimItem, atMs: number, user: SimUser): void {
    this.schedules.set(this.key(type, item), { type, item, atMs, user });
  }

  /** Publishes every scheduled draft whose time has come (by HubSpot's clock), each stamped at its time or just after the last write. */
  publishDue(): void {
    if (this.schedules.size === 0) return;
    const now = this.portal.now();
    const due = [...this.schedules.values()].filter((s) => s.atMs <= now).sort((a, b) => a.atMs - b.atMs);
    for (const s of due) this.publishDraft(s.type, s.item, s.user, null, s.atMs);
  }

  /** Queues an edit in HubSpot to land right before, or right after, the next read of the item. */
  queueEdit(edit: QueuedEdit): void {
    this.queued.push(edit);
  }

  /** A read of these items: the edits queued for it (`when`) land now, in the order queued. */
  land(when: QueuedEdit['when'], items: readonly SimItem[], apply: (edit: QueuedEdit) => void): void {
    if (this.queued.length === 0) return;
    const read = new Set(items);
    const landing = this.queued.filter((q) => q.when === when && read.has(q.item));
    if (landing.length === 0) return;
    this.queued = this.queued.filter((q) => !landing.includes(q));
    for (const edit of landing) apply(edit);
  }
}

/** Fields a draft carries that publishing leaves as the live item has them. */
const DRAFT_KEEPS_LIVE = new Set(['id', 'created', 'updated', 'createdById', 'updatedById', 'url', 'archivedAt']);

/** Sets the fields on a body (values copied); a new slug moves the url's last part with it. */
export function setFields(body: Body, fields: Fields): void {
  const oldSlug = body['slug'];
  for (const [k, v] of Object.entries(fields)) body[k] = structuredClone(v);
  const slug = body['slug'];
  const url = body['url'];
  if (typeof slug === 'string' && typeof oldSlug === 'string' && slug !== oldSlug && typeof url === 'string' && url.endsWith(oldSlug)) {
    body['url'] = url.slice(0, url.length - oldSlug.length) + slug;
  }
}
