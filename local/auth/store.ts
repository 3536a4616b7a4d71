// What the local Auth (./auth.ts) keeps in the database, in GoTrue's own
// tables (auth.users, auth.sessions, auth.refresh_tokens; created for local runs
// by local/supabase-bootstrap.sql): password users, their sessions, and
// refresh tokens rotated as GoTrue's v1 algorithm rotates them (supabase/auth
// internal/tokens/service.go RefreshTokenGrant, internal/models/refresh_token.go):
// each refresh revokes the token and issues its child; a revoked token is
// answered again with the session's active token when that is the child its own
// refresh issued (the client lost the answer), else a new child within the reuse
// interval of its revocation; otherwise the session's whole family is revoked
// (RevokeTokenFamily) and stays revoked. Three places are stricter than GoTrue's
// code, on purpose, so that a revoked token is answered only within 10 s of its
// own revocation (docs/testing.md#signing-in-locally): an answered reuse does not
// re-stamp the revoked token's updated_at (GoTrue's UpdateOnly does, so each reuse
// opens another interval); the child such a reuse issues does not make the reused
// token "the active token's parent" (GoTrue answers it then for as long as that
// child is active); and a family revoked by reuse detection has no token answered
// again (GoTrue stamps the tokens it revokes then, which reopens the interval for
// the newest). Passwords are hashed
// with scrypt (node:crypto); GoTrue uses bcrypt, so a user row GoTrue wrote
// cannot sign in here. A sign-in with an unknown email (or a user without a
// usable password) runs the same hash against a dummy, so it takes as long.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Sql } from '../../shared/db.ts';

const SCRYPT = { N: 16_384, r: 8, p: 1, keylen: 32 } as const;

let scryptRuns = 0;

function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  scryptRuns++;
  return new Promise((resolve, reject) => scryptCb(password, salt, keylen, options, (e, key) => (e ? reject(e) : resolve(key))));
}

/** Password hashes computed in this process so far (sign-ups and sign-in checks). */
export function passwordHashCount(): number {
  return scryptRuns;
}

/** `$scrypt$N$r$p$<salt>$<hash>` (base64). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p });
  return `$scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

const SCRYPT_HASH = /^\$scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;

/** What a missing or unreadable stored hash is checked against: random, with the parameters every stored hash has. */
const DUMMY_HASH = `$scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${randomBytes(16).toString('base64')}$${randomBytes(SCRYPT.keylen).toString('base64')}`;

/**
 * Whether the password is the stored one. Always costs one hash: a missing or
 * unreadable stored hash (an unknown email, a user without a password) is
 * checked against a dummy with the same parameters and answers false, so the
 * time says nothing about which it was.
 */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const own = SCRYPT_HASH.exec(stored ?? '');
  const m = own ?? SCRYPT_HASH.exec(DUMMY_HASH)!;
  const expected = Buffer.from(m[5]!, 'base64');
  const key = await scrypt(password, Buffer.from(m[4]!, 'base64'), expected.length, { N: Number(m[1]), r: Number(m[2]), p: Number(m[3]), maxmem: 64 * 1024 * 1024 });
  return timingSafeEqual(key, expected) && own !== null;
}

export interface UserRow {
  id: string;
  aud: string;
  role: string;
  email: string | null;
  encrypted_password: string | null;
  email_confirmed_at: Date | null;
  last_sign_in_at: Date | null;
  raw_app_meta_data: Record<string, unknown> | null;
  raw_user_meta_data: Record<string, unknown> | null;
  created_at: Date;
  updated_at: Date;
  is_anonymous: boolean;
}

const USER_COLUMNS = 'id, aud, role, email, encrypted_password, email_confirmed_at, last_sign_in_at, raw_app_meta_data, raw_user_meta_data, created_at, updated_at, is_anonymous';

/** A user's app_metadata as GoTrue shows it: its provider(s), then what was stored. */
export function appMetadata(u: UserRow): Record<string, unknown> {
  return { provider: 'email', providers: ['email'], ...(u.raw_app_meta_data ?? {}) };
}

/** The user object GoTrue answers with (identities derived from the email: no auth.identities here). */
export function userJson(u: UserRow): Record<string, unknown> {
  const iso = (d: Date | null) => (d ? d.toISOString() : undefined);
  const identity = u.email
    ? [{
        identity_id: u.id, id: u.id, user_id: u.id, provider: 'email', email: u.email,
        identity_data: { email: u.email, email_verified: Boolean(u.email_confirmed_at), phone_verified: false, sub: u.id },
        last_sign_in_at: iso(u.last_sign_in_at), created_at: iso(u.created_at), updated_at: iso(u.updated_at),
      }]
    : [];
  return {
    id: u.id, aud: u.aud, role: u.role, email: u.email ?? '', email_confirmed_at: iso(u.email_confirmed_at), phone: '',
    confirmed_at: iso(u.email_confirmed_at), last_sign_in_at: iso(u.last_sign_in_at),
    app_metadata: appMetadata(u), user_metadata: u.raw_user_meta_data ?? {}, identities: identity,
    created_at: iso(u.created_at), updated_at: iso(u.updated_at), is_anonymous: u.is_anonymous,
  };
}

export async function findUser(sql: Sql, id: string): Promise<UserRow | null> {
  const [u] = await sql.unsafe<UserRow[]>(`select ${USER_COLUMNS} from auth.users where id = $1`, [id]);
  return u ?? null;
}

export async function findUserByEmail(sql: Sql, email: string): Promise<UserRow | null> {
  const [u] = await sql.unsafe<UserRow[]>(`select ${USER_COLUMNS} from auth.users where lower(email) = lower($1) and aud = 'authenticated'`, [email]);
  return u ?? null;
}

/** A confirmed password user (sign-ups confirm at once, as with email confirmations off); null if the email is taken. */
export async function createPasswordUser(
  sql: Sql,
  o: { email: string; password: string; userMetadata?: Record<string, unknown>; appMetadata?: Record<string, unknown>; id?: string },
): Promise<UserRow | null> {
  const hash = await hashPassword(o.password);
  return sql.begin(async (tx) => {
    // One sign-up per email at a time (auth.users here has no unique index on email).
    await tx`select pg_advisory_xact_lock(hashtext(${`local-auth:${o.email.toLowerCase()}`}))`;
    if (await findUserByEmail(tx as unknown as Sql, o.email)) return null;
    const [u] = await tx.unsafe<UserRow[]>(
      `insert into auth.users (id, aud, role, email, encrypted_password, email_confirmed_at, raw_app_meta_data, raw_user_meta_data)
       values ($1, 'authenticated', 'authenticated', $2, $3, now(), $4::jsonb, $5::jsonb) returning ${USER_COLUMNS}`,
      [o.id ?? crypto.randomUUID(), o.email.toLowerCase(), hash, (o.appMetadata ?? {}) as never, (o.userMetadata ?? {}) as never],
    );
    return u!;
  });
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** GoTrue's v1 refresh token (crypto.SecureAlphanumeric(12)): 12 characters of lower-case base32. */
function newRefreshToken(): string {
  return Array.from(randomBytes(12), (b) => BASE32[b & 31]).join('');
}

/** GoTrue's RefreshTokenGrantParams.Validate for v1 tokens (v2 tokens, longer, are not issued here): 12 of [a-z0-9]. */
export function isWellFormedRefreshToken(token: string): boolean {
  return /^[a-z0-9]{12}$/.test(token);
}

export interface IssuedSession {
  sessionId: string;
  refreshToken: string;
  /** When the session was signed into (its `amr` timestamp). */
  createdAt: Date;
}

/** Signs a user in: a new session with its first refresh token, and the sign-in time. */
export async function createSession(sql: Sql, userId: string, sessionId: string = crypto.randomUUID()): Promise<IssuedSession> {
  const refreshToken = newRefreshToken();
  return sql.begin(async (tx) => {
    const [s] = await tx`insert into auth.sessions (id, user_id, aal) values (${sessionId}, ${userId}, 'aal1') returning created_at`;
    await tx`insert into auth.refresh_tokens (token, user_id, revoked, session_id) values (${refreshToken}, ${userId}, false, ${sessionId})`;
    await tx`update auth.users set last_sign_in_at = now(), updated_at = now() where id = ${userId}`;
    return { sessionId, refreshToken, createdAt: s!.created_at as Date };
  });
}

/** Records a session for a token signed outside the sign-in flow (tests), when its user exists. */
export async function ensureSession(sql: Sql, userId: string, sessionId: string): Promise<void> {
  await sql`insert into auth.sessions (id, user_id, aal) select ${sessionId}, ${userId}, 'aal1'
             where exists (select 1 from auth.users where id = ${userId}) on conflict (id) do nothing`;
}

export async function sessionExists(sql: Sql, sessionId: string): Promise<boolean> {
  return (await sql`select 1 from auth.sessions where id = ${sessionId}`).length > 0;
}

export type RefreshOutcome =
  | { kind: 'ok'; user: UserRow; session: IssuedSession }
  | { kind: 'not_found' | 'no_session' | 'already_used' };

/**
 * The refresh_token grant, under the token's row lock, as GoTrue's RefreshTokenGrant
 * decides it for a v1 token, with the stricter rules in this file's header: a
 * revoked token's reuse interval runs from its own revocation (an answered reuse
 * leaves its updated_at alone), the lost answer is only the child its own refresh
 * issued, and a session with no active token left (its family revoked by reuse
 * detection) answers none of its tokens again.
 */
export async function refreshSession(sql: Sql, token: string, reuseIntervalSeconds: number): Promise<RefreshOutcome> {
  return sql.begin(async (tx) => {
    const [rt] = await tx`
      select rt.id, rt.token, rt.user_id, rt.revoked, rt.session_id, rt.updated_at > now() - make_interval(secs => ${reuseIntervalSeconds}) as reusable,
             s.id as live_session, s.created_at as signed_in_at
        from auth.refresh_tokens rt left join auth.sessions s on s.id = rt.session_id
       where rt.token = ${token} for update of rt`;
    if (!rt) return { kind: 'not_found' as const };
    if (!rt.live_session) return { kind: 'no_session' as const };
    let issued: string | null = null;
    if (rt.revoked) {
      const [active] = await tx`
        select a.token,
               a.parent = ${rt.token} and not exists (select 1 from auth.refresh_tokens o where o.parent = ${rt.token} and o.id < a.id) as own_child
          from auth.refresh_tokens a where a.session_id = ${rt.session_id} and not a.revoked order by a.id desc limit 1`;
      // The client lost the answer to its refresh: it gets that answer's token again.
      if (active?.own_child) issued = active.token as string;
      else if (!active || !rt.reusable) {
        // Reuse detection (GoTrue's RevokeTokenFamily): every token of the session, at once.
        await tx`update auth.refresh_tokens set revoked = true, updated_at = now() where session_id = ${rt.session_id} and not revoked`;
        return { kind: 'already_used' as const };
      }
    }
    if (!issued) {
      issued = newRefreshToken();
      // Revoked once: a reuse within the interval does not move the time it is measured from.
      await tx`update auth.refresh_tokens set revoked = true, updated_at = now() where id = ${rt.id} and not revoked`;
      await tx`insert into auth.refresh_tokens (token, user_id, revoked, parent, session_id) values (${issued}, ${rt.user_id}, false, ${rt.token}, ${rt.session_id})`;
    }
    await tx`update auth.sessions set refreshed_at = now() at time zone 'utc', updated_at = now() where id = ${rt.session_id}`;
    const user = await findUser(tx as unknown as Sql, rt.user_id as string);
    if (!user) return { kind: 'not_found' as const };
    return { kind: 'ok' as const, user, session: { sessionId: rt.session_id as string, refreshToken: issued, createdAt: rt.signed_in_at as Date } };
  });
}

/** Sign-out: `global` ends every session of the user, `local` this one, `others` all but this one. */
export async function endSessions(sql: Sql, userId: string, sessionId: string | null, scope: 'global' | 'local' | 'others'): Promise<void> {
  if (scope === 'local' && sessionId) await sql`delete from auth.sessions where id = ${sessionId}`;
  else if (scope === 'others' && sessionId) await sql`delete from auth.sessions where user_id = ${userId} and id <> ${sessionId}`;
  else await sql`delete from auth.sessions where user_id = ${userId}`;
}
