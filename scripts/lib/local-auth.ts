// A local stand-in for the two Auth endpoints an edge function uses to verify a
// user's access token, on 127.0.0.1 only, answering as Supabase Auth (GoTrue)
// behind the API gateway does:
//   GET /auth/v1/.well-known/jwks.json  the project's public signing keys
//   GET /auth/v1/user                   the user of `Authorization: Bearer <token>`
//     (needs an `apikey` the project knows, as the gateway does; verifies the
//     token with the project's legacy HS256 secret or its asymmetric key; the
//     user must exist in auth.users when a database is given)
// Token signers for both kinds of project are included.
import { createServer, type Server } from 'node:http';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWK } from 'jose';
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

  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const path = new URL(req.url ?? '/', 'http://auth').pathname;
    if (req.method === 'GET' && path === '/auth/v1/.well-known/jwks.json') return send(200, jwks);
    if (req.method !== 'GET' || path !== '/auth/v1/user') return send(404, { message: 'no Route matched with those values' });
    userRequests++;
    const apikey = req.headers.apikey;
    if (typeof apikey !== 'string' || !accepted.has(apikey)) return send(401, { message: 'No API key found in request' });
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token) return send(401, { code: 401, error_code: 'no_authorization', msg: 'This endpoint requires a valid Bearer token' });
    void (async () => {
      let sub: string;
      try {
        const { payload } = await jwtVerify(token, (header) => (header.alg === 'HS256' ? hsKey : publicKey), {
          algorithms: ['HS256', 'ES256'],
          audience: 'authenticated',
        });
        sub = String(payload.sub);
      } catch (e) {
        return send(403, { code: 403, error_code: 'bad_jwt', msg: `invalid JWT: unable to parse or verify signature, ${(e as Error).message}` });
      }
      const rows = opts.sql
        ? await opts.sql`select id, aud, role, email from auth.users where id::text = ${sub}`
        : [{ id: sub, aud: 'authenticated', role: 'authenticated', email: null }];
      if (!rows[0]) return send(403, { code: 403, error_code: 'user_not_found', msg: 'User from sub claim in JWT does not exist' });
      const u = rows[0];
      return send(200, { id: u.id, aud: u.aud, role: u.role, email: u.email, app_metadata: {}, user_metadata: {} });
    })().catch(() => send(500, { message: 'internal error' }));
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
