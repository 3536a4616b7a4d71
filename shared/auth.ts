// Verifies Supabase user access tokens the way supabase-js `auth.getClaims()` does,
// with nothing the user has to configure on hosted Supabase:
// - asymmetric tokens (ES256/RS256/EdDSA with a `kid`) against the project's JWKS:
//   inline (SUPABASE_JWKS, which hosted provides) and/or fetched from
//   SUPABASE_URL/auth/v1/.well-known/jwks.json (cached);
// - legacy HS256 tokens (and asymmetric ones without a `kid`) by asking Auth:
//   GET SUPABASE_URL/auth/v1/user with the token and the project's publishable or
//   anon key, so the JWT secret is never needed. A positive answer is cached
//   briefly (≤ 30 s, never past the token's `exp`).
// Claims are then checked the same way on both paths: exp (required), nbf, aud
// `authenticated`, role `authenticated`, sub a UUID, iss when configured.
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
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
  /** Called once per question sent to Auth (tests count them). */
  onAuthRequest?: () => void;
}

export interface VerifiedUser {
  userId: string;
  claims: JWTPayload & { sub: string; role: string };
}

export type VerifyUser = (token: string | null) => Promise<VerifiedUser>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ASYMMETRIC = ['ES256', 'RS256', 'EdDSA'];
const CLOCK_TOLERANCE_S = 5;
const AUTH_CACHE_MAX = 1000;
const AUTH_CACHE_TTL_MS = 30_000;

/** Normalises a JWKS given as `{keys: [...]}` or as a bare array of keys (both occur). */
export function parseJwks(text: string): JSONWebKeySet {
  const parsed = JSON.parse(text) as unknown;
  const keys = Array.isArray(parsed) ? parsed : (parsed as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw new Error('not a JSON Web Key Set');
  return { keys } as JSONWebKeySet;
}

/** Builds a verifier; every failure is a 401 UNAUTHENTICATED without details of the token. */
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
  const authCache = new Map<string, number>(); // token -> cached until (ms)
  const unauthenticated = (message: string) => new HttpError(401, 'UNAUTHENTICATED', message);
  const invalid = () => unauthenticated('Invalid access token.');
  const expired = () => unauthenticated('Access token expired: sign in again.');

  /** The claim checks jose applies on the JWKS path, for a payload Auth vouched for. */
  const checkClaims = (p: JWTPayload): void => {
    const now = Math.floor(Date.now() / 1000);
    if (typeof p.exp !== 'number' || typeof p.sub !== 'string') throw invalid();
    if (p.exp <= now - CLOCK_TOLERANCE_S) throw expired();
    if (p.nbf !== undefined && (typeof p.nbf !== 'number' || p.nbf > now + CLOCK_TOLERANCE_S)) throw invalid();
    const aud = Array.isArray(p.aud) ? p.aud : [p.aud];
    if (!aud.includes(audience)) throw invalid();
    if (config.issuer !== undefined && p.iss !== config.issuer) throw invalid();
  };

  const checkUser = (p: JWTPayload): void => {
    if (typeof p.sub !== 'string' || !UUID.test(p.sub) || p.role !== 'authenticated') {
      throw unauthenticated('Access token is not a signed-in user.');
    }
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

  const viaAuth = async (token: string, payload: JWTPayload): Promise<JWTPayload> => {
    // Cheap answers first: expired, foreign-audience or non-user tokens never reach Auth.
    checkClaims(payload);
    checkUser(payload);
    const cachedUntil = authCache.get(token);
    if (cachedUntil !== undefined && cachedUntil > Date.now()) return payload;
    config.onAuthRequest?.();
    let res: Response;
    try {
      res = await fetch(`${authUrl}/user`, {
        headers: { Authorization: `Bearer ${token}`, ...(config.apiKey ? { apikey: config.apiKey } : {}) },
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch {
      throw new HttpError(503, 'AUTH_UNAVAILABLE', 'Could not verify the access token right now; try again.');
    }
    if (res.status >= 500 || res.status === 429) {
      await res.body?.cancel();
      throw new HttpError(503, 'AUTH_UNAVAILABLE', 'Could not verify the access token right now; try again.');
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw invalid();
    }
    const user = (await res.json().catch(() => null)) as { id?: unknown } | null;
    if (!user || user.id !== payload.sub) throw invalid();
    if (authCache.size >= AUTH_CACHE_MAX) {
      const now = Date.now();
      for (const [t, until] of authCache) if (until <= now) authCache.delete(t);
      if (authCache.size >= AUTH_CACHE_MAX) authCache.delete(authCache.keys().next().value!);
    }
    authCache.set(token, Math.min(Date.now() + AUTH_CACHE_TTL_MS, (payload.exp as number) * 1000));
    return payload;
  };

  return async (token) => {
    if (!token) throw unauthenticated('Missing bearer token: sign in and send your access token.');
    if (token.length > 16_384) throw invalid();
    let alg: string | undefined;
    let kid: string | undefined;
    let unverified: JWTPayload;
    try {
      ({ alg, kid } = decodeProtectedHeader(token));
      unverified = decodeJwt(token);
    } catch {
      throw invalid();
    }
    let payload: JWTPayload;
    try {
      if (alg && ASYMMETRIC.includes(alg) && kid && keySets.length > 0) payload = await viaJwks(token);
      else if (alg === 'HS256' && secret) payload = await viaSecret(token);
      else if ((alg === 'HS256' || (alg && ASYMMETRIC.includes(alg))) && authUrl) payload = await viaAuth(token, unverified);
      else throw invalid();
    } catch (e) {
      if (e instanceof HttpError) throw e;
      throw (e as { code?: string }).code === 'ERR_JWT_EXPIRED' ? expired() : invalid();
    }
    checkUser(payload);
    return { userId: payload.sub as string, claims: payload as VerifiedUser['claims'] };
  };
}
