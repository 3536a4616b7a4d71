// Revisions of pages and posts: a copy of the live item after each change
// (API writes, push-live, scheduled publishing, restores, edits made in HubSpot),
// listed by GET …/{objectId}/revisions as PageVersion / VersionBlogPost.

import type { SimItem, Body } from './collection.ts';
import type { SimUser } from './audit-log.ts';
import { encodeCursor, decodeCursor } from './routes.ts';
import { badRequest, json, type SimResponse } from './responses.ts';

export interface Revision {
  id: string;
  object: Body;
  updatedAtMs: number;
  user: SimUser;
}

/** The spec: "The maximum number of results to return. Default is 100." */
const DEFAULT_LIMIT = 100;
const FIRST_REVISION_ID = 1_000_001;

/** The revisions of one portal's pages and posts, each item's oldest first. */
export class Revisions {
  private readonly byItem = new Map<string, Revision[]>();
  private nextId = FIRST_REVISION_ID;

  /**
   * An item's revisions; the first is the version it had before any change the
   * simulator saw (made by `creator`, stamped with the item's update time), kept
   * when first needed so a restore can always go back to it.
   */
  of(key: string, item: SimItem, creator: SimUser): Revision[] {
    let list = this.byItem.get(key);
    if (!list) {
      list = [];
      this.byItem.set(key, list);
      this.push(list, item, creator, Date.parse(String(item.body['updated'])));
    }
    return list;
  }

  /** Records the item as it is now (after a change at `atMs` by `user`). */
  record(key: string, item: SimItem, creator: SimUser, user: SimUser, atMs: number): Revision {
    return this.push(this.of(key, item, creator), item, user, atMs);
  }

  private push(list: Revision[], item: SimItem, user: SimUser, atMs: number): Revision {
    const revision = { id: String(this.nextId++), object: structuredClone(item.body), updatedAtMs: atMs, user: { ...user } };
    list.push(revision);
    return revision;
  }

  /** GET …/{objectId}/revisions: newest first; `after` / `before` cursors name a revision, `limit` (default 100). */
  page(list: readonly Revision[], query: URLSearchParams, pathname: string, baseUrl: string): SimResponse {
    const newestFirst = [...list].reverse();
    const rawLimit = query.get('limit');
    const limit = rawLimit === null ? DEFAULT_LIMIT : Number(rawLimit);
    if (!Number.isInteger(limit) || limit < 1) return badRequest(`Invalid limit: ${rawLimit}`);
    const indexOf = (cursor: string): number | null => {
      const id = decodeCursor(cursor);
      const index = id === null ? -1 : newestFirst.findIndex((r) => Number(r.id) === id);
      return index < 0 ? null : index;
    };
    let start = 0;
    let end = newestFirst.length;
    const after = query.get('after');
    const before = query.get('before');
    if (after !== null) {
      const index = indexOf(after);
      if (index === null) return badRequest(`Invalid paging cursor: ${after}`);
      start = index + 1;
    }
    if (before !== null) {
      const index = indexOf(before);
      if (index === null) return badRequest(`Invalid paging cursor: ${before}`);
      end = index;
      start = Math.max(start, end - limit);
    }
    const results = newestFirst.slice(start, Math.min(end, start + limit));
    const paging: Record<string, unknown> = {};
    const link = (name: string, value: string) => {
      const params = new URLSearchParams(query);
      params.delete('after');
      params.delete('before');
      params.set(name, value);
      return `${baseUrl}${pathname}?${params.toString()}`;
    };
    if (start + results.length < end) {
      const next = encodeCursor(Number(results[results.length - 1]!.id));
      paging['next'] = { after: next, link: link('after', next) };
    }
    if (start > 0 && results.length > 0) {
      const prev = encodeCursor(Number(results[0]!.id));
      paging['prev'] = { before: prev, link: link('before', prev) };
    }
    const body: Record<string, unknown> = {
      total: list.length,
      results: results.map((r) => ({ id: r.id, object: r.object, updatedAt: new Date(r.updatedAtMs).toISOString(), user: r.user })),
    };
    if (Object.keys(paging).length > 0) body['paging'] = paging;
    return json(200, body);
  }
}
