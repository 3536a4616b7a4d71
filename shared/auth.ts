// Verifies Supabase user access tokens the way supabase-js `auth.getClaims()` does,
// with nothing the user has to configure on hosted Supabase:
// - asymmetric tokens (ES256/RS256/EdDSA with a `kid`) against the project's JWKS:
//   inline (SUPABASE_JWKS, which hosted provides) and/or fetched from
//   SUPABASE_URL/auth/v1/.well-known/jwks.json (cached);
// - legacy HS256 tokens by asking Auth: GET SUPABASE_URL/auth/v1/user with the
//   token and the project's publishable or anon key, so the JWT secret is never
//   needed. A positive answer is cached briefly (≤ 30 s, never past the token's
//   `exp`), a negative one for 60 s; both caches are bounded and keyed by a
//   SHA-256 of the token, never the token itself.
// Asking Auth costs a request to another service, and anyone can send a token,
// so nothing that cannot be a valid token gets that far: every token is checked
// for its shape first (three base64url parts, a JSON header with an allowed
// `alg`, a signature of that algorithm's length, a JSON payload) and for its
// claims, the same way on both paths: exp (required), nbf, aud `authenticated`,
// role `authenticated`, sub a UUID, iss when configured. An asymmetric token
// without a `kid` is refused outright (Auth refuses those too: "missing kid").
// What still has to ask Auth is deduplicated (one request in flight per token),
// limited in rate (a token bucket: AUTH_REQUEST_LIMITS) and in concurrency, so a
// flood of distinct forged tokens cannot turn into a flood of requests to Auth.
// Answers: 401 TOKEN_EXPIRED when the token has expired (refresh the session
// and retry), 401 UNAUTHENTICATED when it is missing or invalid, 503 AUTH_UNAVAILABLE only when Auth cannot be reached
// or fails (5xx, its own 429), 429 RATE_LIMITED (with Retry-After) when the
// limit on asking Auth is reached.
import {
  base64url,
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
} from 'jose';
import { HttpError } from './http.ts';

export interface AuthConfig {
  /** JWKS endpoint, e.g. SUPABASE_URL/auth/v1/.well-known/jwks.json. */
  jwksUrl?: string;
  /** Inline JWKS (hosted Supabase sets SUPABASE_JWKS). */
  jwks?: JSONWebKeySet;
  /** Auth's base URL (SUPABASE_URL/auth/v1): HS256 tokens are verified by asking it (GET /user). */
  authUrl?: string;
  /** Key sent as `apikey` to Auth (publishable or anon; a secret key works too). */
  apiKey?: string;
  /** Legacy HS256 secret, to verify such tokens locally instead of asking Auth (self-hosting, tests). */
  legacySecret?: string;
  /** Expected `aud` (Supabase: authenticated). */
  audience?: string;
  /** Expected `iss`, when set. */
  issuer?: string;
  /** Timeout of one request to Auth or the JWKS endpoint (default 5000 ms). */
  timeoutMs?: number;
  /** How often this verifier may ask Auth (default AUTH_REQUEST_LIMITS). */
  authLimits?: Partial<AuthRequestLimits>;
  /** Called once per question sent to Auth (tests count them). */
  onAuthRequest?: () => void;
}

export interface AuthRequestLimits {
  /** Requests to Auth per second, sustained. */
  perSecond: number;
  /** Requests to Auth at once after a quiet spell. */
  burst: number;
  /** A request waits at most this long for its turn; beyond, it is answered 429 RATE_LIMITED. */
  maxWaitMs: number;
  /** Requests to Auth in flight at once. */
  concurrency: number;
}

/** Per verifier (one per isolate): at most burst + perSecond × maxWaitMs / 1000 requests at once, then perSecond. */
export const AUTH_REQUEST_LIMITS: Readonly<AuthRequestLimits> = { perSecond: 5, burst: 10, maxWaitMs: 2000, concurrency: 4 };

export interface VerifiedUser {
  userId: string;
  claims: JWTPayload & { sub: string; role: string };
}

export type VerifyUser = (token: string | null) => Promise<VerifiedUser>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ASYMMETRIC = ['ES256', 'RS256', 'EdDSA'];
/** Signature length in bytes of each accepted algorithm: [min, max] (EdDSA: Ed25519 or Ed448; RS256: 2048- to 8192-bit keys). */
const SIGNATURE_BYTES: Record<string, readonly [number, number]> = { HS256: [32, 32], ES256: [64, 64], EdDSA: [64, 114], RS256: [256, 1024] };
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const MAX_TOKEN_LENGTH = 16_384;
const CLOCK_TOLERANCE_S = 5;
const AUTH_CACHE_MAX = 1000;
const AUTH_CACHE_TTL_MS = 30_000;
const AUTH_NEGATIVE_TTL_MS = 60_000;

/** Normalises a JWKS given as `{keys: [...]}` or as a bare array of keys (both occur). */
export function parseJwks(text: string): JSONWebKeySet {
  const parsed = JSON.parse(text) as unknown;
  const keys = Array.isArray(parsed) ? parsed : (parsed as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw new Error('not a JSON Web Key Set');
  return { keys } as JSONWebKeySet;
}

/** Bytes a base64url text without padding decodes to (-1: no such text). */
function base64urlBytes(part: string): number {
  return part.length % 4 === 1 ? -1 : Math.floor((part.length * 3) / 4);
}

/** What Auth said about a token. */
type Verdict = 'valid' | 'invalid' | 'expired';

/** A bounded map of verdicts by token hash, each until a time; the oldest entry goes first. */
class VerdictCache {
  private readonly entries = new Map<string, { until: number; verdict: Verdict }>();
  get(key: string): Verdict | undefined {
    const hit = this.entries.get(key);
    if (hit && hit.until > Date.now()) return hit.verdict;
    if (hit) this.entries.delete(key);
    return undefined;
  }
  set(key: string, verdict: Verdict, until: number): void {
    if (this.entries.size >= AUTH_CACHE_MAX) {
      const now = Date.now();
      for (const [k, e] of this.entries) if (e.until <= now) this.entries.delete(k);
      if (this.entries.size >= AUTH_CACHE_MAX) this.entries.delete(this.entries.keys().next().value!);
    }
    this.entries.delete(key);
    this.entries.set(key, { until, verdict });
  }
}

/** A token bucket in front of a bounded number of places: the gate every request to Auth passes. */
class AuthGate {
  private tokens: number;
  private last = Date.now();
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limits: AuthRequestLimits) {
    this.tokens = limits.burst;
  }

  private busy(seconds: number): HttpError {
    const s = Math.max(1, Math.ceil(seconds));
    return new HttpError(429, 'RATE_LIMITED', `Too many sign-ins to check right now: try again in ${s} s.`, { retryAfterSeconds: s }, { 'Retry-After': String(s) });
  }

  /** Waits for this request's turn (or refuses it at once); resolves with the function that ends it. */
  async enter(): Promise<() => void> {
    const { perSecond, burst, maxWaitMs, concurrency } = this.limits;
    const now = Date.now();
    this.tokens = Math.min(burst, this.tokens + ((now - this.last) / 1000) * perSecond);
    this.last = now;
    const waitMs = this.tokens >= 1 ? 0 : ((1 - this.tokens) / perSecond) * 1000;
    if (waitMs > maxWaitMs) throw this.busy(waitMs / 1000);
    if (this.active >= concurrency && this.waiting.length >= concurrency * 4) throw this.busy(1);
    this.tokens -= 1; // reserved now, even while waiting: later requests wait longer
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    if (this.active < concurrency) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve)); // a leaving request hands over its place
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    };
  }
}

async function tokenHash(token: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Builds a verifier. An expired token is a 401 TOKEN_EXPIRED, a missing or invalid one a 401
 * UNAUTHENTICATED (never more about the token); 503 AUTH_UNAVAILABLE and 429 RATE_LIMITED as above.
 */
export function createUserVerifier(config: AuthConfig): VerifyUser {
  const timeoutMs = config.timeoutMs ?? 5000;
  const keySets = [
    config.jwks && config.jwks.keys.length > 0 ? createLocalJWKSet(config.jwks) : null,
    config.jwksUrl ? createRemoteJWKSet(new URL(config.jwksUrl), { timeoutDuration: timeoutMs, cooldownDuration: 30_000 }) : null,
  ].filter((k): k is NonNullable<typeof k> => k !== null);
  const secret = config.legacySecret ? new TextEncoder().encode(config.legacySecret) : null;
  const audience = config.audience ?? 'authenticated';
  const options = { audience, issuer: config.issuer, clockTolerance: CLOCK_TOLERANCE_S, requiredClaims: ['exp', 'sub'] };
  const authUrl = config.authUrl?.replace(/\/+$/, '');
  const accepted = new VerdictCache(); // token hash -> 'valid', until ≤ 30 s and never past exp
  const refused = new VerdictCache(); // token hash -> 'invalid' | 'expired', for 60 s (apart, so refusals cannot evict users)
  const inFlight = new Map<string, Promise<Verdict>>(); // token hash -> the one question to Auth about it
  const gate = new AuthGate({ ...AUTH_REQUEST_LIMITS, ...config.authLimits });
  const unauthenticated = (message: string) => new HttpError(401, 'UNAUTHENTICATED', message);
  const invalid = () => unauthenticated('Invalid access token: sign in again.');
  const expired = () => new HttpError(401, 'TOKEN_EXPIRED', 'Access token expired: refresh the session (supabase-js does it) or sign in again.');
  const unavailable = () => new HttpError(503, 'AUTH_UNAVAILABLE', 'Could not verify the access token right now; try again.');

  /** The claim checks jose applies on the JWKS path; run on every token before its signature is looked at. */
  const checkClaims = (p: JWTPayload): void => {
    const now = Math.floor(Date.now() / 1000);
    if (typeof p.exp !== 'number' || !Number.isFinite(p.exp) || typeof p.sub !== 'string') throw invalid();
    if (p.exp <= now - CLOCK_TOLERANCE_S) throw expired();
    if (p.nbf !== undefined && (typeof p.nbf !== 'number' || p.nbf > now + CLOCK_TOLERANCE_S)) throw invalid();
    if (p.iat !== undefined && typeof p.iat !== 'number') throw invalid();
    const aud = Array.isArray(p.aud) ? p.aud : [p.aud];
    if (!aud.includes(audience)) throw invalid();
    if (config.issuer !== undefined && p.iss !== config.issuer) throw invalid();
  };

  const checkUser = (p: JWTPayload): void => {
    if (typeof p.sub !== 'string' || !UUID.test(p.sub) || p.role !== 'authenticated') {
      throw unauthenticated('Access token is not a signed-in user.');
    }
  };

  /** Refuses what cannot be a valid user token without any key: its shape, header and claims. */
  const inspect = (token: string): { alg: string; kid: string | undefined; payload: JWTPayload } => {
    if (token.length > MAX_TOKEN_LENGTH) throw invalid();
    const parts = token.split('.');
    if (parts.length !== 3 || !parts.every((part) => BASE64URL.test(part))) throw invalid();
    let header: unknown;
    let payload: JWTPayload;
    try {
      header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(base64url.decode(parts[0]!)));
      payload = decodeJwt(token);
    } catch {
      throw invalid();
    }
    if (!header || typeof header !== 'object' || Array.isArray(header)) throw invalid();
    const { alg, kid, typ, crit } = header as Record<string, unknown>;
    if (typeof alg !== 'string' || !Object.hasOwn(SIGNATURE_BYTES, alg)) throw invalid();
    if (kid !== undefined && (typeof kid !== 'string' || kid.length === 0 || kid.length > 256)) throw invalid();
    if (typ !== undefined && (typeof typ !== 'string' || typ.toUpperCase() !== 'JWT')) throw invalid();
    if (crit !== undefined) throw invalid();
    // Auth itself finds the key of an asymmetric token by its kid only ("missing kid" otherwise).
    if (ASYMMETRIC.includes(alg) && kid === undefined) throw invalid();
    const [min, max] = SIGNATURE_BYTES[alg]!;
    const bytes = base64urlBytes(parts[2]!);
    if (bytes < min || bytes > max) throw invalid();
    checkClaims(payload);
    checkUser(payload);
    return { alg, kid: kid as string | undefined, payload };
  };

  const viaJwks = async (token: string): Promise<JWTPayload> => {
    for (const [i, keys] of keySets.entries()) {
      try {
        return (await jwtVerify(token, keys, { ...options, algorithms: ASYMMETRIC })).payload;
      } catch (e) {
        const last = i === keySets.length - 1;
        if (last || (e as { code?: string }).code !== 'ERR_JWKS_NO_MATCHING_KEY') throw e;
      }
    }
    throw invalid();
  };

  const viaSecret = async (token: string): Promise<JWTPayload> =>
    (await jwtVerify(token, secret!, { ...options, algorithms: ['HS256'] })).payload;

  /** One question to Auth, through the gate: its verdict, or AUTH_UNAVAILABLE / RATE_LIMITED. */
  const askAuth = async (token: string, payload: JWTPayload, key: string): Promise<Verdict> => {
    const leave = await gate.enter();
    let verdict: Verdict;
    try {
      config.onAuthRequest?.();
      let res: Response;
      try {
        res = await fetch(`${authUrl}/user`, {
          headers: { Authorization: `Bearer ${token}`, ...(config.apiKey ? { apikey: config.apiKey } : {}) },
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch {
        throw unavailable();
      }
      if (res.status >= 500 || res.status === 429) {
        await res.body?.cancel();
        throw unavailable();
      }
      const body = (await res.json().catch(() => null)) as { id?: unknown; error_code?: unknown; msg?: unknown } | null;
      if (res.status === 200) verdict = body && body.id === payload.sub ? 'valid' : 'invalid';
      // GoTrue: 403 bad_jwt "invalid JWT: unable to parse or verify signature, token has invalid claims: token is expired".
      else verdict = body?.error_code === 'bad_jwt' && typeof body.msg === 'string' && /\bexpired\b/i.test(body.msg) ? 'expired' : 'invalid';
    } finally {
      leave();
    }
    if (verdict === 'valid') accepted.set(key, verdict, Math.min(Date.now() + AUTH_CACHE_TTL_MS, (payload.exp as number) * 1000));
    else refused.set(key, verdict, Date.now() + AUTH_NEGATIVE_TTL_MS);
    return verdict;
  };

  const viaAuth = async (token: string, payload: JWTPayload): Promise<JWTPayload> => {
    const key = await tokenHash(token);
    let verdict = accepted.get(key) ?? refused.get(key);
    if (verdict === undefined) {
      let question = inFlight.get(key);
      if (!question) {
        question = askAuth(token, payload, key).finally(() => inFlight.delete(key));
        inFlight.set(key, question);
      }
      verdict = await question;
    }
    if (verdict === 'expired') throw expired();
    if (verdict === 'invalid') throw invalid();
    return payload;
  };

  return async (token) => {
    if (!token) throw unauthenticated('Missing bearer token: sign in and send your access token.');
    const { alg, kid, payload: unverified } = inspect(token);
    let payload: JWTPayload;
    try {
      if (ASYMMETRIC.includes(alg) && keySets.length > 0) payload = await viaJwks(token);
      else if (alg === 'HS256' && secret) payload = await viaSecret(token);
      else if ((alg === 'HS256' || (ASYMMETRIC.includes(alg) && kid !== undefined)) && authUrl) payload = await viaAuth(token, unverified);
      else throw invalid();
    } catch (e) {
      if (e instanceof HttpError) throw e;
      throw (e as { code?: string }).code === 'ERR_JWT_EXPIRED' ? expired() : invalid();
    }
    checkUser(payload);
    return { userId: payload.sub as string, claims: payload as VerifiedUser['claims'] };
  };
}
