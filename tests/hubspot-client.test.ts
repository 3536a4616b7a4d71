// Wrapper tests: shared/hubspot/client.ts against the HubSpot simulator.

import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTENT_TYPES, createHubSpotClient, DeadlineReached, HubSpotAuthError, HubSpotError, HubSpotRateLimitError, HubSpotTransientError,
  type ContentType, type HubSpotClientOptions, type HubSpotContentClient, type RawPage,
} from '../shared/hubspot/client.ts';
import { API_ENDPOINTS } from '../shared/hubspot/api-paths.ts';
import { LIST_PATHS, nextAfter } from '../shared/hubspot/endpoints.ts';
import { encodeRowsCursor } from '../shared/hubspot/hubdb-rows.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';

const TOKEN = 'pat-na1-00000000-SECRET-TOKEN-abcdef';
const PORTAL = 777;
let sim: HubSpotSimulator;
const sleeps: number[] = [];
const noSleep = async (ms: number) => {
  sleeps.push(ms);
};

beforeAll(async () => {
  sim = await startHubSpotSimulator({ seed: 3, rateLimit: { maxPer10s: 100_000 } });
  sim.addPortal({ portalId: PORTAL, token: TOKEN, sizes: { hubdb_rows: 2_600 }, hubdbTables: 2 });
  sim.addPortal({ portalId: 8, token: 'content-only-token', scopes: ['content'] });
});
afterAll(() => sim.close());
afterEach(() => {
  sim.clearFaults();
  sleeps.length = 0;
});

function makeClient(extra: Partial<HubSpotClientOptions> = {}): HubSpotContentClient {
  return createHubSpotClient({ accessToken: TOKEN, basePath: sim.url, sleep: noSleep, ...extra });
}

interface Item {
  id: string;
  updatedAt: string | null;
  data: Record<string, unknown>;
}

/**
 * What the database makes of a raw page (save_fetched_page_raw), done here in JS
 * so the client can be tested on its own; tests/fetch-raw.test.ts checks the
 * database does the same.
 */
function decodePage(type: ContentType, page: RawPage): { items: Item[]; nextCursor: string | null } {
  const body = JSON.parse(page.body) as { results: Record<string, unknown>[]; paging?: { next?: { after?: unknown } } };
  const after = nextAfter(body);
  const time = (r: Record<string, unknown>) => {
    const v = r['updated'] ?? r['updatedAt'];
    return typeof v === 'string' ? v : null;
  };
  if (type !== 'hubdb_rows') {
    expect(page.context).toBeNull();
    return { items: body.results.map((r) => ({ id: String(r['id']), updatedAt: time(r), data: r })), nextCursor: after };
  }
  const ctx = page.context!;
  const items = body.results.map((r) => ({
    id: `${ctx.tableId}:${String(r['id'])}`, updatedAt: time(r), data: { ...r, tableId: ctx.tableId },
  }));
  const nextCursor = after
    ? encodeRowsCursor({ tableId: ctx.tableId!, after })
    : ctx.nextTableId ? encodeRowsCursor({ tableId: ctx.nextTableId, after: null }) : null;
  return { items, nextCursor };
}

async function fetchPage(client: HubSpotContentClient, type: ContentType, cursor: string | null) {
  return decodePage(type, await client.fetchRawPage(type, cursor));
}

async function fetchAll(client: HubSpotContentClient, type: ContentType, onPage?: (n: number) => void): Promise<Item[]> {
  const items: Item[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: { items: Item[]; nextCursor: string | null } = await fetchPage(client, type, cursor);
    items.push(...page.items);
    cursor = page.nextCursor;
    onPage?.(++pages);
  } while (cursor);
  return items;
}

describe('fetchRawPage and countTotal', () => {
  it.each(CONTENT_TYPES)('fetches every %s item once and counts them', async (type) => {
    const client = makeClient();
    const items = await fetchAll(client, type);
    const expected = sim.items(PORTAL, type);
    expect(items.map((i) => i.id)).toEqual(expected.map((i) => i.key));
    expect(items.map((i) => i.updatedAt)).toEqual(expected.map((i) => i.updatedAt));
    expect(await client.countTotal(type)).toBe(expected.length);
    expect(items[0]!.data).toMatchObject({ id: type === 'hubdb_rows' ? expected[0]!.id : expected[0]!.key });
  });

  it('returns the body exactly as HubSpot sent it, and HubDB rows with their table', async () => {
    const client = makeClient();
    const page = await client.fetchRawPage('blog_posts', null);
    const direct = await fetch(`${sim.url}${LIST_PATHS.blog_posts}?limit=100&archived=false`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(page.body).toBe(await direct.text());
    expect(page.context).toBeNull();
    const rows = await client.fetchRawPage('hubdb_rows', null);
    const [first, second] = sim.items(PORTAL, 'hubdb_tables');
    expect(rows.context).toEqual({ tableId: first!.id, nextTableId: second!.id, tableUpdatedAt: first!.updatedAt });
    const [row] = decodePage('hubdb_rows', rows).items;
    expect(row!.data).toMatchObject({ tableId: first!.id, values: expect.any(Object) });
    expect(row!.data).not.toHaveProperty('tableName');
    expect(row!.id).toBe(`${first!.id}:${row!.data['id']}`);
  });

  it('sends the paths of the table (shared/hubspot/api-paths.ts), limit, after and archived=false', async () => {
    const client = makeClient();
    const table = new Set(API_ENDPOINTS.map((e) => `${e.method} ${e.template.replace(/\/+$/, '')}`));
    for (const type of CONTENT_TYPES) {
      sim.resetStats();
      const first = await fetchPage(client, type, null);
      if (first.nextCursor) await fetchPage(client, type, first.nextCursor);
      const log = sim.requestLog();
      expect(log.every((e) => e.status === 200 && e.archived === 'false'), type).toBe(true);
      expect(log.filter((e) => !table.has(e.endpoint)), type).toEqual([]);
      const list = log.filter((e) => type !== 'hubdb_rows' || e.path.endsWith('/rows'));
      expect(list[0], type).toMatchObject({ after: null, limit: String(type.startsWith('hubdb') ? 1000 : 100), offset: null });
      if (first.nextCursor && type !== 'hubdb_rows') expect(list[1]!.after, type).toBe(first.nextCursor);
    }
    sim.resetStats();
    await client.fetchRawPage('url_redirects', null);
    expect(sim.requestLog()[0]!.path).toBe(LIST_PATHS.url_redirects);
    await client.fetchRawPage('site_pages', null);
    expect(sim.requestLog()[1]!.path).toBe(LIST_PATHS.site_pages);
  });

  it('requests the largest page size and follows row cursors inside and across tables', async () => {
    sim.resetStats();
    await fetchAll(makeClient(), 'hubdb_rows');
    const rowCalls = sim.requestLog().filter((e) => e.path.endsWith('/rows'));
    expect(rowCalls.map((e) => e.limit)).toEqual(['1000', '1000', '1000', '1000']); // 1300 rows per table
    expect(rowCalls.map((e) => e.after === null)).toEqual([true, false, true, false]);
    sim.resetStats();
    await makeClient().fetchRawPage('site_pages', null);
    expect(sim.requestLog()[0]).toMatchObject({ limit: '100', after: null });
  });

  it('returns account details', async () => {
    expect(await makeClient().accountDetails()).toMatchObject({ portalId: PORTAL, timeZone: 'US/Eastern', companyCurrency: 'USD' });
  });

  it('calls beforeRequest before every HTTP request and reports rate-limit headers', async () => {
    let calls = 0;
    const seen: { max: number; remaining: number; intervalMs: number }[] = [];
    const client = makeClient({ beforeRequest: async () => void calls++, onRateLimitHeaders: (h) => seen.push(h) });
    sim.resetStats();
    sim.failNext(2, 503);
    await fetchAll(client, 'hubdb_rows');
    await client.countTotal('blog_posts');
    expect(calls).toBe(sim.stats().requests);
    expect(seen).toHaveLength(calls);
    expect(seen[0]).toMatchObject({ max: 100_000, intervalMs: 10_000 });
    expect(seen[1]!.remaining).toBeLessThan(seen[0]!.remaining);
  });

  it('survives items added and deleted mid-paging (including a whole HubDB table)', async () => {
    const local = await startHubSpotSimulator();
    try {
      local.addPortal({ portalId: 1, token: TOKEN, sizes: { blog_posts: 450, hubdb_rows: 3_000 }, hubdbTables: 3 });
      const client = createHubSpotClient({ accessToken: TOKEN, basePath: local.url });
      const original = local.items(1, 'blog_posts').map((i) => i.key);
      let deleted: string[] = [];
      let added: string[] = [];
      const posts = await fetchAll(client, 'blog_posts', (page) => {
        if (page === 2) {
          deleted = local.deleteItems(1, 'blog_posts', 40);
          added = local.addItems(1, 'blog_posts', 25);
        }
      });
      const ids = posts.map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      const survivors = original.filter((id) => !deleted.includes(id));
      expect(ids).toEqual(expect.arrayContaining([...survivors, ...added]));
      expect(ids.length).toBeLessThan(original.length + added.length);
      const tables = local.items(1, 'hubdb_tables');
      const rows = await fetchAll(client, 'hubdb_rows', (page) => {
        if (page === 1) local.deleteItems(1, 'hubdb_tables', [tables[1]!.id]);
      });
      expect(rows.some((r) => r.id.startsWith(`${tables[2]!.id}:`))).toBe(true);
      expect(rows.some((r) => r.id.startsWith(`${tables[1]!.id}:`))).toBe(false);
    } finally {
      await local.close();
    }
  });

  it('rejects a malformed hubdb_rows cursor without retrying', async () => {
    await expect(makeClient().fetchRawPage('hubdb_rows', 'garbage')).rejects.toMatchObject({ name: 'HubSpotError', retryable: false });
  });
});

describe('retries and errors', () => {
  it('retries 5xx (JSON and HTML) and dropped connections with growing backoff', async () => {
    sim.resetStats();
    sim.failNext(1, 500);
    sim.failNext(1, 502);
    sim.failNext(1, 'drop');
    sim.failNext(1, 503);
    const page = await fetchPage(makeClient({ random: () => 1 }), 'blog_tags', null);
    expect(page.items).toHaveLength(60);
    expect(sim.stats().requests).toBe(5);
    expect(sleeps).toEqual([250, 500, 1000, 2000]);
  });

  it('pages everything correctly under a 30% random error and drop rate', async () => {
    sim.setFaults({ errorRate: 0.2, dropRate: 0.1, seed: 11 });
    const client = makeClient({ maxTransientRetries: 8 });
    for (const type of ['site_pages', 'blog_posts', 'hubdb_rows'] as const) {
      const items = await fetchAll(client, type);
      expect(items.map((i) => i.id)).toEqual(sim.items(PORTAL, type).map((i) => i.key));
    }
    expect(sim.stats().errorsInjected).toBeGreaterThan(0);
  });

  it('gives up with HubSpotTransientError after maxTransientRetries', async () => {
    sim.setFaults({ errorRate: 1, errorStatuses: [503] });
    sim.resetStats();
    const error = await makeClient({ maxTransientRetries: 2 }).fetchRawPage('site_pages', null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotTransientError);
    expect(error).toMatchObject({ retryable: true, status: 503 });
    expect(sim.stats().requests).toBe(3); // proves the official client adds no retries of its own
  });

  it('times out slow responses and retries them', async () => {
    sim.setFaults({ slowMs: 300 });
    const error = await makeClient({ requestTimeoutMs: 50, maxTransientRetries: 1 }).countTotal('blog_tags').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotTransientError);
    expect((error as Error).message).toContain('no response within 50 ms');
    sim.setFaults({ slowMs: 300, slowRate: 0.5, seed: 2 });
    expect(await makeClient({ requestTimeoutMs: 150, maxTransientRetries: 6 }).countTotal('blog_tags')).toBe(60);
  });

  it('waits out 429s (really paging past a tiny rate limit)', async () => {
    const local = await startHubSpotSimulator({ rateLimit: { maxPer10s: 4, windowMs: 250 } });
    try {
      local.addPortal({ portalId: 1, token: TOKEN, sizes: { blog_posts: 1_000 } });
      const client = createHubSpotClient({ accessToken: TOKEN, basePath: local.url, maxRateLimitRetries: 10 });
      const items = await fetchAll(client, 'blog_posts');
      expect(items).toHaveLength(1_000);
      expect(local.stats().rateLimited).toBeGreaterThan(0);
      expect(local.stats().peakPer10s).toBeLessThanOrEqual(4);
    } finally {
      await local.close();
    }
  });

  it('throws HubSpotRateLimitError when 429s persist, and at once for the daily limit', async () => {
    sim.setFaults({ forced429Rate: 1 });
    sim.resetStats();
    const error = await makeClient({ maxRateLimitRetries: 3 }).fetchRawPage('blog_tags', null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotRateLimitError);
    expect(error).toMatchObject({ retryable: true, retryAfterMs: 10_000, policy: 'TEN_SECONDLY_ROLLING' });
    expect(sim.stats().requests).toBe(4);
    expect(sleeps).toHaveLength(3);
    const daily = await startHubSpotSimulator({ rateLimit: { daily: 1 } });
    try {
      daily.addPortal({ portalId: 1, token: TOKEN });
      const client = createHubSpotClient({ accessToken: TOKEN, basePath: daily.url, sleep: noSleep });
      await client.countTotal('blog_tags');
      const dailyError = await client.countTotal('blog_tags').catch((e: unknown) => e);
      expect(dailyError).toMatchObject({ name: 'HubSpotRateLimitError', policy: 'DAILY', retryable: true });
      expect(daily.stats().requests).toBe(2);
    } finally {
      await daily.close();
    }
  });

  it('maps a revoked token to HubSpotAuthError without leaking the token anywhere', async () => {
    const local = await startHubSpotSimulator();
    try {
      local.addPortal({ portalId: 1, token: TOKEN });
      const client = createHubSpotClient({ accessToken: TOKEN, basePath: local.url, sleep: noSleep });
      await client.fetchRawPage('site_pages', null);
      local.revokeToken(TOKEN);
      for (const call of [() => client.fetchRawPage('site_pages', null), () => client.accountDetails(), () => client.fetchRawPage('hubdb_rows', null)]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(HubSpotAuthError);
        const authError = error as HubSpotAuthError;
        expect(authError).toMatchObject({ retryable: false, status: 401, category: 'INVALID_AUTHENTICATION' });
        expect(authError.message).toMatch(/reconnect HubSpot/i);
        const everything = [authError.message, authError.stack, JSON.stringify(authError), String(authError), inspect(authError, { depth: 10, showHidden: true })];
        for (const text of everything) expect(text).not.toContain(TOKEN);
        expect(authError.cause).toBeUndefined();
      }
      expect(local.stats().requests).toBe(4); // 401s are never retried
    } finally {
      await local.close();
    }
  });

  it('maps missing scopes to HubSpotAuthError for HubDB types only', async () => {
    const client = createHubSpotClient({ accessToken: 'content-only-token', basePath: sim.url, sleep: noSleep });
    expect((await fetchPage(client, 'url_redirects', null)).items.length).toBeGreaterThan(0);
    for (const type of ['hubdb_tables', 'hubdb_rows'] as const) {
      const error = await client.fetchRawPage(type, null).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HubSpotAuthError);
      expect(error).toMatchObject({ status: 403, category: 'MISSING_SCOPES', retryable: false });
    }
  });

  it('reports other 4xx as non-retryable errors', async () => {
    const error = await makeClient().fetchRawPage('blog_posts', 'not-a-valid-cursor').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubSpotError);
    expect(error).toMatchObject({ name: 'HubSpotRequestError', status: 400, retryable: false });
  });
});

describe('the caller deadline (timeLeft)', () => {
  it('a Retry-After that would pass the deadline ends the call with DeadlineReached, without sleeping', async () => {
    sim.setFaults({ forced429Rate: 1, retryAfterSeconds: 60 });
    sim.resetStats();
    const deadline = Date.now() + 20_000;
    const error = await makeClient({ timeLeft: () => deadline - Date.now() }).fetchRawPage('blog_tags', null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineReached);
    expect(error).toMatchObject({ name: 'DeadlineReached', retryable: true, waitMs: 60_000 });
    expect(sleeps).toEqual([]);
    expect(sim.stats().requests).toBe(1);
    // With time enough the same Retry-After is honoured (the sleep is ours: no real wait).
    sim.resetStats();
    await makeClient({ maxRateLimitRetries: 1, timeLeft: () => 600_000 }).fetchRawPage('blog_tags', null).catch(() => null);
    expect(sleeps).toEqual([60_000]);
  });

  it('a hanging response near the deadline is cut off before the deadline with DeadlineReached', async () => {
    sim.setFaults({ slowMs: 60_000 });
    sim.resetStats();
    const deadline = Date.now() + 2_500;
    const error = await makeClient({ timeLeft: () => deadline - Date.now(), deadlineMarginMs: 1_000 })
      .fetchRawPage('site_pages', null).catch((e: unknown) => e);
    const endedAt = Date.now();
    expect(error).toBeInstanceOf(DeadlineReached);
    expect(endedAt).toBeLessThan(deadline); // the margin (1 s) was kept for the caller
    expect(sim.stats().requests).toBe(1); // no retry started without time for it
  });

  it('retry backoffs that do not fit throw DeadlineReached; no request starts without time for it', async () => {
    sim.failNext(1, 503);
    sim.resetStats();
    // 1.6 s left, 1 s margin: one request fits (0.6 s), a 250 ms backoff would leave 0.35 s < 0.5 s for the retry.
    const error = await makeClient({ random: () => 1, timeLeft: () => 1_600 }).fetchRawPage('blog_tags', null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineReached);
    expect(error).toMatchObject({ waitMs: 250 });
    expect(sim.stats().requests).toBe(1);
    expect(sleeps).toEqual([]);

    let hooks = 0;
    sim.resetStats();
    const none = await makeClient({ timeLeft: () => 1_400, beforeRequest: async () => void hooks++ }).countTotal('blog_tags').catch((e: unknown) => e);
    expect(none).toBeInstanceOf(DeadlineReached);
    expect(hooks).toBe(0); // no budget grant taken for a request that cannot run
    expect(sim.stats().requests).toBe(0);
  });

  it('a daily 429 still throws HubSpotRateLimitError (policy DAILY), not DeadlineReached', async () => {
    const daily = await startHubSpotSimulator({ rateLimit: { daily: 1 } });
    try {
      daily.addPortal({ portalId: 1, token: TOKEN });
      const client = createHubSpotClient({ accessToken: TOKEN, basePath: daily.url, sleep: noSleep, timeLeft: () => 5_000 });
      await client.countTotal('blog_tags');
      const error = await client.fetchRawPage('blog_tags', null).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HubSpotRateLimitError);
      expect(error).toMatchObject({ policy: 'DAILY' });
    } finally {
      await daily.close();
    }
  });
});
