// Property-based fuzzing of the orchestrator handler, called directly with a
// real database, a simulator-backed HubSpot client and a JWKS verifier:
// random methods, headers, tokens, bodies, portal and run ids. Properties:
// never a 5xx; a 4xx never writes (portals, credentials, runs, jobs,
// notifications are unchanged); authentication and ownership answers are the
// expected ones; no response echoes an access token.
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrchestratorHandler } from '../functions/orchestrator/handler.ts';
import { hubspotDeps } from '../functions/orchestrator/hubspot-deps.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { createLogger } from '../shared/log.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { createRun } from '../shared/sql/runs.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { databaseDigest } from './support/queue-fixtures.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import { createFuzzKeys, TOKEN_KINDS, VALID_KINDS, type FuzzKeys, type TokenKind } from './support/chaos-jwt.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const db = useTestDatabase();
const NUM_RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const MAX_BODY = 64 * 1024;
const URL_BASE = 'http://127.0.0.1:54321/functions/v1/orchestrator';

let sim: HubSpotSimulator;
let handler: (req: Request) => Promise<Response>;
let keys: FuzzKeys;
let wakes = 0;
const logLines: string[] = [];
const ids = {
  owner: '', other: '',
  ownPortal: '', ownRevokedPortal: '', otherPortal: '',
  ownRuns: [] as string[], otherRuns: [] as string[],
};
const TOKENS = { own: 'pat-fuzz-own-7f3a9c', ownRevoked: 'pat-fuzz-revoked-91bd2e', other: 'pat-fuzz-other-c04d11', fresh: 'pat-fuzz-fresh-5e6f70' };

beforeAll(async () => {
  sim = await startHubSpotSimulator({ rateLimit: { maxPer10s: 1_000_000 } });
  sim.addPortal({ portalId: 990_001, token: TOKENS.own, sizes: { site_pages: 5, blog_posts: 5, hubdb_rows: 5 } });
  sim.addPortal({ portalId: 990_002, token: TOKENS.ownRevoked });
  sim.addPortal({ portalId: 990_003, token: TOKENS.other });
  sim.addPortal({ portalId: 990_004, token: TOKENS.fresh });
  ids.owner = await createUser(db.sql);
  ids.other = await createUser(db.sql);
  ids.ownPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: ids.owner, hubspotPortalId: 990_001, name: 'Own', accessToken: TOKENS.own });
  ids.ownRevokedPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: ids.owner, hubspotPortalId: 990_002, name: 'Revoked', accessToken: TOKENS.ownRevoked });
  ids.otherPortal = await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId: ids.other, hubspotPortalId: 990_003, name: 'Other', accessToken: TOKENS.other });
  sim.revokeToken(TOKENS.ownRevoked);
  ids.otherRuns.push((await createRun(db.sql, { portalId: ids.otherPortal, requestedBy: ids.other, kind: 'fetch', contentTypes: ['blog_tags'] })).runId!);
  ids.ownRuns.push((await createRun(db.sql, { portalId: ids.ownPortal, requestedBy: ids.owner, kind: 'export', contentTypes: ['url_redirects'] })).runId!);
  keys = await createFuzzKeys(ids.owner, ids.other);
  // The per-user write limit is tested on its own (orchestrator-frontend); here it would only turn most writes into 429s.
  await db.sql`update private.write_limit_settings set max_writes = 100000`;
  const sql = db.connect(4);
  handler = createOrchestratorHandler({
    sql,
    log: createLogger({ write: (l) => logLines.push(l), secrets: Object.values(TOKENS) }),
    maxBodyBytes: MAX_BODY,
    verifyUser: createUserVerifier({ jwks: keys.jwks }),
    ...hubspotDeps({
      sql,
      basePath: sim.url,
      rateLimit: { maxPer10s: 10_000 },
      tokenKeys: testTokenKeys,
      oauthApp: null,
      requestTimeoutMs: 5_000,
      client: { sleep: (ms) => sleep(Math.min(ms, 20)) },
    }),
    wakeWorker: () => {
      wakes++;
    },
  });
}, 120_000);
afterAll(async () => {
  await sim?.close();
});

// ---------- arbitraries ----------

const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }), // lone surrogates, NUL and friends
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', '💥'.repeat(50), "'; drop table public.runs; --", '${{7*7}}', '../../etc/passwd', 'null', 'x'.repeat(5000)),
);
const uuidish = fc.oneof(fc.uuid(), fc.constant('00000000-0000-0000-0000-000000000000'), fc.constant(randomUUID().toUpperCase()));

/** Percent-encodes the UTF-8 bytes of `s` (lone surrogates become U+FFFD, as a client would send them). */
const pct = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

type PortalRef = 'own' | 'own_revoked' | 'other' | 'random' | 'garbage';
const portalRef = fc.constantFrom<PortalRef>('own', 'own', 'own_revoked', 'other', 'random', 'garbage');
type RunRef = 'own' | 'other' | 'random' | 'garbage';
const runRef = fc.constantFrom<RunRef>('own', 'own', 'other', 'random', 'garbage');

const anyJson = fc.jsonValue({ maxDepth: 4 });
const HUGE_ARRAY = '<10,000 content types>';
const expand = (v: unknown) => (v === HUGE_ARRAY ? Array.from({ length: 10_000 }, (_, i) => CONTENT_TYPES[i % 8]) : v);
const contentTypes = fc.oneof(
  fc.subarray([...CONTENT_TYPES], { minLength: 1 }),
  fc.array(fc.constantFrom(...CONTENT_TYPES), { minLength: 2, maxLength: 4 }), // may repeat
  fc.constant([]),
  fc.array(nastyString, { maxLength: 3 }),
  fc.constant(HUGE_ARRAY), // expanded to 10,000 content types when the body is built
  anyJson,
);

type Body =
  | { t: 'create'; portal: PortalRef; contentTypes?: unknown; kind?: unknown; extra?: [string, unknown] }
  | { t: 'stop'; run: RunRef; extra?: [string, unknown] }
  | { t: 'connect'; name: unknown; token: 'own' | 'fresh' | 'revoked' | 'unknown' | 'nasty'; nastyToken: string }
  | { t: 'json'; value: unknown }
  | { t: 'raw'; text: string }
  | { t: 'deep'; depth: number; open: string }
  | { t: 'none' };

const bodyArb: fc.Arbitrary<Body> = fc.oneof(
  { weight: 5, arbitrary: fc.record({
    t: fc.constant('create' as const),
    portal: portalRef,
    contentTypes: fc.option(contentTypes, { nil: undefined }),
    kind: fc.option(fc.oneof(fc.constantFrom('fetch', 'export'), nastyString, anyJson), { nil: undefined }),
    extra: fc.option(fc.tuple(fc.oneof(fc.constantFrom('action', 'ownerId', '__proto__', 'constructor'), nastyString), anyJson), { nil: undefined }),
  }, { requiredKeys: ['t', 'portal'] }) },
  { weight: 4, arbitrary: fc.record({ // well-formed: reaches HubSpot, create_run and dedup
    t: fc.constant('create' as const),
    portal: fc.constantFrom<PortalRef>('own', 'own', 'own_revoked', 'other'),
    contentTypes: fc.option(fc.subarray([...CONTENT_TYPES], { minLength: 1 }), { nil: undefined }),
    kind: fc.option(fc.constantFrom('fetch', 'export'), { nil: undefined }),
  }, { requiredKeys: ['t', 'portal'] }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('stop' as const), run: runRef, extra: fc.option(fc.tuple(nastyString, anyJson), { nil: undefined }) }, { requiredKeys: ['t', 'run'] }) },
  { weight: 3, arbitrary: fc.record({
    t: fc.constant('connect' as const),
    name: fc.oneof(nastyString, anyJson),
    token: fc.constantFrom('own', 'fresh', 'revoked', 'unknown', 'nasty') as fc.Arbitrary<'own' | 'fresh' | 'revoked' | 'unknown' | 'nasty'>,
    nastyToken: nastyString,
  }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('json' as const), value: anyJson }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('raw' as const), text: fc.oneof(nastyString, fc.string({ unit: 'binary' })) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('deep' as const), depth: fc.integer({ min: 100, max: 30_000 }), open: fc.constantFrom('[', '{"a":') }) },
  { weight: 1, arbitrary: fc.constant({ t: 'none' as const }) },
);

const authArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...TOKEN_KINDS).map((k) => ({ k: 'token' as const, kind: k, scheme: 'Bearer' })) },
  { weight: 12, arbitrary: fc.constantFrom<TokenKind>('valid_owner', 'valid_owner', 'valid_owner', 'valid_other', 'valid_ghost').map((kind) => ({ k: 'token' as const, kind, scheme: 'Bearer' })) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...TOKEN_KINDS), fc.constantFrom('bearer', 'BEARER', 'Bearer  ', 'Basic', 'Token', '')).map(([k, scheme]) => ({ k: 'token' as const, kind: k, scheme })) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'abcXYZ012._-+/= '.split('')), maxLength: 200 }).map((g) => ({ k: 'raw' as const, value: g })) },
);

const caseArb = fc.record({
  method: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('POST', 'POST', 'POST', 'GET') }, { weight: 1, arbitrary: fc.constantFrom('OPTIONS', 'PUT', 'DELETE', 'PATCH', 'HEAD') }),
  auth: authArb,
  body: bodyArb,
  query: fc.oneof(
    runRef.map((r) => ({ run: r as RunRef | null, extra: '' })),
    fc.constant({ run: null, extra: '' }),
    fc.tuple(runRef, nastyString).map(([r, s]) => ({ run: r as RunRef | null, extra: `&runId=${pct(s)}` })),
    nastyString.map((s) => ({ run: null, extra: `?${pct(s)}=${pct(s)}` })),
    fc.constantFrom('?runId=%ZZ', '?runId=%E0%A4%A', '?runId=%00', '?runId[]=1&runId=2', `?runId=${'a'.repeat(10_000)}`).map((q) => ({ run: null, extra: q })),
  ),
  // Mostly JSON, so bodies get parsed; anything else is a 415 before the body is read.
  contentType: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON') },
    { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', null) },
  ),
  extraHeaders: fc.array(fc.tuple(fc.constantFrom('x-client-info', 'apikey', 'x-forwarded-for', 'origin', 'content-length', 'prefer'), fc.string({ unit: fc.constantFrom(...'abc012;=/ '.split('')), maxLength: 30 })), { maxLength: 3 }),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

// ---------- building and checking one request ----------

const portalIdOf = (p: PortalRef): unknown =>
  p === 'own' ? ids.ownPortal : p === 'own_revoked' ? ids.ownRevokedPortal : p === 'other' ? ids.otherPortal : p === 'random' ? randomUUID() : 'not-a-uuid';
const runIdOf = (r: RunRef): string =>
  r === 'own' ? ids.ownRuns[ids.ownRuns.length - 1]! : r === 'other' ? ids.otherRuns[ids.otherRuns.length - 1]! : r === 'random' ? randomUUID() : 'zzz';

function bodyText(b: Body): string | undefined {
  switch (b.t) {
    case 'create': {
      const o: Record<string, unknown> = { portalId: portalIdOf(b.portal) };
      if (b.contentTypes !== undefined) o.contentTypes = expand(b.contentTypes);
      if (b.kind !== undefined) o.kind = b.kind;
      if (b.extra) o[b.extra[0]] = b.extra[1];
      return JSON.stringify(o);
    }
    case 'stop': {
      const o: Record<string, unknown> = { action: 'stop', runId: runIdOf(b.run) };
      if (b.extra) o[b.extra[0]] = b.extra[1];
      return JSON.stringify(o);
    }
    case 'connect': {
      const token = { own: TOKENS.own, fresh: TOKENS.fresh, revoked: TOKENS.ownRevoked, unknown: `pat-unknown-${randomUUID()}`, nasty: b.nastyToken }[b.token];
      return JSON.stringify({ action: 'connect_portal', name: b.name, accessToken: token });
    }
    case 'json':
      return JSON.stringify(b.value) ?? 'null';
    case 'raw':
      return b.text;
    case 'deep':
      return b.open.repeat(b.depth) + (b.open === '[' ? ']' : '}').repeat(b.depth);
    case 'none':
      return undefined;
  }
}

function buildRequest(c: Case): Request {
  const headers = new Headers();
  for (const [k, v] of c.extraHeaders) headers.set(k, v);
  if (c.auth.k === 'token') headers.set('authorization', `${c.auth.scheme} ${keys.tokens[c.auth.kind]}`);
  else if (c.auth.k === 'raw') headers.set('authorization', c.auth.value);
  if (c.contentType) headers.set('content-type', c.contentType);
  let url = URL_BASE;
  if (c.query.run) url += `?runId=${pct(runIdOf(c.query.run))}${c.query.extra}`;
  else url += c.query.extra;
  const body = c.method === 'GET' || c.method === 'HEAD' ? undefined : bodyText(c.body);
  return new Request(url, { method: c.method, headers, body });
}

const stats = { cases: 0, byStatus: {} as Record<number, number>, byCode: {} as Record<string, number> };
const secretsInResponses = () => [...Object.values(TOKENS), ...keys.secrets];

async function check(c: Case): Promise<void> {
  let req: Request;
  try {
    req = buildRequest(c);
  } catch {
    return; // not a request a client could send (e.g. a header value fetch refuses)
  }
  const before = await databaseDigest(db.sql, { budgets: false });
  const wakesBefore = wakes;
  const res = await handler(req);
  const text = await res.text();
  stats.cases++;
  stats.byStatus[res.status] = (stats.byStatus[res.status] ?? 0) + 1;
  const where = `${c.method} ${JSON.stringify(c.auth).slice(0, 80)} ${JSON.stringify(c.body).slice(0, 200)} -> ${res.status} ${text.slice(0, 300)}`;

  expect(res.status, where).toBeLessThan(500);
  for (const s of secretsInResponses()) expect(text.includes(s), `response echoes a secret: ${where}`).toBe(false);
  if (res.status >= 400) {
    const parsed = JSON.parse(text) as { code?: unknown; message?: unknown };
    expect(typeof parsed.code, where).toBe('string');
    expect(typeof parsed.message, where).toBe('string');
    stats.byCode[parsed.code as string] = (stats.byCode[parsed.code as string] ?? 0) + 1;
    expect(await databaseDigest(db.sql, { budgets: false }), `a ${res.status} changed the database: ${where}`).toBe(before);
    expect(wakes, where).toBe(wakesBefore);
  }

  // The answers that must not depend on luck.
  if (c.method === 'OPTIONS') return void expect(res.status, where).toBe(204);
  if (!['GET', 'POST'].includes(c.method)) return void expect(res.status, where).toBe(405);
  const authOk = c.auth.k === 'token' && /^bearer$/i.test(c.auth.scheme.trim()) && VALID_KINDS.has(c.auth.kind);
  if (!authOk) return void expect(res.status, where).toBe(401);
  const actor = c.auth.k === 'token' && (c.auth.kind === 'valid_owner' || c.auth.kind === 'valid_supabase_key') ? 'owner'
    : c.auth.k === 'token' && c.auth.kind === 'valid_other' ? 'other' : 'ghost';
  const mine = (ref: string) => (ref === 'own' || ref === 'own_revoked' ? actor === 'owner' : ref === 'other' ? actor === 'other' : false);
  const denied = [400, 404, 413, 415];
  if (c.method === 'POST' && c.contentType?.split(';')[0]!.toLowerCase() !== 'application/json') return void expect(res.status, where).toBe(415);
  if (c.method === 'GET') {
    if (c.query.run && !mine(c.query.run)) expect([400, 404], where).toContain(res.status);
    if (c.query.run && mine(c.query.run) && !c.query.extra) expect(res.status, where).toBe(200);
    return;
  }
  if (c.body.t === 'create' && !mine(c.body.portal)) expect(denied, where).toContain(res.status);
  if (c.body.t === 'stop' && !mine(c.body.run)) expect(denied, where).toContain(res.status);
  if (res.status === 201 && c.body.t === 'create') {
    const created = JSON.parse(text) as { runId: string };
    (actor === 'owner' ? ids.ownRuns : ids.otherRuns).push(created.runId);
    expect(wakes, where).toBe(wakesBefore + 1);
  }
}

describe('orchestrator handler under fuzzing', () => {
  it(`${NUM_RUNS} random requests: never a 5xx, never a write on a 4xx`, async () => {
    const started = Date.now();
    await fc.assert(fc.asyncProperty(caseArb, check), { numRuns: NUM_RUNS, endOnFailure: true });
    console.log(`fuzz: ${stats.cases} cases in ${Date.now() - started} ms; statuses ${JSON.stringify(stats.byStatus)}; codes ${JSON.stringify(stats.byCode)}`);
    expect(stats.byStatus[201] ?? 0).toBeGreaterThan(0);
    expect(stats.byStatus[401] ?? 0).toBeGreaterThan(0);
    expect(logLines.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  }, 120_000);

  it('answers every kind of token as it should (only properly signed, unexpired user tokens pass)', async () => {
    const verdicts: Record<string, number> = {};
    for (const kind of TOKEN_KINDS) {
      const res = await handler(new Request(`${URL_BASE}?runId=${ids.ownRuns[0]}`, { headers: { authorization: `Bearer ${keys.tokens[kind]}` } }));
      verdicts[kind] = res.status;
    }
    console.log(`token verdicts: ${JSON.stringify(verdicts)}`);
    for (const kind of TOKEN_KINDS) {
      expect(verdicts[kind], kind).toBe(kind === 'valid_owner' || kind === 'valid_supabase_key' ? 200 : kind === 'valid_other' || kind === 'valid_ghost' ? 404 : 401);
    }
  });

  it('a 10 MB body is refused with 413 (declared or streamed) and writes nothing', async () => {
    const before = await databaseDigest(db.sql, { budgets: false });
    const big = JSON.stringify({ portalId: ids.ownPortal, contentTypes: ['site_pages'], pad: 'x'.repeat(10 * 1024 * 1024) });
    const auth = { authorization: `Bearer ${keys.tokens.valid_owner}`, 'content-type': 'application/json' };
    const declared = await handler(new Request(URL_BASE, { method: 'POST', headers: { ...auth, 'content-length': String(Buffer.byteLength(big)) }, body: big }));
    expect(declared.status).toBe(413);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        const chunk = new TextEncoder().encode(big.slice(0, 1024 * 1024));
        for (let i = 0; i < 10; i++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const streamed = await handler(new Request(URL_BASE, { method: 'POST', headers: auth, body: stream, duplex: 'half' } as RequestInit));
    expect(streamed.status).toBe(413);
    expect(((await streamed.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
    expect(await databaseDigest(db.sql, { budgets: false })).toBe(before);
  });
});
