// A local stand-in for the two Auth endpoints an edge function uses to verify a
// user's access token, on 127.0.0.1 only, answering as Supabase Auth (GoTrue)
// behind the API gateway does:
//   GET /auth/v1/.well-known/jwks.json  the project's public signing keys
//   GET /auth/v1/user                   the user of `Authorization: Bearer <token>`
//     (needs an `apikey` the project knows, as the gateway does; verifies the
//     token as GoTrue does — the key by `kid`, else the legacy HS256 secret for an
//     HS256 token, else "missing kid"; the signature; exp and nbf without leeway;
//     not the audience or role — and answers a bad token as GoTrue does:
//     403 {"code":403,"error_code":"bad_jwt","msg":"invalid JWT: unable to parse or
//     verify signature, <golang-jwt's reason>"}, e.g. "token is expired"; the user
//     must exist in auth.users when a database is given. Sessions are not checked.)
// Token signers for both kinds of project are included.
import { createServer, type Server } from 'node:http';
import { base64url, compactVerify, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import type { Sql } from '../../shared/db.ts';

export interface LocalAuth {
  /** The stand-in SUPABASE_URL (Auth lives under /auth/v1). */
  url: string;
  /** The public JWKS (what hosted puts in SUPABASE_JWKS). */
  jwks: { keys: JWK[] };
  /** The legacy HS256 secret (what a legacy project signs with; never given to the functions). */
  legacySecret: string;
  /** API keys the gateway accepts as `apikey`. */
  apiKeys: { anon: string; publishable: string; secret: string; serviceRole: string };
  /** Requests to /auth/v1/user so far. */
  userRequests(): number;
  signEs256(userId: string, opts?: TokenOptions): Promise<string>;
  signHs256(userId: string, opts?: TokenOptions): Promise<string>;
  close(): Promise<void>;
}

export interface TokenOptions {
  expiresInSeconds?: number;
  claims?: Record<string, unknown>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The algorithms golang-jwt knows (others are "unavailable"). */
const KNOWN_ALGS = new Set(['none', 'HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']);

function b64urlRandom(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url');
}

/** Starts the stand-in. With `sql`, /user also requires the user to exist in auth.users. */
export async function startLocalAuth(opts: { sql?: Sql } = {}): Promise<LocalAuth> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = `local-${b64urlRandom(6)}`;
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  const jwks = { keys: [jwk] };
  const legacySecret = b64urlRandom(32);
  const hsKey = new TextEncoder().encode(legacySecret);
  const apiKeys = {
    anon: `local-anon-${b64urlRandom(12)}`,
    publishable: `sb_publishable_${b64urlRandom(16)}`,
    secret: `sb_secret_${b64urlRandom(24)}`,
    serviceRole: `local-service-${b64urlRandom(12)}`,
  };
  const accepted = new Set(Object.values(apiKeys));
  let userRequests = 0;
  let url = '';

  // Claims as Auth issues them; `o.claims` overrides any of them (tests forge wrong ones).
  const sign = (alg: 'ES256' | 'HS256', userId: string, o: TokenOptions = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      aud: 'authenticated',
      iss: `${url}/auth/v1`,
      sub: userId,
      iat: now,
      exp: now + (o.expiresInSeconds ?? 3600),
      role: 'authenticated',
      aal: 'aal1',
      session_id: crypto.randomUUID(),
      ...o.claims,
    })
      .setProtectedHeader(alg === 'ES256' ? { alg, kid, typ: 'JWT' } : { alg, typ: 'JWT' })
      .sign(alg === 'ES256' ? privateKey : hsKey);
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
    let key: Uint8Array | CryptoKey;
    if (typeof header.kid === 'string') {
      if (header.kid !== kid) return { reason: `token is unverifiable: error while executing keyfunc: invalid kid: ${header.kid}` };
      key = publicKey;
    } else if (alg === 'HS256') {
      key = hsKey;
    } else {
      return { reason: 'token is unverifiable: error while executing keyfunc: missing kid' };
    }
    if ((alg === 'HS256') !== (key === hsKey)) return { reason: 'token signature is invalid: key is of invalid type' };
    try {
      await compactVerify(token, key, { algorithms: [alg] });
    } catch {
      return { reason: `token signature is invalid: ${alg === 'HS256' ? 'signature is invalid' : 'crypto/ecdsa: verification error'}` };
    }
    const now = Date.now() / 1000;
    if (typeof claims.exp === 'number' && now >= claims.exp) return { reason: 'token has invalid claims: token is expired' };
    if (typeof claims.nbf === 'number' && now < claims.nbf) return { reason: 'token has invalid claims: token is not valid yet' };
    return { claims };
  };

  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const path = new URL(req.url ?? '/', 'http://auth').pathname;
    if (req.method === 'GET' && path === '/auth/v1/.well-known/jwks.json') return send(200, jwks);
    if (req.method !== 'GET' || path !== '/auth/v1/user') return send(404, { message: 'no Route matched with those values' });
    userRequests++;
    const apikey = req.headers.apikey;
    if (typeof apikey !== 'string' || apikey === '') return send(401, { message: 'No API key found in request', hint: 'No `apikey` request header or url param was found.' });
    if (!accepted.has(apikey)) return send(401, { message: 'Invalid API key', hint: 'Double check your Supabase `anon` or `service_role` API key.' });
    const token = /^[Bb]earer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token) return send(401, { code: 401, error_code: 'no_authorization', msg: 'This endpoint requires a Bearer token' });
    void (async () => {
      const parsed = await parseClaims(token);
      if ('reason' in parsed) return send(403, { code: 403, error_code: 'bad_jwt', msg: `invalid JWT: unable to parse or verify signature, ${parsed.reason}` });
      const sub = parsed.claims.sub;
      if (typeof sub !== 'string' || sub === '') return send(403, { code: 403, error_code: 'bad_jwt', msg: 'invalid claim: missing sub claim' });
      if (!UUID.test(sub)) return send(400, { code: 400, error_code: 'bad_jwt', msg: 'invalid claim: sub claim must be a UUID' });
      const rows = opts.sql
        ? await opts.sql`select id, aud, role, email from auth.users where id = ${sub}::uuid`
        : [{ id: sub, aud: 'authenticated', role: 'authenticated', email: null }];
      if (!rows[0]) return send(403, { code: 403, error_code: 'user_not_found', msg: 'User from sub claim in JWT does not exist' });
      const u = rows[0];
      return send(200, { id: u.id, aud: u.aud, role: u.role, email: u.email, app_metadata: {}, user_metadata: {} });
    })().catch(() => send(500, { code: 500, error_code: 'unexpected_failure', msg: 'Unexpected failure, please check server logs for more information' }));
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
    signEs256: (userId, o) => sign('ES256', userId, o),
    signHs256: (userId, o) => sign('HS256', userId, o),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
