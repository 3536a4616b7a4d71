// Hostile and valid user tokens for fuzzing the orchestrator's authentication:
// a key of our own in the verifier's JWKS lets us sign any claims (wrong
// audience, expired, wrong role...), plus tokens no verifier should accept
// (alg none, HS256 with the public key as secret, tampered payloads, garbage).
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import { createSigningKeys, type SigningKeys } from '../../local/supabase.ts';

export const TOKEN_KINDS = [
  'valid_owner', 'valid_other', 'valid_ghost', 'valid_supabase_key',
  'expired', 'not_yet_valid', 'wrong_key', 'unknown_kid', 'no_kid', 'wrong_audience', 'no_audience', 'no_exp',
  'role_anon', 'role_service', 'sub_not_uuid', 'no_sub', 'alg_none', 'hs256', 'hs256_public_key', 'tampered',
  'truncated', 'huge', 'garbage_jwt_shape',
] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];
/** Kinds the verifier must accept. */
export const VALID_KINDS: ReadonlySet<TokenKind> = new Set(['valid_owner', 'valid_other', 'valid_ghost', 'valid_supabase_key']);

export interface FuzzKeys {
  /** The JWKS the verifier trusts: the createSigningKeys key and ours. */
  jwks: { keys: JWK[] };
  supabase: SigningKeys;
  /** One token of each kind (owner = the user tokens are about). */
  tokens: Record<TokenKind, string>;
  /** Everything secret about them (for leak checks). */
  secrets: string[];
}

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** Builds the keys and one token of every kind for `ownerId` (and `otherId` for valid_other). */
export async function createFuzzKeys(ownerId: string, otherId: string): Promise<FuzzKeys> {
  const supabase = await createSigningKeys();
  const stranger = await createSigningKeys();
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = `fuzz-${randomUUID().slice(0, 8)}`;
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  const privateJwk = await exportJWK(privateKey);
  const now = Math.floor(Date.now() / 1000);
  const sign = (claims: JWTPayload, header: Record<string, unknown> = {}) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT', ...header }).sign(privateKey);
  const base = (sub: string): JWTPayload => ({ sub, role: 'authenticated', aud: 'authenticated', iat: now, exp: now + 3600 });
  const valid = await sign(base(ownerId));
  const [h, , s] = valid.split('.');
  const hsSecret = new TextEncoder().encode(JSON.stringify(publicJwk));
  const tokens: Record<TokenKind, string> = {
    valid_owner: valid,
    valid_other: await sign(base(otherId)),
    valid_ghost: await sign(base(randomUUID())),
    valid_supabase_key: await supabase.signUserToken(ownerId),
    expired: await sign({ ...base(ownerId), iat: now - 7200, exp: now - 3600 }),
    not_yet_valid: await sign({ ...base(ownerId), nbf: now + 3600 }),
    wrong_key: await stranger.signUserToken(ownerId),
    unknown_kid: await sign(base(ownerId), { kid: 'no-such-key' }),
    no_kid: await new SignJWT(base(ownerId)).setProtectedHeader({ alg: 'ES256', typ: 'JWT' }).sign(privateKey),
    wrong_audience: await sign({ ...base(ownerId), aud: 'service' }),
    no_audience: await sign({ sub: ownerId, role: 'authenticated', iat: now, exp: now + 3600 }),
    no_exp: await sign({ sub: ownerId, role: 'authenticated', aud: 'authenticated', iat: now }),
    role_anon: await sign({ ...base(ownerId), role: 'anon' }),
    role_service: await sign({ ...base(ownerId), role: 'service_role' }),
    sub_not_uuid: await sign(base(`${ownerId}' or '1'='1`)),
    no_sub: await sign({ role: 'authenticated', aud: 'authenticated', iat: now, exp: now + 3600 }),
    alg_none: `${b64({ alg: 'none', typ: 'JWT' })}.${b64(base(ownerId))}.`,
    hs256: await new SignJWT(base(ownerId)).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode('super-secret-jwt-token-with-at-least-32-characters')),
    hs256_public_key: await new SignJWT(base(ownerId)).setProtectedHeader({ alg: 'HS256', kid, typ: 'JWT' }).sign(hsSecret),
    tampered: `${h}.${b64(base(otherId))}.${s}`,
    truncated: valid.slice(0, -10),
    huge: `${h}.${b64({ ...base(ownerId), pad: 'x'.repeat(20_000) })}.${s}`,
    garbage_jwt_shape: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA',
  };
  return {
    jwks: { keys: [...supabase.jwks.keys, publicJwk] },
    supabase,
    tokens,
    secrets: [String(privateJwk.d), ...Object.values(tokens).map((t) => t.split('.')[2] ?? '').filter((x) => x.length > 20)],
  };
}
