// The local Auth (local/auth/auth.ts) behind the local gateway's /auth/v1,
// driven by supabase-js's own auth client as an app drives hosted Auth: sign-up,
// password sign-in, refresh-token rotation (and reuse detection), get user,
// sign-out; the tokens it signs are accepted by the orchestrator (under Deno)
// and carry GoTrue's claims. GoTrue's rules where the stand-in once differed: a
// revoked token's reuse interval runs from its own revocation, reuse detection
// ends the whole family at once, an unknown email costs a password hash, the
// minimum password length counts bytes, and sign-ups and /token grants are rate
// limited per client IP (a stand-in of its own, so the limits of the shared one
// are not spent). A forged HS256 token gets 401 from the orchestrator,
// which asks this Auth about it; a body shorter than its Content-Length gets 408
// (shared/http.ts BODY_READ_TIMEOUT_MS). Refresh-token age is set by back-dating rows.
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { decodeJwt, SignJWT } from 'jose';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startLocalAuth, type LocalAuth } from '../local/auth/auth.ts';
import { TokenBucketLimiter } from '../local/auth/limits.ts';
import { passwordHashCount } from '../local/auth/store.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { BODY_READ_TIMEOUT_MS, readJsonBody } from '../shared/http.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
let sys: LocalSystem;

/** A fresh supabase-js client of the local project (no stored session, no timers). */
const client = (): SupabaseClient =>
  createClient(sys.functions.url, sys.keys.anonKey, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
    realtime: { transport: WebSocket as never },
  });
const email = () => `user-${crypto.randomUUID().slice(0, 8)}@example.test`;
const portals = (token: string) =>
  fetch(`${sys.functions.functionUrl('orchestrator')}/portals`, { headers: { Authorization: `Bearer ${token}` } }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, any> }));
const userCount = async () => Number((await db.sql`select count(*)::int as n from auth.users`)[0]!.n);

beforeAll(async () => {
  sys = await startLocalSystem(db.url);
}, 120_000);
afterAll(async () => {
  await sys?.stop();
});

describe('local Auth through supabase-js', () => {
  it('signs up a user: a session whose token carries GoTrue’s claims and works on the orchestrator; the password is stored hashed', async () => {
    const who = email();
    const { data, error } = await client().auth.signUp({ email: who, password: 'correct horse', options: { data: { name: 'Ada' } } });
    expect(error).toBeNull();
    const session = data.session!;
    expect(session).toMatchObject({ token_type: 'bearer', expires_in: 3600 });
    // GoTrue's v1 refresh token: 12 characters of lower-case base32.
    expect(session.refresh_token).toMatch(/^[a-z2-7]{12}$/);
    expect(data.user).toMatchObject({ email: who, aud: 'authenticated', role: 'authenticated', user_metadata: { name: 'Ada' }, app_metadata: { provider: 'email', providers: ['email'] } });
    const claims = decodeJwt(session.access_token);
    expect(claims).toMatchObject({
      iss: `${sys.functions.url}/auth/v1`, sub: data.user!.id, aud: 'authenticated', role: 'authenticated', email: who, aal: 'aal1', is_anonymous: false,
      app_metadata: { provider: 'email', providers: ['email'] }, user_metadata: { name: 'Ada' },
    });
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(claims.session_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(claims.amr).toEqual([{ method: 'password', timestamp: expect.any(Number) }]);
    const [row] = await db.sql`select encrypted_password, email_confirmed_at from auth.users where id = ${data.user!.id}`;
    expect(row!.encrypted_password).toMatch(/^\$scrypt\$/);
    expect(row!.encrypted_password).not.toContain('correct horse');
    expect(row!.email_confirmed_at).not.toBeNull();
    expect(await portals(session.access_token)).toEqual({ status: 200, body: { portals: [] } });
  });

  it('refuses a taken email, a weak password and a bad email as GoTrue does, writing nothing', async () => {
    const who = email();
    await client().auth.signUp({ email: who, password: 'secret-1' });
    const before = await userCount();
    const taken = await client().auth.signUp({ email: who.toUpperCase(), password: 'secret-1' });
    expect([taken.error?.status, taken.error?.code, taken.error?.message]).toEqual([422, 'user_already_exists', 'User already registered']);
    const weak = await client().auth.signUp({ email: email(), password: 'abc' });
    expect([weak.error?.status, weak.error?.code, weak.error?.message]).toEqual([422, 'weak_password', 'Password should be at least 6 characters.']);
    expect((weak.error as { reasons?: string[] }).reasons).toEqual(['length']);
    const bad = await client().auth.signUp({ email: 'not-an-email', password: 'secret-1' });
    expect([bad.error?.status, bad.error?.code, bad.error?.message]).toEqual([400, 'validation_failed', 'Unable to validate email address: invalid format']);
    // Neither email nor phone is an anonymous sign-up, off as on a new project.
    const anonymous = await fetch(`${sys.functions.url}/auth/v1/signup`, { method: 'POST', headers: { apikey: sys.keys.anonKey }, body: '{"password":"secret-1"}' });
    expect([anonymous.status, await anonymous.json()]).toEqual([422, { code: 422, error_code: 'anonymous_provider_disabled', msg: 'Anonymous sign-ins are disabled' }]);
    expect(await userCount()).toBe(before);
  });

  it('takes 123456, as GoTrue’s default minimum of 6 does, and counts the length in bytes as GoTrue (Go’s len) does', async () => {
    expect((await client().auth.signUp({ email: email(), password: '123456' })).error).toBeNull();
    // Three characters, six bytes: long enough for GoTrue; two characters, four bytes, are not.
    expect((await client().auth.signUp({ email: email(), password: 'ééé' })).error).toBeNull();
    const short = await client().auth.signUp({ email: email(), password: 'éé' });
    expect([short.error?.status, short.error?.code, short.error?.message]).toEqual([422, 'weak_password', 'Password should be at least 6 characters.']);
  });

  it('signs in with the password only: a wrong password and an unknown email get the same invalid_credentials', async () => {
    const who = email();
    await client().auth.signUp({ email: who, password: 'secret-2' });
    for (const [e, p] of [[who, 'wrong-one'], [email(), 'secret-2']] as const) {
      const { data, error } = await client().auth.signInWithPassword({ email: e, password: p });
      expect([error?.status, error?.code, error?.message, data.session]).toEqual([400, 'invalid_credentials', 'Invalid login credentials', null]);
    }
    const { data, error } = await client().auth.signInWithPassword({ email: who, password: 'secret-2' });
    expect(error).toBeNull();
    expect(data.user!.email).toBe(who);
    expect(data.user!.last_sign_in_at).toBeTruthy();
  });

  it('rotates refresh tokens: each refresh gives a new one in the same session; an old one reused after the interval revokes the family', async () => {
    const c = client();
    const { data } = await c.auth.signUp({ email: email(), password: 'secret-3' });
    const first = data.session!;
    const sessionId = decodeJwt(first.access_token).session_id as string;
    const second = (await c.auth.refreshSession()).data.session!;
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(decodeJwt(second.access_token).session_id).toBe(sessionId);
    // The parent of the active token is answered with that active token (the client lost the answer), however late.
    await db.sql`update auth.refresh_tokens set updated_at = updated_at - interval '1 minute' where token = ${first.refresh_token}`;
    const retried = await client().auth.refreshSession({ refresh_token: first.refresh_token });
    expect(retried.data.session!.refresh_token).toBe(second.refresh_token);
    const third = (await c.auth.refreshSession()).data.session!;
    expect(new Set([first, second, third].map((s) => s.refresh_token)).size).toBe(3);
    // Reusing the first, neither active nor its parent, once the reuse interval (10 s) is past: refused, every token of the session revoked.
    await db.sql`update auth.refresh_tokens set updated_at = updated_at - interval '1 minute' where token = ${first.refresh_token}`;
    const reuse = await client().auth.refreshSession({ refresh_token: first.refresh_token });
    expect([reuse.error?.status, reuse.error?.code, reuse.error?.message]).toEqual([400, 'refresh_token_already_used', 'Invalid Refresh Token: Already Used']);
    expect((await db.sql`select count(*)::int as n from auth.refresh_tokens where session_id = ${sessionId} and not revoked`)[0]!.n).toBe(0);
    await db.sql`update auth.refresh_tokens set updated_at = updated_at - interval '1 minute' where session_id = ${sessionId}`;
    expect((await client().auth.refreshSession({ refresh_token: third.refresh_token })).error?.code).toBe('refresh_token_already_used');
    const unknown = await client().auth.refreshSession({ refresh_token: 'abcdefghijkl' });
    expect([unknown.error?.status, unknown.error?.code, unknown.error?.message]).toEqual([400, 'refresh_token_not_found', 'Invalid Refresh Token: Refresh Token Not Found']);
    // Not of GoTrue's form (12 of [a-z0-9]): refused before it is looked up.
    const malformed = await client().auth.refreshSession({ refresh_token: 'no-such-token' });
    expect([malformed.error?.status, malformed.error?.code, malformed.error?.message]).toEqual([400, 'validation_failed', 'Refresh token is not valid']);
  });

  it('answers a revoked token again only within 10 s of its own revocation: an answered reuse does not restart the interval', async () => {
    const c = client();
    const { data } = await c.auth.signUp({ email: email(), password: 'secret-9' });
    const first = data.session!;
    await c.auth.refreshSession();
    await c.auth.refreshSession();
    // `first` was revoked by the first refresh and is no longer the active token's parent.
    const age = (seconds: number) => db.sql`update auth.refresh_tokens set updated_at = updated_at - make_interval(secs => ${seconds}) where token = ${first.refresh_token}`;
    await age(7);
    const within = await client().auth.refreshSession({ refresh_token: first.refresh_token });
    expect(within.error).toBeNull();
    expect(decodeJwt(within.data.session!.access_token).session_id).toBe(decodeJwt(first.access_token).session_id);
    // 14 s after its revocation, 7 s after it was last answered: refused.
    await age(7);
    const late = await client().auth.refreshSession({ refresh_token: first.refresh_token });
    expect([late.error?.status, late.error?.code]).toEqual([400, 'refresh_token_already_used']);
  });

  it('reuse detection ends every token of the session at once: none, not even the newest revoked that instant, is answered again', async () => {
    const c = client();
    const { data } = await c.auth.signUp({ email: email(), password: 'secret-10' });
    const first = data.session!;
    const sessionId = decodeJwt(first.access_token).session_id as string;
    const second = (await c.auth.refreshSession()).data.session!;
    const third = (await c.auth.refreshSession()).data.session!;
    await db.sql`update auth.refresh_tokens set updated_at = updated_at - interval '1 minute' where token = ${first.refresh_token}`;
    expect((await client().auth.refreshSession({ refresh_token: first.refresh_token })).error?.code).toBe('refresh_token_already_used');
    // At once, not 10 s later: the newest (a thief's, or the owner's) and the one before it.
    for (const stolen of [third, second]) {
      const again = await client().auth.refreshSession({ refresh_token: stolen.refresh_token });
      expect([again.error?.status, again.error?.code, again.error?.message]).toEqual([400, 'refresh_token_already_used', 'Invalid Refresh Token: Already Used']);
    }
    const tokens = await db.sql`select count(*)::int as n, count(*) filter (where not revoked)::int as live from auth.refresh_tokens where session_id = ${sessionId}`;
    expect(tokens[0]).toEqual({ n: 3, live: 0 });
  });

  it('costs an unknown email, and a user without a password, one password hash, as a wrong password does', async () => {
    const who = email();
    await sys.auth.createUser({ email: who, password: 'secret-11' });
    const passwordless = email();
    await db.sql`insert into auth.users (id, aud, role, email, email_confirmed_at) values (${crypto.randomUUID()}, 'authenticated', 'authenticated', ${passwordless}, now())`;
    const attempt = async (e: string) => {
      const before = passwordHashCount();
      const { error } = await client().auth.signInWithPassword({ email: e, password: 'wrong-one' });
      return [error?.code, passwordHashCount() - before];
    };
    expect(await attempt(who)).toEqual(['invalid_credentials', 1]);
    expect(await attempt(email())).toEqual(['invalid_credentials', 1]);
    expect(await attempt(passwordless)).toEqual(['invalid_credentials', 1]);
  });

  it('gets the user, and after sign-out neither the access token’s session nor its refresh token is accepted', async () => {
    const c = client();
    const who = email();
    const { data } = await c.auth.signUp({ email: who, password: 'secret-4' });
    const session = data.session!;
    const got = await c.auth.getUser();
    expect(got.data.user).toMatchObject({ id: data.user!.id, email: who });
    expect((await c.auth.signOut()).error).toBeNull();
    // GoTrue's answer, which supabase-js reports as "Auth session missing!".
    const raw = await fetch(`${sys.functions.url}/auth/v1/user`, { headers: { apikey: sys.keys.anonKey, Authorization: `Bearer ${session.access_token}` } });
    expect([raw.status, await raw.json()]).toEqual([403, { code: 403, error_code: 'session_not_found', msg: 'Session from session_id claim in JWT does not exist' }]);
    const after = await client().auth.getUser(session.access_token);
    expect([after.data.user, after.error?.name]).toEqual([null, 'AuthSessionMissingError']);
    const refresh = await client().auth.refreshSession({ refresh_token: session.refresh_token });
    expect(refresh.error?.code).toBe('refresh_token_not_found');
  });

  it('keeps two users apart: each token is its own user to the orchestrator', async () => {
    const a = await client().auth.signUp({ email: email(), password: 'secret-5' });
    const b = await client().auth.signUp({ email: email(), password: 'secret-6' });
    expect(a.data.user!.id).not.toBe(b.data.user!.id);
    const ga = await client().auth.getUser(a.data.session!.access_token);
    const gb = await client().auth.getUser(b.data.session!.access_token);
    expect([ga.data.user!.id, gb.data.user!.id]).toEqual([a.data.user!.id, b.data.user!.id]);
  });
});

describe('GoTrue’s rate limits, per client IP (a stand-in of its own, the edge’s client-IP header as GOTRUE_RATE_LIMIT_HEADER)', () => {
  let auth: LocalAuth;
  beforeAll(async () => {
    auth = await startLocalAuth({ sql: db.sql, rateLimitHeader: 'X-Forwarded-For' });
  });
  afterAll(async () => {
    await auth?.close();
  });
  const post = (path: string, body: Record<string, unknown>, ip: string) =>
    fetch(`${auth.url}/auth/v1${path}`, {
      method: 'POST',
      headers: { apikey: auth.apiKeys.anon, 'content-type': 'application/json', 'x-supabase-api-version': '2024-01-01', 'x-forwarded-for': `${ip}, 10.0.0.1` },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));
  const overLimit = { status: 429, body: { code: 'over_request_rate_limit', message: 'Request rate limit reached' } };

  it('sign-ups: 30 at once from one IP (refused ones count), then 429 and nothing written; another IP still signs up', async () => {
    for (let i = 0; i < 30; i++) expect((await post('/signup', { email: 'not-an-email', password: 'secret-1' }, '203.0.113.7')).status).toBe(400);
    const who = email();
    expect(await post('/signup', { email: who, password: 'secret-1' }, '203.0.113.7')).toEqual(overLimit);
    expect((await db.sql`select count(*)::int as n from auth.users where email = ${who}`)[0]!.n).toBe(0);
    expect((await post('/signup', { email: who, password: 'secret-1' }, '203.0.113.8')).status).toBe(200);
  });

  it('token grants, password and refresh_token alike: 30 at once from one IP, then 429 even with the right password; another IP signs in', async () => {
    const who = email();
    await auth.createUser({ email: who, password: 'secret-2' });
    for (let i = 0; i < 30; i++) expect((await post('/token?grant_type=refresh_token', { refresh_token: 'abcdefghijkl' }, '198.51.100.7')).status).toBe(400);
    expect(await post('/token?grant_type=password', { email: who, password: 'secret-2' }, '198.51.100.7')).toEqual(overLimit);
    expect((await post('/token?grant_type=password', { email: who, password: 'secret-2' }, '198.51.100.8')).status).toBe(200);
  });

  it('refills each bucket at its rate up to the burst of 30 (150 grants per 5 minutes: one every 2 s), one bucket per IP', () => {
    const limiter = new TokenBucketLimiter(150);
    const t0 = 1_000_000;
    for (let i = 0; i < 30; i++) expect(limiter.take('a', t0)).toBe(true);
    expect(limiter.take('a', t0)).toBe(false);
    expect(limiter.take('b', t0)).toBe(true);
    expect(limiter.take('a', t0 + 1_999)).toBe(false);
    expect(limiter.take('a', t0 + 2_000)).toBe(true);
    expect(limiter.take('a', t0 + 2_000)).toBe(false);
    // Idle for 10 minutes: full again, but no fuller than the burst.
    const later = t0 + 602_000;
    for (let i = 0; i < 30; i++) expect(limiter.take('a', later)).toBe(true);
    expect(limiter.take('a', later)).toBe(false);
  });
});

describe('the orchestrator under Deno: a forged token, a stalled body', () => {
  it('answers a forged HS256 token (signed with a key that is not the project’s) 401 UNAUTHENTICATED, not 503', async () => {
    const now = Math.floor(Date.now() / 1000);
    const userId = await sys.auth.createUser({ email: email(), password: 'secret-7' });
    const forged = await new SignJWT({ aud: 'authenticated', role: 'authenticated', sub: userId, iat: now, exp: now + 600, session_id: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .sign(new TextEncoder().encode(`not-the-project-${crypto.randomUUID()}`));
    const res = await portals(forged);
    expect([res.status, res.body.code]).toEqual([401, 'UNAUTHENTICATED']);
  });

  it('answers a body shorter than its Content-Length 408 REQUEST_TIMEOUT once the bound has passed, instead of holding the request', async () => {
    const userId = await sys.auth.createUser({ email: email(), password: 'secret-8' });
    const token = await sys.auth.signEs256(userId);
    const url = new URL(sys.functions.functionUrl('orchestrator'));
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), '127.0.0.1', () => {
        // 100 bytes promised, 15 sent, and the connection kept open.
        socket.write(`POST ${url.pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"action":"sto`);
      });
      let text = '';
      socket.on('data', (d) => {
        text += d.toString();
        if (text.includes('\r\n\r\n') && text.includes('}')) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on('error', reject);
      socket.setTimeout(BODY_READ_TIMEOUT_MS + 20_000, () => reject(new Error('no answer: the request is held open')));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(answer.slice(answer.indexOf('{')))).toMatchObject({ code: 'REQUEST_TIMEOUT' });
  }, BODY_READ_TIMEOUT_MS + 40_000);

  it('readJsonBody: a stalled stream is refused 408 after the bound given, a whole one read', async () => {
    const stalled = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(new TextEncoder().encode('{"a":')) });
    const req = new Request('http://x/', { method: 'POST', body: stalled, duplex: 'half' } as RequestInit);
    await expect(readJsonBody(req, 1000, 50)).rejects.toMatchObject({ status: 408, code: 'REQUEST_TIMEOUT' });
    expect(await readJsonBody(new Request('http://x/', { method: 'POST', body: '{"a":1}' }), 1000, 50)).toEqual({ a: 1 });
  });
});
