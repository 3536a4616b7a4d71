// Row-level security and grants, exercised exactly as PostgREST does it
// (`set local role` + request.jwt.claims): users see only their own rows and
// change nothing but their notifications' read_at; queue functions are for
// the service role only.
import { beforeAll, describe, expect, it } from 'vitest';
import { asUser, type Sql, type TransactionSql } from '../shared/db.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { completeFetchJob } from '../shared/sql/fetch.ts';
import { claimJobs, claimNextJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { saveFetchedPage } from '../scripts/lib/queue-test-helpers.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { databaseDigest, pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();

const TABLES = { portals: 'owner_id', runs: 'owner_id', jobs: 'owner_id', hubspot_content: 'owner_id', notifications: 'user_id' } as const;
type Table = keyof typeof TABLES;

// (queue_test.*: the test-only functions the harness creates; not the API, refused all the same.)
const QUEUE_FUNCTIONS = [
  'queue_test.claim_next_job', 'claim_jobs', 'complete_job', 'complete_jobs', 'queue_test.complete_job_and_claim_next', 'fail_job',
  'heartbeat_job', 'release_job', 'settle_stuck_runs', 'create_run', 'stop_run', 'queue_test.save_fetched_page',
  'complete_fetch_job', 'connect_portal_with_tokens', 'claim_portal_token', 'acquire_hubspot_requests', 'queue_stats', 'delete_finished_jobs',
];

interface Tenant { userId: string; portalId: string; runId: string; notificationId: string }
let a: Tenant;
let b: Tenant;

/** A user with a finished fetch run (content + notification). */
async function seedTenant(sql: Sql): Promise<Tenant> {
  const { userId, portalId } = await createUserWithPortal(sql);
  const run = await createRun(sql, { portalId, requestedBy: userId, kind: 'fetch', contentTypes: ['site_pages'] });
  const job = (await claimNextJob(sql, 'w'))!;
  expect(job.runId).toBe(run.runId);
  await saveFetchedPage(sql, job, [{ id: `${userId}-1`, updatedAt: null, data: {} }, { id: 'shared-id', updatedAt: null, data: {} }], null);
  expect(await completeFetchJob(sql, job)).toBe(true);
  const [n] = await sql`select id from public.notifications where run_id = ${run.runId!}`;
  return { userId, portalId, runId: run.runId!, notificationId: String(n!.id) };
}

/** Gives the tenant an unfinished run too. */
async function addOpenRun(sql: Sql, t: Tenant): Promise<void> {
  const open = await createRun(sql, { portalId: t.portalId, requestedBy: t.userId, kind: 'fetch', contentTypes: ['blog_posts', 'blog_tags'] });
  t.runId = open.runId!;
}

/** Expects `fn` to be refused by a table privilege (not by something incidental, like a check constraint's function). */
async function expectTableDenied(fn: () => Promise<unknown>, label: string) {
  const err = await pgError(fn);
  expect(`${err.code} ${err.message}`, label).toMatch(/^42501 permission denied for table/);
}

const claims = (t: Tenant) => ({ sub: t.userId, role: 'authenticated', aud: 'authenticated' });
const anon = { sub: '', role: 'anon' };

/** Runs `fn` as a database role in a transaction that is always rolled back. */
async function asRole<T>(role: string, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  let out: T;
  const rollback = new Error('rollback');
  try {
    await db.sql.begin(async (tx) => {
      await tx`select set_config('role', ${role}, true)`;
      out = await fn(tx);
      throw rollback;
    });
  } catch (e) {
    if (e !== rollback) throw e;
  }
  return out!;
}

/** `select public.fn(null::type, ...)` for every argument of the function. */
async function nullCall(qualified: string): Promise<string> {
  const [schema, name] = qualified.includes('.') ? qualified.split('.') as [string, string] : ['public', qualified];
  const [row] = await db.sql`select oidvectortypes(p.proargtypes) as args from pg_proc p
                              where p.pronamespace = ${schema}::regnamespace and p.proname = ${name}`;
  expect(row, `function ${schema}.${name} exists`).toBeDefined();
  const args = (row!.args as string).split(', ').filter(Boolean).map((t) => `null::${t}`);
  return `select ${schema}.${name}(${args.join(', ')})`;
}

beforeAll(async () => {
  a = await seedTenant(db.sql);
  b = await seedTenant(db.sql);
  await addOpenRun(db.sql, a);
  await addOpenRun(db.sql, b);
  expect(await claimJobs(db.sql, 'w', 2)).toHaveLength(2); // some running jobs too
});

describe('RLS: users see only their own rows', () => {
  it.each(Object.keys(TABLES) as Table[])('%s: select returns exactly the caller\'s rows', async (table) => {
    const col = TABLES[table];
    for (const [me, other] of [[a, b], [b, a]] as const) {
      const [expected] = await db.sql.unsafe(`select count(*)::int as n from public.${table} where ${col} = $1`, [me.userId]);
      expect(expected!.n).toBeGreaterThan(0);
      const rows = await asUser(db.sql, claims(me), (tx) => tx.unsafe(`select ${col} as owner from public.${table}`));
      expect(rows).toHaveLength(expected!.n as number);
      expect(new Set(rows.map((r) => r.owner))).toEqual(new Set([me.userId]));
      const direct = await asUser(db.sql, claims(me), (tx) => tx.unsafe(`select 1 from public.${table} where ${col} = $1`, [other.userId]));
      expect(direct).toHaveLength(0);
    }
  });

  it('a signed-in user without rows, and a user with a forged sub claim of nobody, see nothing', async () => {
    for (const table of Object.keys(TABLES)) {
      const rows = await asUser(db.sql, { sub: '00000000-0000-0000-0000-000000000000', role: 'authenticated' }, (tx) =>
        tx.unsafe(`select * from public.${table}`));
      expect(rows).toHaveLength(0);
    }
  });

  it('anon can read no table at all', async () => {
    for (const table of Object.keys(TABLES)) {
      await expectTableDenied(() => asUser(db.sql, anon, (tx) => tx.unsafe(`select * from public.${table}`)), `anon select ${table}`);
    }
  });
});

describe('RLS: users change nothing', () => {
  it('insert, update and delete are refused on every table, for own and others\' rows', async () => {
    const before = await databaseDigest(db.sql);
    const inserts: Record<Table, [string, unknown[]]> = {
      portals: ['insert into public.portals (owner_id, hubspot_portal_id, name) values ($1, 424242, $2)', [a.userId, 'mine']],
      runs: ['insert into public.runs (portal_id, owner_id, requested_by, kind, content_types) values ($1, $2, $2, \'fetch\', \'{url_redirects}\')', [a.portalId, a.userId]],
      jobs: ['insert into public.jobs (run_id, portal_id, owner_id, kind, content_type) values ($3, $1, $2, \'fetch\', \'url_redirects\')', [a.portalId, a.userId, a.runId]],
      hubspot_content: ['insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data) values ($1, $2, \'site_pages\', \'x\', \'{}\')', [a.portalId, a.userId]],
      notifications: ['insert into public.notifications (user_id, run_id, kind, message) values ($1, $2, \'run_completed\', \'fake\')', [a.userId, a.runId]],
    };
    const updates: Record<Table, string> = {
      portals: 'name = \'hacked\'', runs: 'status = \'completed\', finished_at = now()', jobs: 'attempts = 0',
      hubspot_content: 'deleted_at = now()', notifications: 'message = \'hacked\'',
    };
    for (const table of Object.keys(TABLES) as Table[]) {
      for (const user of [a, b]) {
        const [text, params] = inserts[table];
        await expectTableDenied(() => asUser(db.sql, claims(user), (tx) => tx.unsafe(text, params as never[])), `insert ${table}`);
        await expectTableDenied(() => asUser(db.sql, claims(user), (tx) => tx.unsafe(`update public.${table} set ${updates[table]}`)), `update ${table}`);
        await expectTableDenied(() => asUser(db.sql, claims(user), (tx) => tx.unsafe(`delete from public.${table}`)), `delete ${table}`);
        await expectTableDenied(() => asUser(db.sql, anon, (tx) => tx.unsafe(`delete from public.${table}`)), `anon delete ${table}`);
      }
    }
    expect(await databaseDigest(db.sql)).toBe(before);
  });

  it('no column but notifications.read_at can be updated by a user, even to its own value', async () => {
    const before = await databaseDigest(db.sql);
    const cols = await db.sql`select table_name, column_name from information_schema.columns
                               where table_schema = 'public' and table_name in ${db.sql(Object.keys(TABLES))}
                                 and is_identity = 'NO' and is_generated = 'NEVER' order by 1, 2`;
    expect(cols.length).toBeGreaterThan(50);
    for (const { table_name: table, column_name: col } of cols) {
      if (table === 'notifications' && col === 'read_at') continue;
      await expectTableDenied(() => asUser(db.sql, claims(a), (tx) => tx.unsafe(`update public.${table} set ${col} = ${col}`)), `update ${table}.${col}`);
    }
    expect(await databaseDigest(db.sql)).toBe(before);
  });

  it('a user can mark only their own notification read, and change nothing else on it', async () => {
    const other = await db.sql`select * from public.notifications where id = ${b.notificationId}`;
    // Someone else's notification: invisible, so nothing is updated.
    const foreign = await asUser(db.sql, claims(a), (tx) => tx`update public.notifications set read_at = now() where id = ${b.notificationId}`);
    expect(foreign.count).toBe(0);
    const all = await asUser(db.sql, claims(a), (tx) => tx`update public.notifications set read_at = now() where user_id = ${b.userId}`);
    expect(all.count).toBe(0);
    expect(await db.sql`select * from public.notifications where id = ${b.notificationId}`).toEqual(other);

    // Other columns, even of one's own notification: no privilege.
    for (const set of ['message = \'x\'', 'kind = \'run_failed\'', `user_id = '${b.userId}'`, 'created_at = now()']) {
      await expectTableDenied(() => asUser(db.sql, claims(a), (tx) => tx.unsafe(`update public.notifications set ${set} where id = $1`, [a.notificationId])), set);
    }
    // anon cannot mark anything.
    await expectTableDenied(() => asUser(db.sql, anon, (tx) => tx`update public.notifications set read_at = now()`), 'anon read_at');

    const mine = await asUser(db.sql, claims(a), (tx) => tx`update public.notifications set read_at = now() where id = ${a.notificationId} returning id, read_at`);
    expect(mine).toHaveLength(1);
    const [row] = await db.sql`select read_at, user_id, message from public.notifications where id = ${a.notificationId}`;
    expect(row!.read_at).toBeInstanceOf(Date);
    expect(row!.user_id).toBe(a.userId);
    expect(await db.sql`select * from public.notifications where id = ${b.notificationId}`).toEqual(other);
  });
});

describe('grants on the queue API', () => {
  it.each(QUEUE_FUNCTIONS)('authenticated and anon cannot execute %s; service_role can', async (name) => {
    const call = await nullCall(name);
    const before = await databaseDigest(db.sql);
    for (const who of [claims(a), anon]) {
      const err = await pgError(() => asUser(db.sql, who, (tx) => tx.unsafe(call)));
      expect(err.code, `${who.role} ${call}`).toBe('42501');
      expect(err.message).toMatch(/permission denied for (function|schema queue_test)/);
    }
    // The service role gets past the privilege check (to the function's own validation, or a result).
    const res = await asRole('service_role', (tx) => tx.unsafe(call).then(() => 'ok', (e: { code?: string }) => e.code ?? String(e)));
    expect(res).not.toBe('42501');
    expect(await databaseDigest(db.sql)).toBe(before);
  });

  it('authenticated cannot read private tables or call private functions', async () => {
    for (const q of [
      'select * from private.portal_credentials',
      'select * from private.job_kinds',
      'select * from private.hubspot_request_budgets',
      'select private.settle_run(null::uuid)',
      'select private.fail_exhausted_jobs(1)',
      'select nextval(\'private.fencing_token_seq\')',
    ]) {
      for (const who of [claims(a), anon]) {
        const err = await pgError(() => asUser(db.sql, who, (tx) => tx.unsafe(q)));
        expect(err.code, `${who.role}: ${q}`).toBe('42501');
      }
    }
  });

  it('service_role can write the tables it is granted directly (check constraints included)', async () => {
    const counts = await asRole('service_role', async (tx) => {
      const out: Record<string, number> = {};
      for (const [table, set] of Object.entries({
        portals: 'name = name', runs: 'content_types = content_types', jobs: 'content_type = content_type',
        hubspot_content: 'content_type = content_type', notifications: 'read_at = read_at',
      })) {
        out[table] = (await tx.unsafe(`update public.${table} set ${set}`)).count;
      }
      out.inserted = (await tx`insert into public.jobs (run_id, portal_id, owner_id, kind, content_type)
                                values (${a.runId}, ${a.portalId}, ${a.userId}, 'export', 'site_pages')`).count;
      return out;
    });
    for (const [table, n] of Object.entries(counts)) expect(n, table).toBeGreaterThan(0);
  });

  it('service_role runs the whole queue flow and reads every table', async () => {
    const result = await asRole('service_role', async (tx) => {
      const sql = tx as unknown as Sql;
      const portalId = await connectPrivateAppPortal(sql, testTokenKeys, { ownerId: a.userId, hubspotPortalId: 31337, name: 'svc', accessToken: 'svc-token' });
      const run = await createRun(sql, { portalId, requestedBy: a.userId, kind: 'export', contentTypes: ['hubdb_rows'] });
      const job = (await claimNextJob(sql, 'svc-worker', ['export']))!;
      const [hb] = await tx`select public.heartbeat_job(${job.id}, ${job.fencingToken}, 1, 2, null) as ok`;
      const [done] = await tx`select public.complete_job(${job.id}, ${job.fencingToken}, null) as ok`;
      const [creds] = await tx`select decision, access_token_enc, access_token_legacy from public.claim_portal_token(${portalId}, 'svc-worker')`;
      const [wait] = await tx`select wait_ms as w from public.acquire_hubspot_requests(31337, 1, 10, 1000)`;
      const [stats] = await tx`select public.queue_stats() as s`;
      const [rec] = await tx`select public.settle_stuck_runs() as n`;
      const [del] = await tx`select public.delete_finished_jobs(interval '1 day', 10) as n`;
      const [run2] = await tx`select status from public.runs where id = ${run.runId!}`;
      const counts = await Promise.all(Object.keys(TABLES).map((t) => tx.unsafe(`select count(*)::int as n from public.${t}`)));
      return { job: job.runId === run.runId, hb: hb!.ok, done: done!.ok, decision: creds!.decision, legacy: creds!.access_token_legacy, sealed: creds!.access_token_enc as string, wait: wait!.w, stats: typeof stats!.s, rec: rec!.n, del: del!.n, status: run2!.status, counts: counts.map((c) => c[0]!.n) };
    });
    expect(result).toMatchObject({ job: true, hb: true, done: true, decision: 'use', legacy: null, wait: 0, stats: 'object', rec: 0, del: 0, status: 'completed' });
    for (const n of result.counts) expect(n).toBeGreaterThan(0);
    expect(result.sealed).toMatch(/^v\d\.test1\./); // the sealed token, for the functions to open; never the token itself
    expect(result.sealed).not.toContain('svc-token');
  });
});
