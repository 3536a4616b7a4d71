// HubSpot OAuth install: the state kept in Postgres (bound to the user,
// single-use, expiring, bounded per user, pruned) and the PKCE and authorize
// URL the orchestrator builds from it.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  authorizeUrl, HUBSPOT_INSTALL_SCOPES, INSTALL_STATE, installStateHash, newInstallState, pkceChallenge, pkceVerifier,
} from '../functions/orchestrator/oauth-install.ts';
import { consumeInstallState, createInstallState } from '../functions/orchestrator/sql.ts';
import { PROJECT_ROOT } from '../scripts/lib/local-postgres.ts';
import { createUser, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const MIGRATION = path.join(PROJECT_ROOT, 'supabase/migrations/20261130005100_oauth_install.sql');

async function stateRows(userId?: string): Promise<number> {
  const [row] = userId
    ? await db.sql`select count(*)::int as n from private.oauth_install_states where user_id = ${userId}`
    : await db.sql`select count(*)::int as n from private.oauth_install_states`;
  return row!.n as number;
}

/** A new state recorded for the user; returns the state and its hash. */
async function started(userId: string) {
  const state = newInstallState();
  const hash = await installStateHash(state);
  await createInstallState(db.sql, userId, hash);
  return { state, hash };
}

beforeEach(async () => {
  await db.sql`update private.oauth_install_settings set state_ttl = interval '10 minutes', max_open_states = 5, prune_batch_size = 5000`;
});

describe('install states in Postgres', () => {
  it('stores only the SHA-256 of the state, bound to the user, expiring after the setting (10 minutes)', async () => {
    const user = await createUser(db.sql);
    const { state, hash } = await started(user);
    const rows = await db.sql`select state_hash, user_id, expires_at - created_at as ttl from private.oauth_install_states where user_id = ${user}`;
    expect(rows).toHaveLength(1);
    expect(Buffer.from(rows[0]!.state_hash as Uint8Array).equals(Buffer.from(hash))).toBe(true);
    expect(rows[0]!.ttl).toBe('00:10:00');
    const dump = JSON.stringify(await db.sql`select * from private.oauth_install_states`);
    expect(dump).not.toContain(state);
    expect(dump).not.toContain(Buffer.from(state).toString('hex'));
  });

  it('is consumed once by its user; a replay, a forged state and another user get false and change nothing', async () => {
    const owner = await createUser(db.sql);
    const other = await createUser(db.sql);
    const { hash } = await started(owner);
    expect(await consumeInstallState(db.sql, other, hash)).toBe(false);
    expect(await consumeInstallState(db.sql, owner, await installStateHash(newInstallState()))).toBe(false);
    expect(await stateRows(owner)).toBe(1);
    expect(await consumeInstallState(db.sql, owner, hash)).toBe(true);
    expect(await stateRows(owner)).toBe(0);
    expect(await consumeInstallState(db.sql, owner, hash)).toBe(false);
  });

  it('refuses an expired state and leaves it to the prune', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    await db.sql`update private.oauth_install_states set created_at = now() - interval '11 minutes', expires_at = now() - interval '1 minute' where user_id = ${user}`;
    expect(await consumeInstallState(db.sql, user, hash)).toBe(false);
    expect(await stateRows(user)).toBe(1);
  });

  it('keeps at most max_open_states per user: a new one drops the oldest', async () => {
    const user = await createUser(db.sql);
    const states = [];
    for (let i = 0; i < 7; i++) {
      states.push(await started(user));
      // distinct created_at even within one clock tick: back-date the earlier ones
      await db.sql`update private.oauth_install_states set created_at = created_at - interval '1 second' where user_id = ${user}`;
    }
    expect(await stateRows(user)).toBe(5);
    expect(await consumeInstallState(db.sql, user, states[0]!.hash)).toBe(false);
    expect(await consumeInstallState(db.sql, user, states[1]!.hash)).toBe(false);
    for (const s of states.slice(2)) expect(await consumeInstallState(db.sql, user, s.hash)).toBe(true);
  });

  it('holds the bound under 20 concurrent starts of one user on separate connections', async () => {
    const user = await createUser(db.sql);
    const pools = Array.from({ length: 4 }, () => db.connect(5));
    await Promise.all(Array.from({ length: 20 }, (_, i) => (async () => {
      const hash = await installStateHash(newInstallState());
      await createInstallState(pools[i % pools.length]!, user, hash);
    })()));
    expect(await stateRows(user)).toBe(5);
  });

  it('is consumed exactly once by 16 concurrent callbacks with the same state', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    const pools = Array.from({ length: 4 }, () => db.connect(4));
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => consumeInstallState(pools[i % pools.length]!, user, hash)));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await stateRows(user)).toBe(0);
  });

  it('refuses bad arguments, and a hash that is not 32 bytes', async () => {
    const user = await createUser(db.sql);
    await expect(db.sql`select public.create_oauth_install_state(${user}, ${randomBytes(16)})`).rejects.toMatchObject({ code: '22023' });
    await expect(db.sql`select public.create_oauth_install_state(null, ${randomBytes(32)})`).rejects.toMatchObject({ code: '22023' });
    // a user that does not exist: the foreign key refuses
    await expect(createInstallState(db.sql, crypto.randomUUID(), randomBytes(32))).rejects.toMatchObject({ code: '23503' });
    const [row] = await db.sql`select public.consume_oauth_install_state(null, null) as ok`;
    expect(row!.ok).toBe(false);
  });

  it('is deleted with its user', async () => {
    const user = await createUser(db.sql);
    await started(user);
    await db.sql`delete from auth.users where id = ${user}`;
    expect(await stateRows(user)).toBe(0);
  });

  it('is not reachable by signed-in users: no grant on the table or the functions', async () => {
    const user = await createUser(db.sql);
    const { hash } = await started(user);
    const claims = JSON.stringify({ sub: user, role: 'authenticated' });
    for (const query of [
      'select count(*) from private.oauth_install_states',
      `select public.consume_oauth_install_state('${user}', '\\x${Buffer.from(hash).toString('hex')}')`,
      `select public.create_oauth_install_state('${user}', '\\x${randomBytes(32).toString('hex')}')`,
      'select public.prune_oauth_install_states()',
    ]) {
      await expect(db.sql.begin(async (tx) => {
        await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${claims}, true)`;
        await tx.unsafe(query);
      })).rejects.toMatchObject({ code: '42501' });
    }
    expect(await stateRows(user)).toBe(1);
  });
});

describe('pruning expired states (what pg_cron runs)', () => {
  async function cronJob() {
    const text = await readFile(MIGRATION, 'utf8');
    const m = /cron\.schedule\(\s*'([^']+)',\s*'([^']+)',\s*\$cmd\$([\s\S]*?)\$cmd\$\)/.exec(text);
    if (!m) throw new Error(`no cron.schedule(...) in ${MIGRATION}`);
    return { name: m[1]!, schedule: m[2]!, command: m[3]!.trim() };
  }

  it('runs every 5 minutes and deletes expired states only, in bounded batches', async () => {
    expect(await cronJob()).toEqual({ name: 'prune-oauth-install-states', schedule: '*/5 * * * *', command: 'select public.prune_oauth_install_states()' });
    await db.sql`delete from private.oauth_install_states`;
    const users = await Promise.all(Array.from({ length: 3 }, () => createUser(db.sql)));
    for (const u of users) for (let i = 0; i < 3; i++) await started(u);
    await db.sql`update private.oauth_install_states set created_at = now() - interval '20 minutes', expires_at = now() - interval '10 minutes'
      where user_id = any(${users.slice(0, 2)})`;
    await db.sql`update private.oauth_install_settings set prune_batch_size = 4`;
    const { command } = await cronJob();
    const deleted: number[] = [];
    for (;;) {
      const [row] = await db.sql.unsafe(command);
      const n = Number(Object.values(row!)[0]);
      deleted.push(n);
      if (n === 0) break;
    }
    expect(deleted).toEqual([4, 2, 0]);
    expect(await stateRows()).toBe(3);
    expect(await stateRows(users[2])).toBe(3);
  });
});

describe('PKCE and the authorize URL', () => {
  const cfg = { clientId: 'client-123', clientSecret: 'secret-abc', redirectUri: 'https://app.example/hubspot/callback?x=1' };

  it('derives a 43-character verifier per state and app secret, and its S256 challenge', async () => {
    const state = newInstallState();
    expect(state).toMatch(INSTALL_STATE);
    const verifier = await pkceVerifier(cfg.clientSecret, state);
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await pkceVerifier(cfg.clientSecret, state)).toBe(verifier);
    expect(await pkceVerifier('another-secret', state)).not.toBe(verifier);
    expect(await pkceVerifier(cfg.clientSecret, newInstallState())).not.toBe(verifier);
    const { createHash } = await import('node:crypto');
    expect(await pkceChallenge(verifier)).toBe(createHash('sha256').update(verifier).digest('base64url'));
  });

  it("builds @hubspot/api-client getAuthorizationUrl's query, plus the PKCE parameters, on the configured authorize page", async () => {
    const { default: OauthDiscovery } = (await import('@hubspot/api-client/lib/src/discovery/oauth/OauthDiscovery.js')) as unknown as {
      default: { prototype: { getAuthorizationUrl(c: string, r: string, s: string, o?: string, st?: string): string } };
    };
    const state = newInstallState();
    const official = OauthDiscovery.prototype.getAuthorizationUrl(cfg.clientId, cfg.redirectUri, HUBSPOT_INSTALL_SCOPES.join(' '), undefined, state);
    const ours = authorizeUrl(cfg, state, 'challenge-xyz');
    expect(ours).toBe(`${official}&code_challenge=challenge-xyz&code_challenge_method=S256`);
    const local = new URL(authorizeUrl({ ...cfg, authorizeUrl: 'http://127.0.0.1:9/oauth/authorize' }, state, 'c'));
    expect(local.origin + local.pathname).toBe('http://127.0.0.1:9/oauth/authorize');
    expect(Object.fromEntries(local.searchParams)).toEqual({
      client_id: 'client-123', redirect_uri: cfg.redirectUri, scope: 'content hubdb oauth', state, code_challenge: 'c', code_challenge_method: 'S256',
    });
  });
});
