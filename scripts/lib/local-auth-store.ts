// What the local Auth (./local-auth.ts) keeps in the database, in GoTrue's own
// tables (auth.users, auth.sessions, auth.refresh_tokens; created for local runs
// by scripts/sql/supabase-bootstrap.sql): password users, their sessions, and
// refresh tokens rotated as GoTrue rotates them (each refresh revokes the token
// and issues its child; a revoked token is answered again only as the parent of
// the session's active one or within the reuse interval, else the session's
// whole family is revoked). Passwords are hashed with scrypt (node:crypto);
// GoTrue uses bcrypt, so a user row GoTrue wrote cannot sign in here.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Sql } from '../../shared/db.ts';

const SCRYPT = { N: 16_384, r: 8, p: 1, keylen: 32 } as const;

function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(password, salt, keylen, options, (e, key) => (e ? reject(e) : resolve(key))));
}

/** `$scrypt$N$r$p$<salt>$<hash>` (base64). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p });
  return `$scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const m = /^\$scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(stored ?? '');
  if (!m) return false;
  const expected = Buffer.from(m[5]!, 'base64');
  const key = await scrypt(password, Buffer.from(m[4]!, 'base64'), expected.length, { N: Number(m[1]), r: Number(m[2]), p: Number(m[3]), maxmem: 64 * 1024 * 1024 });
  return timingSafeEqual(key, expected);
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

/** GoTrue's v1 refresh token: 12 random characters. */
function newRefreshToken(): string {
  return randomBytes(9).toString('base64url');
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

/** The refresh_token grant, under the token's row lock, as GoTrue's RefreshTokenGrant decides it. */
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
      const [active] = await tx`select token, parent from auth.refresh_tokens where session_id = ${rt.session_id} and not revoked order by id desc limit 1`;
      // The client lost the answer to its last refresh: it gets that answer's token again.
      if (active && active.parent === rt.token) issued = active.token as string;
      else if (!rt.reusable) {
        await tx`update auth.refresh_tokens set revoked = true, updated_at = now() where session_id = ${rt.session_id} and not revoked`;
        return { kind: 'already_used' as const };
      }
    }
    if (!issued) {
      issued = newRefreshToken();
      await tx`update auth.refresh_tokens set revoked = true, updated_at = now() where id = ${rt.id}`;
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
