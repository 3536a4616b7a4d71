// User authentication as on hosted Supabase, with only the variables Supabase
// itself provides: the orchestrator built from such an environment accepts a
// user token signed with the project's asymmetric key (verified against the
// JWKS) and one signed with the legacy HS256 secret (verified by asking Auth,
// GET /auth/v1/user — the secret is never given to the function), and rejects
// everything else. Auth here is the loopback stand-in of local/auth/auth.ts.
import { randomUUID } from 'node:crypto';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestratorHandlerFromEnv } from '../functions/orchestrator/from-env.ts';
import { startLocalAuth, type LocalAuth } from '../local/auth/auth.ts';
import { freePort } from '../local/postgres.ts';
import { createUserVerifier } from '../shared/auth.ts';
import { orchestratorConfig, workerConfig } from '../shared/config.ts';
import { createRun } from '../shared/sql/runs.ts';
import { parseKeyMap, supabaseKeys } from '../shared/supabase-keys.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
let auth: LocalAuth;
let owner: { userId: string; runId: string };
let other: string;

/** The variables hosted Supabase gives every edge function (docs: Edge Functions → Environment Variables). */
const HOSTED_PROVIDED = new Set([
  'SUPABASE_URL', 'SUPABASE_DB_URL', 'SUPABASE_ANON_KEY', 'SUPABASE_SERVICE_ROLE_KEY',
  'SUPABASE_PUBLISHABLE_KEYS', 'SUPABASE_SECRET_KEYS', 'SUPABASE_JWKS',
]);

type ProjectKind = 'asymmetric+new-keys' | 'legacy-hs256' | 'legacy-hs256+new-keys' | 'asymmetric-no-inline-jwks';

/** The environment hosted Supabase gives a function of a project of this kind; nothing set by the user. */
function hostedEnv(kind: ProjectKind): Record<string, string> {
  const env: Record<string, string> = { SUPABASE_URL: auth.url, SUPABASE_DB_URL: db.url };
  if (kind !== 'legacy-hs256') {
    env.SUPABASE_PUBLISHABLE_KEYS = JSON.stringify({ default: auth.apiKeys.publishable });
    env.SUPABASE_SECRET_KEYS = JSON.stringify({ default: auth.apiKeys.secret });
  }
  if (kind !== 'asymmetric+new-keys') {
    env.SUPABASE_ANON_KEY = auth.apiKeys.anon;
    env.SUPABASE_SERVICE_ROLE_KEY = auth.apiKeys.serviceRole;
  }
  if (kind === 'asymmetric+new-keys') env.SUPABASE_JWKS = JSON.stringify(auth.jwks);
  if (kind.startsWith('legacy')) env.SUPABASE_JWKS = JSON.stringify({ keys: [] });
  return env;
}

async function getRun(env: Record<string, string>, token: string | null, runId: string) {
  const handler = orchestratorHandlerFromEnv(env);
  const res = await handler(new Request(`http://127.0.0.1/functions/v1/orchestrator?runId=${runId}`, {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  }));
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

beforeAll(async () => {
  auth = await startLocalAuth({ sql: db.sql });
  const { userId, portalId } = await createUserWithPortal(db.sql);
  const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_tags'] });
  owner = { userId, runId: run.runId! };
  other = await createUser(db.sql);
});
afterAll(async () => {
  await auth?.close();
});

describe('hosted environments need no variable the user sets', () => {
  it('every environment used below holds only names hosted Supabase provides', () => {
    for (const kind of ['asymmetric+new-keys', 'legacy-hs256', 'legacy-hs256+new-keys', 'asymmetric-no-inline-jwks'] as const) {
      const names = Object.keys(hostedEnv(kind));
      expect(names.filter((n) => !HOSTED_PROVIDED.has(n)), kind).toEqual([]);
      expect(() => orchestratorConfig(hostedEnv(kind))).not.toThrow();
    }
  });

  it('the functions read no SUPABASE_ name that hosted does not provide (reserved: users cannot set them)', async () => {
    const { readdir, readFile } = await import('node:fs/promises');
    const files: string[] = [];
    for (const dir of ['shared', 'functions', 'supabase/functions']) {
      for (const f of await readdir(dir, { recursive: true })) if (String(f).endsWith('.ts')) files.push(`${dir}/${f}`);
    }
    const read = new Map<string, string[]>();
    for (const f of files) {
      for (const m of (await readFile(f, 'utf8')).matchAll(/\bSUPABASE_[A-Z0-9_]+/g)) {
        if (!HOSTED_PROVIDED.has(m[0])) read.set(m[0], [...(read.get(m[0]) ?? []), f]);
      }
    }
    expect(Object.fromEntries(read)).toEqual({});
  });
});

describe('asymmetric (ES256) user tokens, verified against the JWKS', () => {
  it('are accepted with the inline SUPABASE_JWKS, without asking Auth', async () => {
    const before = auth.userRequests();
    const res = await getRun(hostedEnv('asymmetric+new-keys'), await auth.signEs256(owner.userId), owner.runId);
    expect(res.status).toBe(200);
    expect(res.body.run.id).toBe(owner.runId);
    expect(auth.userRequests()).toBe(before);
  });

  it('are accepted with the JWKS fetched from SUPABASE_URL/auth/v1/.well-known/jwks.json', async () => {
    const res = await getRun(hostedEnv('asymmetric-no-inline-jwks'), await auth.signEs256(owner.userId), owner.runId);
    expect(res.status).toBe(200);
  });

  it("identify the user: another user's token gets 404 for the same run (RLS)", async () => {
    const res = await getRun(hostedEnv('asymmetric+new-keys'), await auth.signEs256(other), owner.runId);
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('RUN_NOT_FOUND');
  });

  it('signed by a key not in the JWKS, expired, or for another audience are 401', async () => {
    const stranger = await startLocalAuth();
    try {
      const env = hostedEnv('asymmetric+new-keys');
      for (const token of [
        await stranger.signEs256(owner.userId),
        await auth.signEs256(owner.userId, { claims: { aud: 'service' } }),
        await auth.signEs256(owner.userId, { claims: { role: 'service_role' } }),
      ]) {
        const res = await getRun(env, token, owner.runId);
        expect(res.status, JSON.stringify(decodeJwt(token))).toBe(401);
        expect(res.body.code).toBe('UNAUTHENTICATED');
      }
      const expired = await getRun(env, await auth.signEs256(owner.userId, { expiresInSeconds: -60 }), owner.runId);
      expect([expired.status, expired.body.code]).toEqual([401, 'TOKEN_EXPIRED']);
    } finally {
      await stranger.close();
    }
  });
});

describe('legacy HS256 user tokens, verified by asking Auth (no JWT secret anywhere)', () => {
  it('are accepted on a legacy project (anon key as apikey), and Auth is asked once per token', async () => {
    const env = hostedEnv('legacy-hs256');
    expect(Object.values(env)).not.toContain(auth.legacySecret);
    const token = await auth.signHs256(owner.userId);
    const handler = orchestratorHandlerFromEnv(env);
    const before = auth.userRequests();
    for (let i = 0; i < 3; i++) {
      const res = await handler(new Request(`http://127.0.0.1/functions/v1/orchestrator?runId=${owner.runId}`, { headers: { Authorization: `Bearer ${token}` } }));
      expect(res.status).toBe(200);
    }
    expect(auth.userRequests() - before).toBe(1);
  });

  it('are accepted on a project with the new API keys (publishable key as apikey)', async () => {
    const res = await getRun(hostedEnv('legacy-hs256+new-keys'), await auth.signHs256(owner.userId), owner.runId);
    expect(res.status).toBe(200);
    const foreign = await getRun(hostedEnv('legacy-hs256+new-keys'), await auth.signHs256(other), owner.runId);
    expect(foreign.status).toBe(404);
  });

  it('signed with another secret, for a deleted user, expired, or alg none are 401', async () => {
    const env = hostedEnv('legacy-hs256');
    const now = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ role: 'authenticated' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(owner.userId).setAudience('authenticated').setExpirationTime(now + 600)
      .sign(new TextEncoder().encode('super-secret-jwt-token-with-at-least-32-characters'));
    const ghost = await auth.signHs256(randomUUID());
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const none = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: owner.userId, role: 'authenticated', aud: 'authenticated', exp: now + 600 })}.`;
    for (const token of [forged, ghost, none]) {
      const res = await getRun(env, token, owner.runId);
      expect(res.status).toBe(401);
    }
    const before = auth.userRequests();
    const expired = await getRun(env, await auth.signHs256(owner.userId, { expiresInSeconds: -60 }), owner.runId);
    expect([expired.status, expired.body.code]).toEqual([401, 'TOKEN_EXPIRED']);
    expect(expired.body.message).toMatch(/expired/);
    expect(auth.userRequests()).toBe(before); // expired tokens never reach Auth
  });

  it('answer 503 AUTH_UNAVAILABLE (not 401, not 500) when Auth cannot be reached', async () => {
    const verify = createUserVerifier({ authUrl: `http://127.0.0.1:${await freePort()}/auth/v1`, apiKey: 'k', timeoutMs: 2000 });
    await expect(verify(await auth.signHs256(owner.userId))).rejects.toMatchObject({ status: 503, code: 'AUTH_UNAVAILABLE' });
  });

  it('without an apikey the gateway refuses, and the token is not accepted', async () => {
    const verify = createUserVerifier({ authUrl: `${auth.url}/auth/v1` });
    await expect(verify(await auth.signHs256(owner.userId))).rejects.toMatchObject({ status: 401 });
  });
});

describe('API keys', () => {
  it('reads the new JSON key maps (default first) and the legacy keys', () => {
    expect(parseKeyMap('X', JSON.stringify({ mobile: 'sb_secret_b', default: 'sb_secret_a' }))).toEqual(['sb_secret_a', 'sb_secret_b']);
    expect(parseKeyMap('X', '["sb_secret_a"]')).toEqual(['sb_secret_a']);
    expect(parseKeyMap('X', 'sb_secret_single')).toEqual(['sb_secret_single']);
    expect(parseKeyMap('X', undefined)).toEqual([]);
    expect(() => parseKeyMap('SUPABASE_SECRET_KEYS', '{oops')).toThrow(/SUPABASE_SECRET_KEYS/);
    expect(supabaseKeys({ SUPABASE_SECRET_KEYS: '{"default":"sb_secret_a"}', SUPABASE_SERVICE_ROLE_KEY: 'legacy', SUPABASE_ANON_KEY: 'anon' }))
      .toEqual({ clientKey: 'anon', serverKey: 'sb_secret_a', serverKeys: ['sb_secret_a', 'legacy'] });
    expect(supabaseKeys({ SUPABASE_PUBLISHABLE_KEYS: '{"default":"sb_publishable_a"}', SUPABASE_ANON_KEY: 'anon', SUPABASE_SERVICE_ROLE_KEY: 'legacy' }))
      .toEqual({ clientKey: 'sb_publishable_a', serverKey: 'legacy', serverKeys: ['legacy'] });
  });

  it('the worker needs no legacy key: a secret key from SUPABASE_SECRET_KEYS is enough for Storage', () => {
    expect(() => workerConfig({ SUPABASE_DB_URL: 'postgres://x', SUPABASE_URL: 'http://x', SUPABASE_SECRET_KEYS: '{"default":"sb_secret_a"}' })).not.toThrow();
    expect(() => workerConfig({ SUPABASE_DB_URL: 'postgres://x', SUPABASE_URL: 'http://x' })).toThrow(/SUPABASE_SECRET_KEYS/);
    expect(() => workerConfig({ SUPABASE_DB_URL: 'postgres://x', EXPORT_DIR: '/tmp', WORKER_SECRET: 's', SUPABASE_SECRET_KEYS: '{bad' }))
      .toThrow(/SUPABASE_SECRET_KEYS/);
  });

  it('the orchestrator rejects a SUPABASE_JWKS that is not a key set, and reads both of its shapes', async () => {
    const env = hostedEnv('asymmetric+new-keys');
    expect(() => orchestratorHandlerFromEnv({ ...env, SUPABASE_JWKS: 'nope' })).toThrow(/SUPABASE_JWKS/);
    const bare = { ...env, SUPABASE_JWKS: JSON.stringify(auth.jwks.keys), SUPABASE_URL: `http://127.0.0.1:${await freePort()}` };
    const res = await getRun(bare, await auth.signEs256(owner.userId), owner.runId);
    expect(res.status).toBe(200);
  });
});

describe('database URL', () => {
  it('QUEUE_DB_URL (the pooler) wins over SUPABASE_DB_URL (direct); one connection per isolate by default', async () => {
    const { databaseUrl } = await import('../shared/config.ts');
    const cfg = orchestratorConfig({ ...hostedEnv('asymmetric+new-keys'), QUEUE_DB_URL: 'postgres://pooler:6543/postgres' });
    expect(databaseUrl(cfg)).toBe('postgres://pooler:6543/postgres');
    expect(databaseUrl(orchestratorConfig(hostedEnv('asymmetric+new-keys')))).toBe(db.url);
    expect(cfg.DB_POOL_MAX).toBe(1);
  });
});
