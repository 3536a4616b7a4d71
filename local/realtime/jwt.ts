// Token checks of the Realtime stand-in, as supabase/realtime makes them
// (RealtimeWeb.JwtVerification and ChannelsAuthorization.authorize_conn):
// signature by the project's JWKS (asymmetric keys found by kid), `exp` in the
// future, `iat` a number when present, and `role` and `exp` both required.
// Each refusal carries the reason the real server names it by and its message.
import { decodeJwt, decodeProtectedHeader, errors, importJWK, jwtVerify, type JWK } from 'jose';

export type TokenRefusal =
  | { reason: 'token_malformed'; code: 'MalformedJWT'; message: string }
  | { reason: 'expired_token'; code: 'InvalidJWTToken'; message: string }
  | { reason: 'missing_claims'; code: 'InvalidJWTToken'; message: string }
  | { reason: 'signature_error'; code: 'JwtSignatureError'; message: string }
  | { reason: 'error_generating_signer'; code: 'JwtSignerError'; message: string };

export type Claims = Record<string, unknown> & { role: string; exp: number };

export type TokenCheck = { ok: true; claims: Claims } | { ok: false; refusal: TokenRefusal };

const ASYMMETRIC: Record<string, string> = { RS256: 'RSA', RS384: 'RSA', RS512: 'RSA', ES256: 'EC', ES384: 'EC', ES512: 'EC', EdDSA: 'OKP', Ed25519: 'OKP' };

const refuse = (refusal: TokenRefusal): TokenCheck => ({ ok: false, refusal });

/** Checks a user (or anon) token against the project's JWKS. */
export async function checkToken(token: string, jwks: { keys: JWK[] }): Promise<TokenCheck> {
  const cleaned = token.replace(/\s/g, '');
  let header;
  try {
    decodeJwt(cleaned);
    header = decodeProtectedHeader(cleaned);
  } catch {
    return refuse({ reason: 'token_malformed', code: 'MalformedJWT', message: 'The token provided is not a valid JWT' });
  }
  const alg = String(header.alg ?? '');
  const kty = ASYMMETRIC[alg];
  const kid = typeof header.kid === 'string' ? header.kid : undefined;
  const jwk = kty && kid ? jwks.keys.find((k) => k.kty === kty && k.kid === kid) : undefined;
  if (!jwk) {
    // HS* tokens would be checked against the project's JWT secret, which the local project has none of.
    if (alg.startsWith('HS')) return refuse({ reason: 'signature_error', code: 'JwtSignatureError', message: 'Failed to validate JWT signature' });
    return refuse({
      reason: 'error_generating_signer',
      code: 'JwtSignerError',
      message: kid
        ? `Failed to generate JWT signer for key ID (kid) "${kid}", check your JWT secret or JWKS configuration`
        : 'Failed to generate JWT signer, check your JWT secret or JWKS configuration',
    });
  }
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(cleaned, await importJWK(jwk, alg), { algorithms: [alg] }));
  } catch (e) {
    if (e instanceof errors.JWTExpired) {
      const exp = Number((e.payload as { exp?: unknown }).exp);
      return refuse({ reason: 'expired_token', code: 'InvalidJWTToken', message: `Token has expired ${Math.floor(Date.now() / 1000) - exp} seconds ago` });
    }
    if (e instanceof errors.JWSSignatureVerificationFailed) {
      return refuse({ reason: 'signature_error', code: 'JwtSignatureError', message: 'Failed to validate JWT signature' });
    }
    return refuse({ reason: 'token_malformed', code: 'MalformedJWT', message: 'The token provided is not a valid JWT' });
  }
  if (typeof payload.role !== 'string' || typeof payload.exp !== 'number') {
    return refuse({ reason: 'missing_claims', code: 'InvalidJWTToken', message: 'Fields `role` and `exp` are required in JWT' });
  }
  return { ok: true, claims: { ...payload, exp: Math.round(payload.exp) } as Claims };
}
