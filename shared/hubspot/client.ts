// HubSpot CMS content client for the worker (Node and Deno), built on the official @hubspot/api-client.

import { Client } from '@hubspot/api-client';
import { PAGE_SIZE, type ContentType } from './content-types.ts';
import { createListers } from './endpoints.ts';
import { HubSpotError } from './errors.ts';
import { HubDbRowsPager, type HubDbTableRef } from './hubdb-rows.ts';
import { Transport, type RateLimitHeaders } from './transport.ts';

export { CONTENT_TYPES, PAGE_SIZE, isContentType, type ContentType } from './content-types.ts';
export * from './errors.ts';

export const DEFAULT_BASE_PATH = 'https://api.hubapi.com';

export interface HubSpotItem {
  id: string;
  updatedAt: string | null;
  data: Record<string, unknown>;
}

export interface HubSpotPage {
  items: HubSpotItem[];
  nextCursor: string | null;
}

export interface HubSpotClientOptions {
  accessToken: string;
  basePath?: string; // default https://api.hubapi.com
  beforeRequest?: () => Promise<void>; // awaited before EVERY HTTP request, retries included
  onRateLimitHeaders?: (h: RateLimitHeaders) => void;
  requestTimeoutMs?: number; // default 30000
  maxTransientRetries?: number; // default 4 (5xx, timeouts, connection resets)
  maxRateLimitRetries?: number; // default 4 (ten-secondly 429s; daily 429s are never retried)
  sleep?: (ms: number) => Promise<void>;
  random?: () => number; // jitter source, default Math.random
}

export interface HubSpotContentClient {
  fetchPage(type: ContentType, cursor: string | null): Promise<HubSpotPage>;
  countTotal(type: ContentType): Promise<number>;
  accountDetails(): Promise<{ portalId: number; [k: string]: unknown }>;
}

// Model instance -> plain JSON object (Dates become ISO strings, undefined fields disappear).
function toPlain(value: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(value ?? {})) as Record<string, unknown>;
}

function toItem(raw: unknown): HubSpotItem {
  const data = toPlain(raw);
  const updated = data['updated'] ?? data['updatedAt'];
  return { id: String(data['id']), updatedAt: typeof updated === 'string' ? updated : null, data };
}

function toRowItem(table: HubDbTableRef, raw: unknown): HubSpotItem {
  const item = toItem(raw);
  return {
    id: `${table.id}:${item.id}`,
    updatedAt: item.updatedAt,
    data: { ...item.data, tableId: table.id, tableName: table.name },
  };
}

// Creates the client; no request is made until a method is called.
export function createHubSpotClient(o: HubSpotClientOptions): HubSpotContentClient {
  const basePath = (o.basePath ?? DEFAULT_BASE_PATH).replace(/\/+$/, '');
  // numberOfApiCallRetries 0 and no limiterOptions: the official client adds neither its RetryDecorator
  // nor its Bottleneck LimiterDecorator; retries and rate limiting are ours (Transport + beforeRequest).
  const client = new Client({ accessToken: o.accessToken, basePath, numberOfApiCallRetries: 0 });
  const { list, rows } = createListers(client);
  const transport = new Transport(o);
  const hubdb = new HubDbRowsPager(transport, list.hubdb_tables, rows, PAGE_SIZE.hubdb_tables, PAGE_SIZE.hubdb_rows);

  return {
    async fetchPage(type, cursor) {
      if (type === 'hubdb_rows') {
        const page = await hubdb.fetchPage(cursor);
        return { items: page.rows.map(({ table, row }) => toRowItem(table, row)), nextCursor: page.nextCursor };
      }
      const page = await transport.run((probe) => list[type](cursor ?? undefined, PAGE_SIZE[type], probe));
      return { items: page.results.map(toItem), nextCursor: page.after };
    },

    async countTotal(type) {
      if (type === 'hubdb_rows') return hubdb.countRows();
      return (await transport.run((probe) => list[type](undefined, 1, probe))).total;
    },

    async accountDetails() {
      const text = await transport.run(async (probe) => {
        const response = await client.apiRequest({ method: 'GET', path: '/account-info/v3/details' });
        const headers: Record<string, string> = {};
        response.headers.forEach((value, name) => {
          headers[name] = value;
        });
        probe.record(response.status, headers);
        const body = await response.text();
        if (response.status >= 300) {
          probe.errorBody = body;
          throw new HubSpotError(`HTTP ${response.status}`, false, { status: response.status });
        }
        return body;
      });
      const details = JSON.parse(text) as { portalId?: unknown };
      if (typeof details.portalId !== 'number') throw new HubSpotError('HubSpot account details had no portalId.', false, { status: 200 });
      return details as { portalId: number; [k: string]: unknown };
    },
  };
}
