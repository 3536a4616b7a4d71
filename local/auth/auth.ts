// A local stand-in for Supabase Auth (GoTrue) behind the API gateway, on
// 127.0.0.1 only, for what supabase-js's auth client calls:
//   GET  /auth/v1/.well-known/jwks.json           the project's public signing keys
//   POST /auth/v1/signup                           email + password (confirmed at once,
//                                                  as with email confirmations off); a session
//   POST /auth/v1/token?grant_type=password        sign-in; a session
//   POST /auth/v1/token?grant_type=refresh_token   refresh-token rotation with GoTrue's reuse
//                                                  rules (./store.ts)
//   GET  /auth/v1/user                             the user of `Authorization: Bearer <token>`
//   POST /auth/v1/logout?scope=global|local|others ends sessions (their refresh tokens with them)
// Sign-ups and /token grants are rate limited per client IP with GoTrue's defaults
// (./limits.ts); passwords need GoTrue's minimum length, 6 bytes.
// Every route needs an `apikey` the project knows, as the gateway does. A bearer
// token is checked as GoTrue checks it (the key by `kid`, else the legacy HS256
// secret for an HS256 token, else "missing kid"; the signature; exp and nbf
// without leeway; not the audience or role) and refused as GoTrue refuses it:
// 403 bad_jwt "invalid JWT: unable to parse or verify signature, <golang-jwt's
// reason>"; with a database the user must exist in auth.users and the token's
// session in auth.sessions. Errors have both of GoTrue's shapes: {code, message}
// for X-Supabase-Api-Version 2024-01-01 (what supabase-js sends), else
// {code: <status>, error_code, msg}. Access tokens carry GoTrue's claims and are
// signed with the project's key, so the functions and Realtime accept them.
// Where it differs from GoTrue: docs/testing.md#signing-in-locally.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { base64url, compactVerify, exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import type { Sql } from '../../shared/db.ts';
import { GOTRUE_RATE_LIMITS, TokenBucketLimiter, type AuthRateLimits } from './limits.ts';
import {
  appMetadata, createPasswordUser, createSession, endSessions, ensureSession, findUser, findUserByEmail, isWellFormedRefreshToken, refreshSession, sessionExists, userJson,
  verifyPassword, type IssuedSession, type UserRow,
} from './store.ts';
import type { SigningKeys } from '../supabase.ts';

export interface LocalAuth {
  /** The stand-in's own base URL (Auth lives under /auth/v1); the gateway forwards /auth/v1 here. */
  url: string;
  /** The public JWKS (what hosted puts in SUPABASE_JWKS). */
  jwks: { keys: JWK[] };
  /** The legacy HS256 secret (what a legacy project signs with; never given to the functions). */
  legacySecret: string;
  /** API keys the gateway accepts as `apikey` (with `keys`, `anon` is the project's anon key JWT). */
  apiKeys: { anon: string; publishable: string; secret: string; serviceRole: string };
  /** Requests to /auth/v1/user so far. */
  userRequests(): number;
  /** A confirmed password user, as a sign-up makes one; app_metadata as given (e.g. queue_operator). */
  createUser(o: { email: string; password: string; appMetadata?: Record<string, unknown> }): Promise<string>;
  signEs256(userId: string, opts?: TokenOptions): Promise<string>;
  signHs256(userId: string, opts?: TokenOptions): Promise<string>;
  close(): Promise<void>;
}

export interface TokenOptions {
  expiresInSeconds?: number;
  claims?: Record<string, unknown>;
}

export interface LocalAuthOptions {
  /** auth.users (and sessions, refresh tokens) live here; without it only JWKS and /user answer, and /user trusts any signed sub. */
  sql?: Sql;
  /** Sign with the project's keys (the ones the functions and Realtime trust) instead of a fresh key pair. */
  keys?: SigningKeys;
  /** SUPABASE_URL as callers see it (the gateway): tokens' `iss` is `<publicUrl>/auth/v1`. Default: this server's URL. */
  publicUrl?: string;
  /** Access token lifetime (GoTrue's JWT_EXP; hosted default 3600). */
  accessTokenTtlSeconds?: number;
  /** How long a rotated refresh token may still be used (GoTrue's REFRESH_TOKEN_REUSE_INTERVAL; default 10). */
  refreshTokenReuseIntervalSeconds?: number;
  /** Shortest password a sign-up takes, in bytes (GoTrue's PASSWORD_MIN_LENGTH; default and least 6). */
  passwordMinLength?: number;
  /** GoTrue's per-IP limits on /token grants and sign-ups; each defaults to GoTrue's (./limits.ts). */
  rateLimits?: Partial<AuthRateLimits>;
  /**
   * GoTrue's RATE_LIMIT_HEADER: the header whose first value is the client's IP (what the edge in
   * front of hosted Auth sets). Unset (the default), or absent from a request: the connection's
   * address, which locally is 127.0.0.1 for every client.
   */
  rateLimitHeader?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The algorithms golang-jwt knows (others are "unavailable"). */
const KNOWN_ALGS = new Set(['none', 'HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']);
/** GoTrue's email check (a simplified form of its regexp) and its cap. */
const EMAIL = /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;
const MAX_PASSWORD_LENGTH = 72;
const MAX_BODY_BYTES = 64 * 1024;
const API_VERSION_HEADER = 'x-supabase-api-version';
const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': 'authorization, apikey, content-type, x-client-info, x-supabase-api-version, x-retry-count',
  'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'access-control-expose-headers': 'x-supabase-api-version, x-sb-error-code',
};

/** An error as GoTrue answers it. */
class AuthError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

function b64urlRandom(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');
}

/** Starts the stand-in. */
export async function startLocalAuth(opts: LocalAuthOptions = {}): Promise<LocalAuth> {
  const own = opts.keys ? null : await generateKeyPair('ES256', { extractable: true });
  const jwks = opts.keys ? opts.keys.jwks : { keys: [{ ...(await exportJWK(own!.publicKey)), kid: `local-${b64urlRandom(6)}`, alg: 'ES256', use: 'sig' }] };
  const kid = jwks.keys[0]!.kid!;
  const publicKey = opts.keys ? null : own!.publicKey;
  const signEs = (claims: JWTPayload) =>
    opts.keys ? opts.keys.sign(claims) : new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' }).sign(own!.privateKey);
  const legacySecret = b64urlRandom(32);
  const hsKey = new TextEncoder().encode(legacySecret);
  const apiKeys = {
    anon: opts.keys?.anonKey ?? `local-anon-${b64urlRandom(12)}`,
    publishable: `sb_publishable_${b64urlRandom(16)}`,
    secret: `sb_secret_${b64urlRandom(24)}`,
    serviceRole: `local-service-${b64urlRandom(12)}`,
  };
  const accepted = new Set(Object.values(apiKeys));
  const ttl = opts.accessTokenTtlSeconds ?? 3600;
  const reuseInterval = opts.refreshTokenReuseIntervalSeconds ?? 10;
  // GoTrue raises a configured minimum below 6 to 6.
  const minLength = Math.max(6, opts.passwordMinLength ?? 6);
  const limits = { ...GOTRUE_RATE_LIMITS, ...opts.rateLimits };
  const tokenLimiter = new TokenBucketLimiter(limits.tokenPer5Minutes);
  const signUpLimiter = new TokenBucketLimiter(limits.signUpsPer5Minutes);
  const limitHeader = opts.rateLimitHeader?.toLowerCase();
  /** GoTrue's performRateLimiting: one request of the client's IP from the limiter, else 429. */
  const rateLimit = (limiter: TokenBucketLimiter, req: IncomingMessage) => {
    const header = limitHeader ? req.headers[limitHeader] : undefined;
    const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',')[0]!.trim();
    const ip = forwarded !== '' ? forwarded : (req.socket.remoteAddress ?? '');
    if (!limiter.take(ip, Date.now())) throw new AuthError(429, 'over_request_rate_limit', 'Request rate limit reached');
  };
  const sql = opts.sql;
  let userRequests = 0;
  let url = '';
  const issuer = () => `${opts.publicUrl ?? url}/auth/v1`;

  // Claims as Auth issues them; `o.claims` overrides any of them (tests forge wrong ones).
  const sign = async (alg: 'ES256' | 'HS256', userId: string, o: TokenOptions = {}) => {
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      aud: 'authenticated', iss: issuer(), sub: userId, iat: now, exp: now + (o.expiresInSeconds ?? 3600), role: 'authenticated', aal: 'aal1',
      session_id: crypto.randomUUID(), ...o.claims,
    };
    // GoTrue finds a token's session: record it, so the token stands as a signed-in user's.
    if (sql && UUID.test(userId) && typeof claims.session_id === 'string' && UUID.test(claims.session_id)) await ensureSession(sql, userId, claims.session_id);
    return alg === 'ES256' ? signEs(claims) : new SignJWT(claims).setProtectedHeader({ alg, typ: 'JWT' }).sign(hsKey);
  };

  /** The access token of a session, with GoTrue's claims. */
  const accessToken = (u: UserRow, s: IssuedSession, now: number) =>
    signEs({
      aud: u.aud, exp: now + ttl, iat: now, iss: issuer(), sub: u.id, email: u.email ?? '', phone: '',
      app_metadata: appMetadata(u), user_metadata: u.raw_user_meta_data ?? {}, role: u.role, aal: 'aal1',
      amr: [{ method: 'password', timestamp: Math.floor(s.createdAt.getTime() / 1000) }], session_id: s.sessionId, is_anonymous: u.is_anonymous,
    });

  /** GoTrue's AccessTokenResponse. */
  const sessionBody = async (u: UserRow, s: IssuedSession) => {
    const now = Math.floor(Date.now() / 1000);
    return { access_token: await accessToken(u, s, now), token_type: 'bearer', expires_in: ttl, expires_at: now + ttl, refresh_token: s.refreshToken, user: userJson(u) };
  };

  /** GoTrue's parseJWTClaims (golang-jwt v5, valid methods HS256 and ES256): the claims, or the reason it gives. */
  const parseClaims = async (token: string): Promise<{ claims: Record<string, unknown> } | { reason: string }> => {
    const parts = token.split('.');
    if (parts.length !== 3) return { reason: 'token is malformed: token contains an invalid number of segments' };
    const decode = (part: string, what: string): Record<string, unknown> | string => {
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(base64url.decode(part));
      } catch {
        return `token is malformed: could not base64 decode ${what}`;
      }
      try {
        const v = JSON.parse(text) as unknown;
        if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
      } catch {
        // below
      }
      return `token is malformed: could not JSON decode ${what}`;
    };
    const header = decode(parts[0]!, 'header');
    if (typeof header === 'string') return { reason: header };
    const claims = decode(parts[1]!, 'claim');
    if (typeof claims === 'string') return { reason: claims };
    const alg = header.alg;
    if (typeof alg !== 'string' || !KNOWN_ALGS.has(alg)) return { reason: `token is unverifiable: signing method ${String(alg)} is unavailable` };
    if (alg !== 'HS256' && alg !== 'ES256') return { reason: `token signature is invalid: signing method ${alg} is invalid` };
    let key: Uint8Array | CryptoKey | JWK;
    if (typeof header.kid === 'string') {
      if (header.kid !== kid) return { reason: `token is unverifiable: error while executing keyfunc: invalid kid: ${header.kid}` };
      if (alg === 'HS256') return { reason: 'token signature is invalid: key is of invalid type' };
      key = publicKey ?? jwks.keys[0]!;
    } else if (alg === 'HS256') {
      key = hsKey;
    } else {
      return { reason: 'token is unverifiable: error while executing keyfunc: missing kid' };
    }
    try {
      await compactVerify(token, key as Uint8Array, { algorithms: [alg] });
    } catch {
      return { reason: `token signature is invalid: ${alg === 'HS256' ? 'signature is invalid' : 'crypto/ecdsa: verification error'}` };
    }
    const now = Date.now() / 1000;
    if (typeof claims.exp === 'number' && now >= claims.exp) return { reason: 'token has invalid claims: token is expired' };
    if (typeof claims.nbf === 'number' && now < claims.nbf) return { reason: 'token has invalid claims: token is not valid yet' };
    return { claims };
  };

  /** GoTrue's requireAuthentication and maybeLoadUserOrSession: the bearer's user and session. */
  const authenticate = async (req: IncomingMessage): Promise<{ user: UserRow; claims: Record<string, unknown>; sessionId: string | null }> => {
    const token = /^[Bb]earer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token) throw new AuthError(401, 'no_authorization', 'This endpoint requires a Bearer token');
    const parsed = await parseClaims(token);
    if ('reason' in parsed) throw new AuthError(403, 'bad_jwt', `invalid JWT: unable to parse or verify signature, ${parsed.reason}`);
    const { claims } = parsed;
    const sub = claims.sub;
    if (typeof sub !== 'string' || sub === '') throw new AuthError(403, 'bad_jwt', 'invalid claim: missing sub claim');
    if (!UUID.test(sub)) throw new AuthError(400, 'bad_jwt', 'invalid claim: sub claim must be a UUID');
    const sid = typeof claims.session_id === 'string' && claims.session_id !== '' && claims.session_id !== '00000000-0000-0000-0000-000000000000' ? claims.session_id : null;
    if (!sql) {
      const now = new Date();
      const user: UserRow = {
        id: sub, aud: 'authenticated', role: 'authenticated', email: null, encrypted_password: null, email_confirmed_at: null, last_sign_in_at: null,
        raw_app_meta_data: null, raw_user_meta_data: null, created_at: now, updated_at: now, is_anonymous: false,
      };
      return { user, claims, sessionId: sid };
    }
    const user = await findUser(sql, sub);
    if (!user) throw new AuthError(403, 'user_not_found', 'User from sub claim in JWT does not exist');
    if (sid !== null) {
      if (!UUID.test(sid)) throw new AuthError(403, 'bad_jwt', 'invalid claim: session_id claim must be a UUID');
      if (!(await sessionExists(sql, sid))) throw new AuthError(403, 'session_not_found', 'Session from session_id claim in JWT does not exist');
    }
    return { user, claims, sessionId: sid };
  };

  const needSql = (): Sql => {
    if (!sql) throw new AuthError(500, 'unexpected_failure', 'This local Auth was started without a database');
    return sql;
  };

  const readBody = (req: IncomingMessage): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) reject(new AuthError(413, 'validation_failed', 'Request body too large'));
        else chunks.push(c);
      });
      req.on('error', reject);
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (text.trim() === '') return resolve({});
        try {
          const v = JSON.parse(text) as unknown;
          if (v && typeof v === 'object' && !Array.isArray(v)) return resolve(v as Record<string, unknown>);
        } catch {
          // below
        }
        reject(new AuthError(400, 'bad_json', 'Could not parse request body as JSON'));
      });
    });

  const str = (v: unknown) => (typeof v === 'string' ? v : '');

  /** GoTrue's validateEmail: lower-cased, or why not. */
  const validEmail = (raw: string): string => {
    const email = raw.trim();
    if (email === '') throw new AuthError(400, 'validation_failed', 'An email address is required');
    if (email.length > 255) throw new AuthError(400, 'validation_failed', 'An email address is too long');
    if (!EMAIL.test(email)) throw new AuthError(400, 'validation_failed', 'Unable to validate email address: invalid format');
    return email.toLowerCase();
  };

  const signup = async (body: Record<string, unknown>) => {
    const db = needSql();
    const password = str(body.password);
    if (password === '') throw new AuthError(400, 'validation_failed', 'Signup requires a valid password');
    // Go's len(): bytes, not characters.
    const bytes = Buffer.byteLength(password, 'utf8');
    if (bytes > MAX_PASSWORD_LENGTH) throw new AuthError(400, 'validation_failed', `Password cannot be longer than ${MAX_PASSWORD_LENGTH} characters`);
    if (bytes < minLength) throw new AuthError(422, 'weak_password', `Password should be at least ${minLength} characters.`, { weak_password: { reasons: ['length'] } });
    if (str(body.phone) !== '') throw new AuthError(400, 'phone_provider_disabled', 'Phone signups are disabled');
    const email = validEmail(str(body.email));
    const data = body.data && typeof body.data === 'object' && !Array.isArray(body.data) ? (body.data as Record<string, unknown>) : {};
    const user = await createPasswordUser(db, { email, password, userMetadata: data });
    if (!user) throw new AuthError(422, 'user_already_exists', 'User already registered');
    return sessionBody(user, await createSession(db, user.id));
  };

  const passwordGrant = async (body: Record<string, unknown>) => {
    const db = needSql();
    const email = str(body.email).trim();
    if (email !== '' && str(body.phone) !== '') throw new AuthError(400, 'validation_failed', 'Only an email address or phone number should be provided on login.');
    if (email === '') throw new AuthError(400, 'validation_failed', 'missing email or phone');
    const user = await findUserByEmail(db, email);
    // Unknown user, no password, wrong password: one answer, and one hash each (verifyPassword), so neither tells.
    const valid = await verifyPassword(str(body.password), user?.encrypted_password ?? null);
    if (!user || !valid) throw new AuthError(400, 'invalid_credentials', 'Invalid login credentials');
    if (!user.email_confirmed_at) throw new AuthError(400, 'email_not_confirmed', 'Email not confirmed');
    return sessionBody(user, await createSession(db, user.id));
  };

  const refreshGrant = async (body: Record<string, unknown>) => {
    const db = needSql();
    const token = str(body.refresh_token);
    if (!isWellFormedRefreshToken(token)) throw new AuthError(400, 'validation_failed', 'Refresh token is not valid');
    const out = await refreshSession(db, token, reuseInterval);
    if (out.kind === 'not_found') throw new AuthError(400, 'refresh_token_not_found', 'Invalid Refresh Token: Refresh Token Not Found');
    if (out.kind === 'no_session') throw new AuthError(400, 'session_not_found', 'Invalid Refresh Token: No Valid Session Found');
    if (out.kind !== 'ok') throw new AuthError(400, 'refresh_token_already_used', 'Invalid Refresh Token: Already Used');
    return sessionBody(out.user, out.session);
  };

  const route = async (req: IncomingMessage, u: URL): Promise<{ status: number; body?: unknown }> => {
    const path = u.pathname;
    const is = (method: string, p: string) => req.method === method && path === `/auth/v1${p}`;
    if (is('GET', '/user')) {
      userRequests++;
      const { user } = await authenticate(req);
      return { status: 200, body: userJson(user) };
    }
    if (is('POST', '/logout')) {
      const scope = u.searchParams.get('scope') ?? 'global';
      if (scope !== 'global' && scope !== 'local' && scope !== 'others') throw new AuthError(400, 'validation_failed', `Unsupported logout scope "${scope}"`);
      const { user, sessionId } = await authenticate(req);
      await endSessions(needSql(), user.id, sessionId, scope);
      return { status: 204 };
    }
    if (is('POST', '/signup')) {
      const body = await readBody(req);
      // Neither email nor phone is an anonymous sign-up, off as on a new project (and limited apart).
      if (str(body.email) === '' && str(body.phone) === '') throw new AuthError(422, 'anonymous_provider_disabled', 'Anonymous sign-ins are disabled');
      rateLimit(signUpLimiter, req);
      return { status: 200, body: await signup(body) };
    }
    if (is('POST', '/token')) {
      const grant = u.searchParams.get('grant_type');
      if (grant !== 'password' && grant !== 'refresh_token') throw new AuthError(400, 'invalid_credentials', 'unsupported_grant_type');
      rateLimit(tokenLimiter, req);
      const body = await readBody(req);
      return { status: 200, body: grant === 'password' ? await passwordGrant(body) : await refreshGrant(body) };
    }
    throw new AuthError(404, 'not_found', 'Not Found');
  };

  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://auth');
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { ...CORS, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    if (req.method === 'OPTIONS') return send(204, undefined, { 'access-control-max-age': '86400' });
    if (req.method === 'GET' && (u.pathname === '/auth/v1/.well-known/jwks.json' || u.pathname === '/auth/v1/jwks')) return send(200, jwks);
    if (!u.pathname.startsWith('/auth/v1/')) return send(404, { message: 'no Route matched with those values' });
    // The gateway's key check comes first.
    const apikey = req.headers.apikey ?? u.searchParams.get('apikey') ?? undefined;
    if (typeof apikey !== 'string' || apikey === '') {
      if (u.pathname === '/auth/v1/user') userRequests++;
      return send(401, { message: 'No API key found in request', hint: 'No `apikey` request header or url param was found.' });
    }
    if (!accepted.has(apikey)) {
      if (u.pathname === '/auth/v1/user') userRequests++;
      return send(401, { message: 'Invalid API key', hint: 'Double check your Supabase `anon` or `service_role` API key.' });
    }
    const versioned = (req.headers[API_VERSION_HEADER] as string | undefined) === '2024-01-01';
    const echo: Record<string, string> = versioned ? { [API_VERSION_HEADER]: '2024-01-01' } : {};
    route(req, u).then(
      (r) => send(r.status, r.body, echo),
      (e: unknown) => {
        const err = e instanceof AuthError ? e : new AuthError(500, 'unexpected_failure', 'Unexpected failure, please check server logs for more information');
        if (!(e instanceof AuthError)) console.error('local auth:', e);
        const body = versioned ? { code: err.code, message: err.message, ...err.extra } : { code: err.status, error_code: err.code, msg: err.message, ...err.extra };
        send(err.status, body, { ...echo, 'x-sb-error-code': err.code });
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  return {
    url,
    jwks,
    legacySecret,
    apiKeys,
    userRequests: () => userRequests,
    async createUser(o) {
      const user = await createPasswordUser(needSql(), { email: validEmail(o.email), password: o.password, appMetadata: o.appMetadata });
      if (!user) throw new Error(`local auth: ${o.email} is already registered`);
      return user.id;
    },
    signEs256: (userId, o) => sign('ES256', userId, o),
    signHs256: (userId, o) => sign('HS256', userId, o),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
