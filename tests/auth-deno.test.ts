// The real orchestrator entrypoint under Deno, given only what hosted Supabase
// provides (no variable the user sets): it accepts a user token signed with the
// project's asymmetric key and one signed with the legacy HS256 secret (asking
// Auth), rejects a forged one, and uses one database connection however many
// invocations it serves. In the `pooler` project it connects through PgBouncer.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalAuth, type LocalAuth } from '../local/auth/auth.ts';
import { freePort, PROJECT_ROOT, withDatabase } from '../local/postgres.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const db = useTestDatabase();
let auth: LocalAuth;
let fn: ChildProcess;
let url: string;
const output: string[] = [];
let owner: { userId: string; runId: string };

beforeAll(async () => {
  auth = await startLocalAuth({ sql: db.sql });
  const { userId, portalId } = await createUserWithPortal(db.sql);
  owner = { userId, runId: (await createRun(db.sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['blog_tags'] })).runId! };
  const port = await freePort();
  url = `http://127.0.0.1:${port}/functions/v1/orchestrator`;
  // A project with an asymmetric signing key that still accepts legacy HS256 tokens, with the new API keys.
  const env: Record<string, string> = {
    SUPABASE_URL: auth.url,
    SUPABASE_DB_URL: db.url,
    SUPABASE_JWKS: JSON.stringify(auth.jwks),
    SUPABASE_PUBLISHABLE_KEYS: JSON.stringify({ default: auth.apiKeys.publishable }),
    SUPABASE_SECRET_KEYS: JSON.stringify({ default: auth.apiKeys.secret }),
    SUPABASE_ANON_KEY: auth.apiKeys.anon,
    SUPABASE_SERVICE_ROLE_KEY: auth.apiKeys.serviceRole,
  };
  for (const k of ['PATH', 'HOME', 'DENO_DIR', 'TMPDIR']) if (process.env[k]) env[k] = process.env[k]!;
  fn = spawn(path.join(PROJECT_ROOT, 'node_modules/.bin/deno'),
    ['run', '-A', '--config', 'deno.json', 'tests/support/deno-serve.ts', 'supabase/functions/orchestrator/index.ts', String(port)],
    { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const onData = (b: Buffer) => output.push(...b.toString('utf8').split('\n').filter(Boolean));
  fn.stdout!.on('data', onData);
  fn.stderr!.on('data', onData);
  const deadline = Date.now() + 90_000;
  while (!output.some((l) => l.includes(`listening ${port}`))) {
    if (fn.exitCode !== null) throw new Error(`orchestrator exited: ${output.join('\n')}`);
    if (Date.now() > deadline) throw new Error(`orchestrator did not start: ${output.join('\n')}`);
    await sleep(100);
  }
}, 120_000);

afterAll(async () => {
  if (fn && fn.exitCode === null) {
    const exited = new Promise((r) => fn.once('exit', r));
    fn.kill('SIGTERM');
    await exited;
  }
  await auth?.close();
});

const getRun = (token: string) => fetch(`${url}?runId=${owner.runId}`, { headers: { Authorization: `Bearer ${token}` } });

/** Client connections the orchestrator holds: Postgres backends (direct) or PgBouncer clients (pooler). */
async function orchestratorConnections(): Promise<number> {
  if (!db.pooled) {
    const [row] = await db.sql`select count(*)::int as n from pg_stat_activity where application_name = 'queue-orchestrator' and datname = current_database()`;
    return row!.n as number;
  }
  const admin = postgres(withDatabase(db.url, 'pgbouncer'), { max: 1, prepare: false, fetch_types: false, onnotice: () => {} });
  try {
    const dbName = new URL(db.url).pathname.slice(1);
    const clients = await admin.unsafe('SHOW CLIENTS', [], { prepare: false });
    return clients.filter((c) => c.application_name === 'queue-orchestrator' && c.database === dbName).length;
  } finally {
    await admin.end({ timeout: 2 });
  }
}

describe('orchestrator under Deno with only hosted-provided variables', () => {
  it('accepts an ES256 token (JWKS) and an HS256 token (asked Auth); rejects a forged one', async () => {
    const es = await getRun(await auth.signEs256(owner.userId));
    expect(es.status, output.join('\n')).toBe(200);
    expect(((await es.json()) as { run: { id: string } }).run.id).toBe(owner.runId);
    const asked = auth.userRequests();
    const hs = await getRun(await auth.signHs256(owner.userId));
    expect(hs.status).toBe(200);
    expect(auth.userRequests()).toBe(asked + 1);
    const forgedAuth = await startLocalAuth();
    try {
      const forged = await getRun(await forgedAuth.signHs256(owner.userId));
      expect(forged.status).toBe(401);
      await forged.body?.cancel();
    } finally {
      await forgedAuth.close();
    }
  });

  it('serves 60 invocations (20 at a time) over one database connection', async () => {
    const token = await auth.signEs256(owner.userId);
    let peak = 0;
    for (let round = 0; round < 3; round++) {
      const calls = Array.from({ length: 20 }, () => getRun(token).then(async (r) => ({ status: r.status, body: await r.text() })));
      const sampled = orchestratorConnections();
      const results = await Promise.all(calls);
      peak = Math.max(peak, await sampled, await orchestratorConnections());
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    }
    console.log(`orchestrator database connections for 60 invocations (${db.pooled ? 'through PgBouncer' : 'direct'}): ${peak}`);
    expect(peak).toBe(1);
  });
});
