// Simulator tests: the official @hubspot/api-client (and raw HTTP) against hubspot-sim.

import { Client } from '@hubspot/api-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_TYPES, type ContentType } from '../shared/hubspot/content-types.ts';
import { ACCOUNT_DETAILS_PATH, LIST_PATHS, rowsPath } from '../shared/hubspot/endpoints.ts';
import { startHubSpotSimulator, tokenHash, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const TOKEN = 'sim-test-token-0001';
const PORTAL = 4242;
let sim: HubSpotSimulator;
let client: Client;

beforeAll(async () => {
  sim = await startHubSpotSimulator({ seed: 7, rateLimit: { maxPer10s: 100_000 } });
  sim.addPortal({ portalId: PORTAL, token: TOKEN, seed: 99 });
  sim.addPortal({ portalId: 5, token: 'content-only', scopes: ['content'], sizes: { blog_posts: 10 } });
  client = new Client({ accessToken: TOKEN, basePath: sim.url, numberOfApiCallRetries: 0 });
});
afterAll(() => sim.close());
afterEach(() => sim.clearFaults());

interface Paged { total: number; results: { id?: string }[]; paging?: { next?: { after?: string; link?: string } } }

// One list call of the official client for a type (HubDB rows: the first table).
async function officialPage(type: ContentType, after: string | undefined, limit?: number): Promise<Paged> {
  const u = undefined;
  const cms = client.cms;
  switch (type) {
    case 'site_pages': return cms.pages.sitePagesApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'landing_pages': return cms.pages.landingPagesApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'blog_posts': return cms.blogs.blogPosts.basicApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'blog_authors': return cms.blogs.authors.blogAuthorsApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'blog_tags': return cms.blogs.tags.blogTagsApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'hubdb_tables': return cms.hubdb.tablesApi.getAllTables(u, after, limit);
    case 'url_redirects': return cms.urlRedirects.redirectsApi.getPage(u, u, u, u, u, u, u, after, limit);
    case 'hubdb_rows': {
      const tableId = sim.items(PORTAL, 'hubdb_tables')[0]!.id;
      return (await cms.hubdb.rowsApi.getTableRows(tableId, u, after, limit)) as Paged;
    }
  }
}

async function raw(path: string, token: string | null = TOKEN) {
  const response = await fetch(`${sim.url}${path}`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text.startsWith('{') ? JSON.parse(text) : null };
}

describe('paging with the official client', () => {
  it.each(CONTENT_TYPES.filter((t) => t !== 'hubdb_rows'))('pages %s completely with unique ids', async (type) => {
    const expected = sim.items(PORTAL, type).map((i) => i.id);
    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await officialPage(type, after, 7);
      expect(page.total).toBe(expected.length);
      seen.push(...page.results.map((r) => String(r.id)));
      after = page.paging?.next?.after;
      if (after) expect(page.paging?.next?.link).toContain(`after=${after}`);
      pages++;
    } while (after);
    expect(seen).toEqual(expected);
    expect(new Set(seen).size).toBe(seen.length);
    expect(pages).toBe(Math.max(1, Math.ceil(expected.length / 7)));
  });

  it('pages HubDB rows of a table (response carries type STREAMING)', async () => {
    const table = sim.items(PORTAL, 'hubdb_tables')[0]!;
    const expected = sim.items(PORTAL, 'hubdb_rows').filter((r) => r.tableId === table.id).map((r) => r.id);
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await officialPage('hubdb_rows', after, 40);
      seen.push(...page.results.map((r) => String(r.id)));
      after = page.paging?.next?.after;
    } while (after);
    expect(seen).toEqual(expected);
    const first = await raw(`${rowsPath(table.id)}?limit=2`);
    expect(first.body.type).toBe('STREAMING');
    const byOffset = await raw(`${rowsPath(table.id)}?offset=2&limit=2`);
    expect(byOffset.body).toMatchObject({ type: 'RANDOM_ACCESS', paging: { next: { offset: 4 } } });
    expect(byOffset.body.results.map((r: { id: string }) => r.id)).toEqual(expected.slice(2, 4));
  });

  it('a seeded HubDB table was last updated no earlier than its newest row (rows change only when their table is published)', async () => {
    const rows = sim.items(PORTAL, 'hubdb_rows');
    const tables = sim.items(PORTAL, 'hubdb_tables');
    expect(tables.length).toBeGreaterThan(1);
    for (const table of tables) {
      const newest = Math.max(...rows.filter((r) => r.tableId === table.id).map((r) => Date.parse(r.updatedAt)));
      expect(Date.parse(table.updatedAt), `table ${table.id}`).toBeGreaterThanOrEqual(newest);
    }
  });

  it('applies default and maximum page sizes and reports totals with limit=1', async () => {
    expect((await raw(LIST_PATHS.blog_posts)).body.results).toHaveLength(20);
    expect((await raw(`${LIST_PATHS.blog_posts}?limit=500`)).body.results).toHaveLength(100);
    const one = await raw(`${LIST_PATHS.blog_posts}?limit=1`);
    expect(one.body.results).toHaveLength(1);
    expect(one.body.total).toBe(sim.items(PORTAL, 'blog_posts').length);
    expect((await raw(`${LIST_PATHS.blog_posts}?limit=abc`)).status).toBe(400);
    expect((await raw(`${LIST_PATHS.blog_posts}?after=not-a-cursor`)).status).toBe(400);
  });

  it('serves the next page from paging.next.link and omits paging on the last page', async () => {
    const first = await raw(`${LIST_PATHS.blog_tags}?limit=50`);
    const viaLink = await fetch(first.body.paging.next.link, { headers: { Authorization: `Bearer ${TOKEN}` } }).then((r) => r.json());
    const viaAfter = await raw(`${LIST_PATHS.blog_tags}?limit=50&after=${first.body.paging.next.after}`);
    expect(viaLink).toEqual(viaAfter.body);
    expect(viaAfter.body.paging).toBeUndefined();
  });

  it('returns account details and HubSpot-style 404s', async () => {
    const details = await raw(ACCOUNT_DETAILS_PATH);
    expect(details.body).toMatchObject({ portalId: PORTAL, timeZone: expect.any(String), uiDomain: 'app.hubspot.com', dataHostingLocation: 'na1' });
    const missing = await raw('/cms/v3/nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ status: 'error', category: 'OBJECT_NOT_FOUND' });
    expect((await raw(rowsPath('999'))).status).toBe(404);
  });
});

describe('auth and scopes', () => {
  it('answers 401 with HubSpot body for missing and unknown tokens', async () => {
    for (const token of [null, 'unknown-token']) {
      const response = await raw(LIST_PATHS.site_pages, token);
      expect(response.status).toBe(401);
      expect(response.body).toMatchObject({ status: 'error', category: 'INVALID_AUTHENTICATION', correlationId: expect.any(String), message: expect.any(String) });
    }
    await expect(new Client({ accessToken: 'unknown-token', basePath: sim.url }).cms.blogs.tags.blogTagsApi.getPage()).rejects.toMatchObject({ code: 401 });
  });

  it('answers 403 MISSING_SCOPES for a token without the hubdb scope', async () => {
    expect((await raw(LIST_PATHS.blog_posts, 'content-only')).status).toBe(200);
    const denied = await raw(LIST_PATHS.hubdb_tables, 'content-only');
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ status: 'error', category: 'MISSING_SCOPES', errors: [{ context: { requiredGranularScopes: ['hubdb'] } }] });
  });

  it('rejects a revoked token', async () => {
    const local = await startHubSpotSimulator();
    try {
      local.addPortal({ portalId: 1, token: 'soon-revoked' });
      const url = `${local.url}${LIST_PATHS.url_redirects}`;
      expect((await fetch(url, { headers: { Authorization: 'Bearer soon-revoked' } })).status).toBe(200);
      local.revokeToken('soon-revoked');
      expect((await fetch(url, { headers: { Authorization: 'Bearer soon-revoked' } })).status).toBe(401);
    } finally {
      await local.close();
    }
  });
});

describe('rate limits', () => {
  it('sends rate-limit headers and 429s past the rolling limit', async () => {
    const local = await startHubSpotSimulator({ rateLimit: { maxPer10s: 3, windowMs: 400 } });
    try {
      local.addPortal({ portalId: 1, token: 't' });
      const get = () => fetch(`${local.url}${LIST_PATHS.blog_tags}?limit=1`, { headers: { Authorization: 'Bearer t' } });
      const remaining: string[] = [];
      for (let i = 0; i < 3; i++) remaining.push((await get()).headers.get('x-hubspot-ratelimit-remaining')!);
      expect(remaining).toEqual(['2', '1', '0']);
      const limited = await get();
      expect(limited.status).toBe(429);
      expect(limited.headers.get('x-hubspot-ratelimit-max')).toBe('3');
      expect(limited.headers.get('x-hubspot-ratelimit-interval-milliseconds')).toBe('400');
      expect(limited.headers.get('x-hubspot-ratelimit-daily-remaining')).toBe(String(1_000_000 - 3));
      expect(await limited.json()).toMatchObject({
        status: 'error', errorType: 'RATE_LIMIT', policyName: 'TEN_SECONDLY_ROLLING', message: 'You have reached your ten_secondly_rolling limit.',
      });
      await sleep(450);
      expect((await get()).status).toBe(200);
      expect(local.stats()).toMatchObject({ rateLimited: 1, peakPer10s: 3, requests: 5 });
    } finally {
      await local.close();
    }
  });

  it('enforces the daily limit with policy DAILY', async () => {
    const local = await startHubSpotSimulator({ rateLimit: { daily: 2 } });
    try {
      local.addPortal({ portalId: 1, token: 't' });
      const get = () => fetch(`${local.url}${ACCOUNT_DETAILS_PATH}`, { headers: { Authorization: 'Bearer t' } });
      expect([(await get()).status, (await get()).status]).toEqual([200, 200]);
      const limited = await get();
      expect(limited.status).toBe(429);
      expect(await limited.json()).toMatchObject({ policyName: 'DAILY' });
    } finally {
      await local.close();
    }
  });
});

describe('fault injection', () => {
  it('injects errors reproducibly for a given seed', async () => {
    const statuses = async () => {
      sim.setFaults({ errorRate: 0.5, errorStatuses: [500, 503], seed: 123 });
      const out: number[] = [];
      for (let i = 0; i < 12; i++) out.push((await raw(`${LIST_PATHS.blog_tags}?limit=1`)).status);
      return out;
    };
    const first = await statuses();
    expect(first.some((s) => s >= 500) && first.includes(200)).toBe(true);
    expect(await statuses()).toEqual(first);
  });

  it('drops sockets, delays responses, forces 429s and counts them', async () => {
    sim.resetStats();
    sim.setFaults({ dropRate: 1 });
    await expect(raw(LIST_PATHS.blog_tags)).rejects.toThrow();
    sim.setFaults({ forced429Rate: 1 });
    expect((await raw(LIST_PATHS.blog_tags)).status).toBe(429);
    sim.setFaults({ slowMs: 150 });
    const started = Date.now();
    expect((await raw(LIST_PATHS.blog_tags)).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    sim.clearFaults();
    sim.failNext(1, 502);
    const gateway = await raw(LIST_PATHS.blog_tags);
    expect([gateway.status, gateway.headers.get('content-type')]).toEqual([502, 'text/html; charset=UTF-8']);
    expect(sim.stats()).toMatchObject({ errorsInjected: 3, dropped: 1, rateLimited: 1, requests: 4 });
  });

  it('latency: each answer waits on a timer of its own, so a later request with less latency is answered first', async () => {
    const order: string[] = [];
    sim.setLatency(400);
    const slow = raw(LIST_PATHS.blog_tags).then((r) => order.push(`slow ${r.status}`));
    await sleep(20); // the slow request has arrived and waits on its timer
    sim.setLatency(0);
    const fast = raw(LIST_PATHS.blog_tags).then((r) => order.push(`fast ${r.status}`));
    await Promise.all([slow, fast]);
    expect(order).toEqual(['fast 200', 'slow 200']);
    expect(() => sim.setLatency(-1)).toThrow(/latencyMs/);
  });
});

describe('content and mutations', () => {
  it('is deterministic per seed and contains CSV-hostile values', async () => {
    const a = await startHubSpotSimulator();
    try {
      a.addPortal({ portalId: 1, token: 'a', seed: 5 });
      a.addPortal({ portalId: 2, token: 'b', seed: 5 });
      a.addPortal({ portalId: 3, token: 'c', seed: 6 });
      const body = (token: string) => fetch(`${a.url}${LIST_PATHS.blog_posts}?limit=100`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.text());
      const [one, two, three] = [await body('a'), await body('b'), await body('c')];
      expect(one.replaceAll('portal-1.', 'portal-2.')).toBe(two);
      expect(three).not.toBe(two.replaceAll('portal-2.', 'portal-3.'));
      const values = JSON.parse(one).results.flatMap((r: Record<string, unknown>) => Object.values(r).filter((v) => typeof v === 'string')) as string[];
      expect(values.some((v) => v.startsWith('='))).toBe(true);
      expect(values.some((v) => v.includes('\n'))).toBe(true);
      expect(values.some((v) => v.includes('"') && v.includes(','))).toBe(true);
      expect(values.some((v) => /[^\u0000-\u007f]/.test(v))).toBe(true);
    } finally {
      await a.close();
    }
  });

  it('prerender changes when item JSON is built, not what is served (a later change is served too)', async () => {
    const a = await startHubSpotSimulator();
    try {
      a.addPortal({ portalId: 1, token: 'lazy', seed: 5, sizes: { site_pages: 30 } });
      a.addPortal({ portalId: 2, token: 'eager', seed: 5, sizes: { site_pages: 30 }, prerender: true });
      const body = (token: string, type: 'site_pages' | 'landing_pages' = 'site_pages') =>
        fetch(`${a.url}${LIST_PATHS[type]}?limit=100`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.text());
      expect((await body('eager')).replaceAll('portal-2.', 'portal-1.')).toBe(await body('lazy'));
      // An item touched after rendering is served with its new time.
      const [id] = a.touchItems(2, 'site_pages', 1);
      const updatedOf = async (token: string) =>
        (JSON.parse(await body(token)).results as { id: string; updated: string }[]).find((r) => r.id === id)?.updated;
      expect(await updatedOf('eager')).toBe(a.items(2, 'site_pages').find((i) => i.key === id)!.updatedAt);
      expect(await updatedOf('eager')).not.toBe(await updatedOf('lazy'));
    } finally {
      await a.close();
    }
  });

  it('keeps the cursor stable while items are added and deleted mid-paging', async () => {
    const local = await startHubSpotSimulator();
    try {
      local.addPortal({ portalId: 1, token: 't', sizes: { site_pages: 95 } });
      const page = (after?: string) =>
        fetch(`${local.url}${LIST_PATHS.site_pages}?limit=10${after ? `&after=${after}` : ''}`, { headers: { Authorization: 'Bearer t' } }).then((r) => r.json());
      const before = local.items(1, 'site_pages').map((i) => i.id);
      const first = await page();
      const deleted = local.deleteItems(1, 'site_pages', [before[3]!, before[40]!, before[41]!]);
      const added = local.addItems(1, 'site_pages', 4);
      const seen: string[] = first.results.map((r: { id: string }) => r.id);
      let after: string | undefined = first.paging?.next?.after;
      while (after) {
        const next = await page(after);
        seen.push(...next.results.map((r: { id: string }) => r.id));
        after = next.paging?.next?.after;
      }
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toContain(before[3]); // already delivered on page 1
      expect(seen).not.toContain(before[40]);
      expect(seen.slice(-4)).toEqual(added);
      expect(local.items(1, 'site_pages').map((i) => i.id)).not.toContain(deleted[2]);
      const archived = await fetch(`${local.url}${LIST_PATHS.site_pages}?archived=true`, { headers: { Authorization: 'Bearer t' } }).then((r) => r.json());
      expect(archived.total).toBe(3);
      expect(archived.results[0].archivedInDashboard).toBe(true);
    } finally {
      await local.close();
    }
  });

  it('logs requests with a token hash, never the token', async () => {
    sim.resetStats();
    await raw(`${LIST_PATHS.blog_posts}?limit=3&after=c2ltOjQzMDAwMDAwMDEw`);
    const [entry] = sim.requestLog();
    expect(entry).toMatchObject({ path: LIST_PATHS.blog_posts, limit: '3', after: 'c2ltOjQzMDAwMDAwMDEw', status: 200, tokenHash: tokenHash(TOKEN), portalId: PORTAL });
    expect(JSON.stringify(sim.requestLog())).not.toContain(TOKEN);
    expect(sim.stats().byEndpoint).toEqual({ [`GET ${LIST_PATHS.blog_posts}`]: 1 });
  });

  it('closes promptly even with keep-alive connections open', async () => {
    const local = await startHubSpotSimulator();
    local.addPortal({ portalId: 1, token: 't' });
    await fetch(`${local.url}${LIST_PATHS.blog_tags}`, { headers: { Authorization: 'Bearer t' } }).then((r) => r.text());
    const started = Date.now();
    await local.close();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
