// HubSpot CMS content client for the worker and the orchestrator (Node and Deno), built on the
// official @hubspot/api-client's generic request. Content pages come back as the response text:
// Postgres parses them (public.save_fetched_page_raw), the worker never does.
//
// Only the client's request builder is imported (Client.apiRequest is
// `HttpClient.send(new Request(config, opts))`): the package's main entry pulls in
// every generated API and model, which would make each function's bundle too big.

import { Request } from '@hubspot/api-client/lib/src/services/http/Request.js';
import { PAGE_SIZE, type ContentType } from './content-types.ts';
import { CONTENT_TYPE_REGISTRY, type ContentTypeRecord } from '../content-types.ts';
import { ACCOUNT_DETAILS_PATH, listQuery, LIST_PATHS } from './endpoints.ts';
import { HubSpotError } from './errors.ts';
import { HubDbRowsPager, parseList, type HubDbRowsContext, type TablesListSource } from './hubdb-rows.ts';
import { Transport, fixedAccessToken, type AccessTokenSource, type HttpResponse, type RateLimitHeaders, type SendFn } from './transport.ts';

export { CONTENT_TYPES, PAGE_SIZE, isContentType, type ContentType } from './content-types.ts';
export * from './errors.ts';
export type { HubDbRowsContext, TablesListSource } from './hubdb-rows.ts';
export { fixedAccessToken, type AccessToken, type AccessTokenSource, type RateLimitHeaders } from './transport.ts';

export const DEFAULT_BASE_PATH = 'https://api.hubapi.com';

/** One page of a content type as HubSpot sent it. */
export interface RawPage {
  /** The response body, unparsed (a CMS v3 list response: `results`, `paging.next.after`). */
  body: string;
  /** HubDB rows only: the table the rows belong to and the table after it; null for every other type. */
  context: HubDbRowsContext | null;
}

export interface HubSpotClientOptions {
  /** A fixed token (a private-app token being checked); or pass `tokens`. */
  accessToken?: string;
  /** Where each request's token comes from (a portal's stored, refreshed token: shared/hubspot/portal-tokens.ts). */
  tokens?: AccessTokenSource;
  basePath?: string; // default https://api.hubapi.com
  beforeRequest?: () => Promise<void>; // awaited before EVERY HTTP request, retries included
  onRateLimitHeaders?: (h: RateLimitHeaders) => unknown; // awaited after every answer that has them
  requestTimeoutMs?: number; // default 30000, capped by timeLeft
  maxTransientRetries?: number; // default 4 (5xx, timeouts, connection resets)
  maxRateLimitRetries?: number; // default 4 (ten-secondly 429s; daily 429s are never retried)
  sleep?: (ms: number) => Promise<void>;
  random?: () => number; // jitter source, default Math.random
  /**
   * Milliseconds the caller has left before its deadline. A request's timeout is
   * min(requestTimeoutMs, timeLeft − deadlineMarginMs); a retry sleep, `Retry-After`
   * wait or request that would not fit throws DeadlineReached instead of waiting.
   */
  timeLeft?: () => number;
  deadlineMarginMs?: number; // default 1000: kept free after any HubSpot wait
  minRequestMs?: number; // default 500: a request is not started with less time than this for it
}

/**
 * An incremental job's listing (docs/sync.md): what changed after `since`
 * (ISO 8601): the live items updated since (`changed`), then the archived ones
 * (`archived`). HubDB rows: the rows changed since in the tables updated since
 * (`changed`), then a `sweep` of the tables holding fewer rows than
 * `storedRows` (table id → live rows stored), each compared with the row ids
 * `storedRowIds` gives (RowsSync in hubdb-rows.ts).
 */
export interface SyncListing {
  since: string;
  phase: 'changed' | 'archived' | 'sweep';
  storedRows?: Readonly<Record<string, number>>;
  storedRowIds?: (tableId: string) => Promise<string[]>;
}

export interface HubSpotContentClient {
  /**
   * The page after `cursor` (null: the first), unparsed. A null `cursor` in the result's checkpoint means done.
   * `tablesList`: where HubDB rows and a full read of HubDB tables get the tables list (a fetch job: its run's one list).
   */
  fetchRawPage(type: ContentType, cursor: string | null, signal?: AbortSignal, sync?: SyncListing | null, tablesList?: TablesListSource): Promise<RawPage>;
  countTotal(type: ContentType): Promise<number>;
  /**
   * A probe's question of a CMS type (docs/decisions/0046): how many items HubSpot lists
   * changed after `updatedAfter` and archived after `archivedAfter` (ISO 8601), by two
   * listings of one item each, sent at once.
   */
  countChanges(type: ContentType, updatedAfter: string, archivedAfter: string, signal?: AbortSignal): Promise<{ changed: number; archived: number }>;
  /**
   * A probe near a type's last change: the first page of its items updated after
   * `windowAfter` (what an incremental fetch would list first), as HubSpot sent
   * it, and the total archived after `archivedAfter`.
   */
  readChangeWindow(type: ContentType, windowAfter: string, archivedAfter: string, signal?: AbortSignal): Promise<{ window: string; archived: number }>;
  /** Every page of the HubDB tables list, as HubSpot sent them (a probe's report carries them). */
  readTablesList(signal?: AbortSignal): Promise<string[]>;
  /**
   * A probe near HubDB rows' last change: per table of that list updated after
   * `windowAfter`, the first page of its rows updated after it, as HubSpot sent it.
   */
  readRowsWindows(tablesPages: readonly string[], windowAfter: string, signal?: AbortSignal): Promise<Record<string, string>>;
  accountDetails(): Promise<{ portalId: number; [k: string]: unknown }>;
}

/**
 * How every HubSpot request is sent: the official client builds it (URL, query,
 * auth and headers; a write's JSON body), the runtime's own fetch sends it.
 */
export function officialRequestSender(basePath: string): SendFn {
  return (path, qs, accessToken, write) => {
    const request = new Request({ accessToken, basePath }, { method: write?.method ?? 'GET', path, qs, ...(write ? { body: write.body } : {}) });
    return fetch(request.getUrl(), request.getSendData() as RequestInit) as Promise<HttpResponse>;
  };
}

// Creates the client; no request is made until a method is called.
export function createHubSpotClient(o: HubSpotClientOptions): HubSpotContentClient {
  const basePath = (o.basePath ?? DEFAULT_BASE_PATH).replace(/\/+$/, '');
  const tokens = o.tokens ?? (o.accessToken !== undefined ? fixedAccessToken(o.accessToken) : null);
  if (!tokens) throw new TypeError('createHubSpotClient: pass accessToken or tokens');
  // The generic request without the client's decorators (its retries and Bottleneck limiter):
  // retries and rate limiting are ours (Transport + beforeRequest).
  // The official client builds every request (URL, query, auth and headers); the
  // runtime's own fetch sends it: native code, and connections kept alive across
  // pages (the client's node-fetch closes each one, a TLS handshake per page on
  // real HubSpot, and costs ~3× the CPU per page under Deno).
  const transport = new Transport({ ...o, tokens }, officialRequestSender(basePath));
  const hubdb = new HubDbRowsPager(transport, PAGE_SIZE.hubdb_tables, PAGE_SIZE.hubdb_rows);
  /** A probe's listing of a CMS type: the first `limit` items updated (or archived) after a time, as HubSpot sent them. */
  const probeListing = (type: ContentType, caller: string, signal?: AbortSignal) => {
    const sort = (CONTENT_TYPE_REGISTRY[type] as ContentTypeRecord).updatedSort;
    if (!sort || type === 'hubdb_rows' || type === 'hubdb_tables') throw new TypeError(`${caller}: ${type} has no update filter to probe`);
    return (after: string, archived: boolean, limit: number) =>
      transport.get(LIST_PATHS[type], listQuery(null, limit, { updatedAfter: new Date(after).toISOString(), sort, archived }), signal);
  };

  return {
    async fetchRawPage(type, cursor, signal, sync = null, tablesList) {
      if (type === 'hubdb_rows') return hubdb.fetchRawPage(cursor, signal, sync ? { since: sync.since, phase: sync.phase === 'sweep' ? 'sweep' : 'changed', storedRows: sync.storedRows ?? null, storedRowIds: sync.storedRowIds } : null, tablesList);
      // The whole tables list is the rows job's: read once for both (an incremental listing of tables is its own).
      if (type === 'hubdb_tables' && !sync && tablesList) return { body: await hubdb.tablesPage(cursor, signal, tablesList), context: null };
      const sort = (CONTENT_TYPE_REGISTRY[type] as ContentTypeRecord).updatedSort; // absent: no update filter, every item listed
      // Without an update filter there is no archive listing to read either: an empty page ends that phase (a full reconcile finds the deleted).
      if (sync && !sort && sync.phase === 'archived') return { body: '{"total":0,"results":[]}', context: null };
      const changed = sync && sort ? { updatedAfter: new Date(sync.since).toISOString(), sort, archived: sync.phase === 'archived' } : null;
      const body = await transport.get(LIST_PATHS[type], listQuery(cursor, PAGE_SIZE[type], changed), signal);
      return { body, context: null };
    },

    async countTotal(type) {
      if (type === 'hubdb_rows') return hubdb.countRows();
      return parseList(await transport.get(LIST_PATHS[type], listQuery(null, 1)), type).total; // one item: a tiny body
    },

    async countChanges(type, updatedAfter, archivedAfter, signal) {
      const list = probeListing(type, 'countChanges', signal);
      const [changed, archived] = await Promise.all([list(updatedAfter, false, 1), list(archivedAfter, true, 1)]);
      return { changed: parseList(changed, type).total, archived: parseList(archived, type).total };
    },

    async readChangeWindow(type, windowAfter, archivedAfter, signal) {
      const list = probeListing(type, 'readChangeWindow', signal);
      const [window, archived] = await Promise.all([list(windowAfter, false, PAGE_SIZE[type]), list(archivedAfter, true, 1)]);
      return { window, archived: parseList(archived, type).total };
    },

    readTablesList(signal) {
      return hubdb.readPages(signal);
    },

    readRowsWindows(tablesPages, windowAfter, signal) {
      return hubdb.readWindows(tablesPages, windowAfter, signal);
    },

    async accountDetails() {
      const text = await transport.get(ACCOUNT_DETAILS_PATH);
      let details: { portalId?: unknown };
      try {
        details = JSON.parse(text) as { portalId?: unknown };
      } catch {
        throw new HubSpotError('HubSpot account details were not JSON.', false, { status: 200 });
      }
      if (typeof details?.portalId !== 'number') throw new HubSpotError('HubSpot account details had no portalId.', false, { status: 200 });
      return details as { portalId: number; [k: string]: unknown };
    },
  };
}
