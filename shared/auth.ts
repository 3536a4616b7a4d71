// Verifies Supabase user JWTs: asymmetric keys from the project's JWKS (by URL
// or inline JSON) and, when configured, the legacy HS256 secret.
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { HttpError } from './http.ts';

export interface AuthConfig {
  /** JWKS endpoint, e.g. SUPABASE_URL/auth/v1/.well-known/jwks.json. */
  jwksUrl?: string;
  /** Inline JWKS JSON (SUPABASE_JWKS). */
  jwks?: JSONWebKeySet;
  /** Legacy HS256 JWT secret. */
  legacySecret?: string;
  /** Expected `aud` (Supabase: authenticated). */
  audience?: string;
  /** Expected `iss`, when set. */
  issuer?: string;
}

export interface VerifiedUser {
  userId: string;
  claims: JWTPayload & { sub: string; role: string };
}

export type VerifyUser = (token: string | null) => Promise<VerifiedUser>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Builds a verifier; every failure is a 401 UNAUTHENTICATED without details of the token. */
export function createUserVerifier(config: AuthConfig): VerifyUser {
  const keySets = [
    config.jwks ? createLocalJWKSet(config.jwks) : null,
    config.jwksUrl ? createRemoteJWKSet(new URL(config.jwksUrl), { timeoutDuration: 5000, cooldownDuration: 30_000 }) : null,
  ].filter((k): k is NonNullable<typeof k> => k !== null);
  const secret = config.legacySecret ? new TextEncoder().encode(config.legacySecret) : null;
  const options = { audience: config.audience ?? 'authenticated', issuer: config.issuer, clockTolerance: 5, requiredClaims: ['exp', 'sub'] };
  const unauthenticated = (message: string) => new HttpError(401, 'UNAUTHENTICATED', message);

  return async (token) => {
    if (!token) throw unauthenticated('Missing bearer token: sign in and send your access token.');
    if (token.length > 16_384) throw unauthenticated('Invalid access token.');
    let alg: string | undefined;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw unauthenticated('Invalid access token.');
    }
    let payload: JWTPayload | null = null;
    try {
      if (alg === 'HS256') {
        if (!secret) throw unauthenticated('Invalid access token.');
        payload = (await jwtVerify(token, secret, { ...options, algorithms: ['HS256'] })).payload;
      } else {
        for (const keys of keySets) {
          try {
            payload = (await jwtVerify(token, keys, { ...options, algorithms: ['ES256', 'RS256', 'EdDSA'] })).payload;
            break;
          } catch (e) {
            if (keySets.length === 1 || (e as { code?: string }).code !== 'ERR_JWKS_NO_MATCHING_KEY') throw e;
          }
        }
      }
    } catch (e) {
      if (e instanceof HttpError) throw e;
      const code = (e as { code?: string }).code;
      throw unauthenticated(code === 'ERR_JWT_EXPIRED' ? 'Access token expired: sign in again.' : 'Invalid access token.');
    }
    if (!payload) throw unauthenticated('Invalid access token.');
    if (typeof payload.sub !== 'string' || !UUID.test(payload.sub) || payload.role !== 'authenticated') {
      throw unauthenticated('Access token is not a signed-in user.');
    }
    return { userId: payload.sub, claims: payload as VerifiedUser['claims'] };
  };
}
