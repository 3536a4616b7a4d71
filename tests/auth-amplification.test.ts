// Forged user tokens cannot make the orchestrator hammer Supabase Auth. Tokens
// that cannot be valid (wrong shape, header, algorithm, signature length,
// claims, an asymmetric token without a kid) are refused 401 without asking
// Auth, even while Auth is down; a forged token of valid shape asks Auth once
// however often it is sent (negative cache, one question in flight per token);
// a flood of distinct forged tokens costs a bounded number of requests (rate and
// concurrency limits) and gets 401 or 429, never 503. 503 AUTH_UNAVAILABLE is
// kept for Auth itself failing. The local Auth stand-in answers bad tokens as
// GoTrue does (403 bad_jwt, golang-jwt's reasons), checked first.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestratorHandlerFromEnv } from '../functions/orchestrator/from-env.ts';
import { startLocalAuth, type LocalAuth } from '../local/auth/auth.ts';
import { freePort } from '../local/postgres.ts';
import { AUTH_REQUEST_LIMITS, createUserVerifier } from '../shared/auth.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
let auth: LocalAuth;
let owner: { userId: string; runId: string };

beforeAll(async () => {
  auth = await startLocalAuth({ sql: db.sql });
  const { userId, portalId } = await createUserWithPortal(db.sql);
  const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_tags'] });
  owner = { userId, runId: run.runId! };
});
afterAll(async () => {
  await auth?.close();
});

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

/** Claims as Auth issues them, for `sub`. */
function claims(sub: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { aud: 'authenticated', iss: `${auth.url}/auth/v1`, sub, iat: now(), exp: now() + 600, role: 'authenticated', session_id: randomUUID(), ...extra };
}

/** An HS256 token of the right shape and claims, signed with a secret nobody knows. */
function forgeHs256(sub: string = randomUUID(), extra: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims(sub, extra)).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(randomUUID() + randomUUID()));
}

/** A token with this header and payload and `sigBytes` random signature bytes. */
function shaped(header: unknown, payload: unknown, sigBytes: number): string {
  return `${b64(header)}.${b64(payload)}.${Buffer.from(crypto.getRandomValues(new Uint8Array(sigBytes))).toString('base64url')}`;
}

/** What a legacy (HS256) hosted project gives the function. */
function legacyEnv(supabaseUrl = auth.url): Record<string, string> {
  return {
    SUPABASE_URL: supabaseUrl,
    SUPABASE_DB_URL: db.url,
    SUPABASE_ANON_KEY: auth.apiKeys.anon,
    SUPABASE_SERVICE_ROLE_KEY: auth.apiKeys.serviceRole,
    SUPABASE_JWKS: JSON.stringify({ keys: [] }),
  };
}

type Handler = (req: Request) => Promise<Response>;

async function getRun(handler: Handler, token: string) {
  const res = await handler(new Request(`http://127.0.0.1/functions/v1/orchestrator?runId=${owner.runId}`, { headers: { Authorization: `Bearer ${token}` } }));
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

/** Asks the stand-in directly, as the verifier does. */
async function askStandIn(token: string | null, apikey: string | null = auth.apiKeys.anon) {
  const res = await fetch(`${auth.url}/auth/v1/user`, {
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(apikey ? { apikey } : {}) },
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** A fake Auth answering with `answer`; counts requests and the most in flight at once. */
async function fakeAuth(answer: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>) {
  let requests = 0;
  let inFlight = 0;
  let peak = 0;
  const server: Server = createServer((req, res) => {
    requests++;
    peak = Math.max(peak, ++inFlight);
    res.on('close', () => inFlight--);
    void Promise.resolve(answer(req, res)).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  return {
    authUrl: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/auth/v1`,
    requests: () => requests,
    peak: () => peak,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

describe('the local Auth stand-in answers /auth/v1/user as GoTrue does', () => {
  const badJwt = (reason: RegExp) => ({ status: 403, error_code: 'bad_jwt', msg: new RegExp(`^invalid JWT: unable to parse or verify signature, ${reason.source}`) });

  it('bad tokens: 403 bad_jwt with golang-jwt reasons; a non-UUID sub 400; a missing user 403 user_not_found', async () => {
    const es = await auth.signEs256(owner.userId);
    const [, esPayload, esSig] = es.split('.');
    const cases: [string, string, { status: number; error_code: string; msg: RegExp }][] = [
      ['malformed', 'not-a-jwt', badJwt(/token is malformed: token contains an invalid number of segments$/)],
      ['forged HS256', await forgeHs256(owner.userId), badJwt(/token signature is invalid: signature is invalid$/)],
      ['expired', await auth.signHs256(owner.userId, { expiresInSeconds: -60 }), badJwt(/token has invalid claims: token is expired$/)],
      ['not yet valid', await auth.signHs256(owner.userId, { claims: { nbf: now() + 600 } }), badJwt(/token has invalid claims: token is not valid yet$/)],
      ['ES256 without kid', `${b64({ alg: 'ES256', typ: 'JWT' })}.${esPayload}.${esSig}`, badJwt(/token is unverifiable: error while executing keyfunc: missing kid$/)],
      ['unknown kid', `${b64({ alg: 'ES256', typ: 'JWT', kid: 'nope' })}.${esPayload}.${esSig}`, badJwt(/token is unverifiable: error while executing keyfunc: invalid kid: nope$/)],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims(owner.userId))}.`, badJwt(/token signature is invalid: signing method none is invalid$/)],
      ['sub not a UUID', await auth.signHs256('not-a-uuid'), { status: 400, error_code: 'bad_jwt', msg: /^invalid claim: sub claim must be a UUID$/ }],
      ['deleted user', await auth.signHs256(randomUUID()), { status: 403, error_code: 'user_not_found', msg: /^User from sub claim in JWT does not exist$/ }],
    ];
    for (const [what, token, want] of cases) {
      const res = await askStandIn(token);
      expect(res.status, what).toBe(want.status);
      expect(res.body, what).toMatchObject({ code: want.status, error_code: want.error_code });
      expect(res.body.msg, what).toMatch(want.msg);
    }
  });

  it('checks neither audience nor role (that is the caller\'s job), and refuses a missing bearer or apikey as the gateway does', async () => {
    const foreignAudience = await askStandIn(await auth.signHs256(owner.userId, { claims: { aud: 'somebody-else', role: 'anon' } }));
    expect(foreignAudience.status).toBe(200);
    expect(foreignAudience.body.id).toBe(owner.userId);
    expect(await askStandIn(null)).toEqual({ status: 401, body: { code: 401, error_code: 'no_authorization', msg: 'This endpoint requires a Bearer token' } });
    expect(await askStandIn(await auth.signHs256(owner.userId), null)).toMatchObject({ status: 401, body: { message: 'No API key found in request' } });
    expect(await askStandIn(await auth.signHs256(owner.userId), 'wrong')).toMatchObject({ status: 401, body: { message: 'Invalid API key' } });
  });
});

describe('forged tokens do not amplify into requests to Auth', () => {
  /** Tokens that cannot be a valid user token, whatever any key says. */
  async function impossibleTokens(): Promise<[string, string][]> {
    const es = await auth.signEs256(owner.userId);
    const [, esPayload, esSig] = es.split('.');
    const hs = await auth.signHs256(owner.userId);
    const [hsHeader, hsPayload] = hs.split('.');
    const c = claims(owner.userId);
    return [
      ['one part', 'not-a-jwt'],
      ['two parts', 'a.b'],
      ['four parts', `${hs}.x`],
      ['empty signature', `${hsHeader}.${hsPayload}.`],
      ['not base64url', `${hsHeader}.${hsPayload}.@@@@`],
      ['header not JSON', `${b64('{nope')}.${hsPayload}.${hs.split('.')[2]}`],
      ['header an array', shaped([1], c, 32)],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(c)}.`],
      ['alg HS512', shaped({ alg: 'HS512', typ: 'JWT' }, c, 64)],
      ['alg RS384', shaped({ alg: 'RS384', typ: 'JWT', kid: 'k' }, c, 256)],
      ['ES256 without kid', `${b64({ alg: 'ES256', typ: 'JWT' })}.${esPayload}.${esSig}`],
      ['RS256 without kid', shaped({ alg: 'RS256', typ: 'JWT' }, c, 256)],
      ['HS256 with a short signature', shaped({ alg: 'HS256', typ: 'JWT' }, c, 16)],
      ['HS256 with a long signature', shaped({ alg: 'HS256', typ: 'JWT' }, c, 64)],
      ['typ not JWT', shaped({ alg: 'HS256', typ: 'at+jwt' }, c, 32)],
      ['crit header', shaped({ alg: 'HS256', typ: 'JWT', crit: ['exp'] }, c, 32)],
      ['payload not JSON', `${hsHeader}.${b64('nope')}.${hs.split('.')[2]}`],
      ['no exp', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, exp: undefined }, 32)],
      ['exp a string', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, exp: String(now() + 600) }, 32)],
      ['not yet valid', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, nbf: now() + 600 }, 32)],
      ['anon audience', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, aud: 'anon' }, 32)],
      ['anon role (the anon key)', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, role: 'anon' }, 32)],
      ['service role', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, role: 'service_role' }, 32)],
      ['sub not a UUID', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, sub: 'admin' }, 32)],
      ['expired', await auth.signHs256(owner.userId, { expiresInSeconds: -60 })],
      ['expired, forged', shaped({ alg: 'HS256', typ: 'JWT' }, { ...c, exp: now() - 3600 }, 32)],
    ];
  }

  it('tokens that cannot be valid are 401 without asking Auth, also while Auth is unreachable (not 503)', async () => {
    const down = `http://127.0.0.1:${await freePort()}/auth/v1`;
    let asked = 0;
    for (const authUrl of [`${auth.url}/auth/v1`, down]) {
      const verify = createUserVerifier({ authUrl, apiKey: auth.apiKeys.anon, timeoutMs: 2000, onAuthRequest: () => asked++ });
      const before = auth.userRequests();
      for (const [what, token] of await impossibleTokens()) {
        const error = await verify(token).then(() => null, (e: unknown) => e as { status?: number; code?: string; message?: string });
        expect(error, `${what} (${authUrl === down ? 'Auth down' : 'Auth up'})`).toMatchObject({ status: 401, code: what.startsWith('expired') ? 'TOKEN_EXPIRED' : 'UNAUTHENTICATED' });
        expect(error!.message, what).toMatch(what.startsWith('expired') ? /expired/ : /./);
      }
      expect(auth.userRequests() - before).toBe(0);
    }
    expect(asked).toBe(0);
  });

  it('a forged token of valid shape is 401 (not 503), and sent again and again it asks Auth once', async () => {
    const handler = orchestratorHandlerFromEnv(legacyEnv());
    const forged = await forgeHs256(owner.userId);
    const before = auth.userRequests();
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await getRun(handler, forged));
    answers.push(...(await Promise.all(Array.from({ length: 10 }, () => getRun(handler, forged)))));
    for (const a of answers) {
      expect(a.status).toBe(401);
      expect(a.body.code).toBe('UNAUTHENTICATED');
      expect(a.body.message).toMatch(/^Invalid access token/);
    }
    expect(auth.userRequests() - before).toBe(1);
  });

  it('N distinct forged tokens cost a bounded number of requests to Auth, each answered 401 or 429 (never 503)', async () => {
    const handler = orchestratorHandlerFromEnv(legacyEnv());
    const N = 150;
    const tokens = await Promise.all(Array.from({ length: N }, () => forgeHs256()));
    const before = auth.userRequests();
    const started = Date.now();
    const answers = await Promise.all(tokens.map((t) => getRun(handler, t)));
    const elapsedS = (Date.now() - started) / 1000;
    const requests = auth.userRequests() - before;
    const { burst, perSecond, maxWaitMs } = AUTH_REQUEST_LIMITS;
    const bound = Math.ceil(burst + perSecond * (maxWaitMs / 1000 + elapsedS));
    const byStatus: Record<number, number> = {};
    for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
    console.log(`auth amplification: ${N} forged tokens -> ${requests} requests to Auth in ${elapsedS.toFixed(1)} s (bound ${bound}); statuses ${JSON.stringify(byStatus)}`);
    expect(requests).toBeLessThanOrEqual(bound);
    expect(requests).toBeLessThan(N / 3);
    expect(Object.keys(byStatus).sort()).toEqual(['401', '429']);
    for (const a of answers.filter((x) => x.status === 429)) {
      expect(a.body.code).toBe('RATE_LIMITED');
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });

  it('a user verified before a flood is still served during it (positive cache, untouched by refusals)', async () => {
    const handler = orchestratorHandlerFromEnv(legacyEnv());
    const good = await auth.signHs256(owner.userId);
    expect((await getRun(handler, good)).status).toBe(200);
    const flood = await Promise.all(Array.from({ length: 60 }, async () => getRun(handler, await forgeHs256())));
    expect(flood.every((a) => a.status === 401 || a.status === 429)).toBe(true);
    const before = auth.userRequests();
    expect((await getRun(handler, good)).status).toBe(200);
    expect(auth.userRequests()).toBe(before);
  });

  it('requests to Auth in flight at once are bounded', async () => {
    const slow = await fakeAuth(async (_req, res) => {
      await new Promise((r) => setTimeout(r, 300));
      json(res, 403, { code: 403, error_code: 'bad_jwt', msg: 'invalid JWT: unable to parse or verify signature, token signature is invalid: signature is invalid' });
    });
    try {
      const verify = createUserVerifier({ authUrl: slow.authUrl, apiKey: 'k' });
      const results = await Promise.all(Array.from({ length: 12 }, async () => verify(await forgeHs256()).then(() => 200, (e: { status: number }) => e.status)));
      expect(results.every((s) => s === 401 || s === 429), JSON.stringify(results)).toBe(true);
      expect(results).toContain(401);
      expect(slow.peak()).toBeLessThanOrEqual(AUTH_REQUEST_LIMITS.concurrency);
    } finally {
      await slow.close();
    }
  });

  it('Auth saying "token is expired" (its clock ahead of ours) is 401 TOKEN_EXPIRED, asked once', async () => {
    const verify = createUserVerifier({ authUrl: `${auth.url}/auth/v1`, apiKey: auth.apiKeys.anon });
    const token = await auth.signHs256(owner.userId, { expiresInSeconds: -1 }); // within our clock tolerance, past for Auth
    const before = auth.userRequests();
    for (let i = 0; i < 3; i++) {
      await expect(verify(token)).rejects.toMatchObject({ status: 401, code: 'TOKEN_EXPIRED', message: expect.stringMatching(/expired/) });
    }
    expect(auth.userRequests() - before).toBe(1);
  });

  it('503 AUTH_UNAVAILABLE only when Auth fails (5xx, its own 429), and that answer is not cached', async () => {
    let status = 500;
    const flaky = await fakeAuth((_req, res) => {
      json(res, status, status === 403
        ? { code: 403, error_code: 'bad_jwt', msg: 'invalid JWT: unable to parse or verify signature, token signature is invalid: signature is invalid' }
        : { code: status, error_code: 'unexpected_failure', msg: 'Unexpected failure' });
    });
    try {
      const verify = createUserVerifier({ authUrl: flaky.authUrl, apiKey: 'k' });
      const token = await forgeHs256(owner.userId);
      await expect(verify(token)).rejects.toMatchObject({ status: 503, code: 'AUTH_UNAVAILABLE' });
      status = 429;
      await expect(verify(token)).rejects.toMatchObject({ status: 503, code: 'AUTH_UNAVAILABLE' });
      status = 403;
      await expect(verify(token)).rejects.toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
      await expect(verify(token)).rejects.toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
      expect(flaky.requests()).toBe(3);
    } finally {
      await flaky.close();
    }
  });
});
