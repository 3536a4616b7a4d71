// The functions' database connections through a real transaction-mode pooler
// (PgBouncer, pool_mode = transaction) with one connection per pool, as the
// functions run by default. postgres.js pipelines queries onto a busy
// connection; behind a transaction pooler that wedges the connection for good
// (porsager/postgres#970). connectDatabase's gated socket keeps one request in
// flight per connection: the same load then completes, and everything else
// postgres.js does (transactions, reserved connections, COPY both ways, errors
// mid-stream, large parameters) still works.
import { execFile, spawnSync } from 'node:child_process';
import { chmod, chown, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, withAdmin, type LocalPostgres } from '../local/postgres.ts';
import { findPgBouncer, PGBOUNCER_INSTALL_HINT, startPgBouncer, type PgBouncer } from '../local/pgbouncer.ts';
import { asUser, connectDatabase, type Sql } from '../shared/db.ts';
import { useTestDatabase } from './support/database.ts';

const run = promisify(execFile);
const db = useTestDatabase();
const bin = findPgBouncer();
let bouncer: PgBouncer;
let pooled: string;
const pools: Sql[] = [];

const open = (opts: { serialize?: boolean; max?: number } = {}) => {
  const sql = connectDatabase(pooled, { max: opts.max ?? 1, serialize: opts.serialize });
  pools.push(sql);
  return sql;
};

/** 'ok', or 'HANG' when `p` has not settled after `ms`. */
const settledWithin = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => 'ok', () => 'error'), new Promise<string>((r) => setTimeout(() => r('HANG'), ms))]);

/** Ten parameterless and ten parameterized queries at once, as concurrent jobs issue them. */
const burst = (sql: Sql) => Array.from({ length: 20 }, (_, i) => (i % 2 ? sql`select ${i}::int as n` : sql`select 1 as n`));

if (!bin) console.warn(`db-pooler tests skipped: pgbouncer not found (${PGBOUNCER_INSTALL_HINT})`);

describe.skipIf(!bin)('connections through a transaction-mode pooler (PgBouncer)', () => {
  beforeAll(async () => {
    bouncer = await startPgBouncer({ upstreamUrl: db.directUrl });
    pooled = bouncer.urlFor(db.directUrl);
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end({ timeout: 1 }).catch(() => {})));
    await bouncer?.stop();
  });

  it('without the gate, bursts on one connection wedge it (the hazard the gate exists for)', async () => {
    // Whether a burst wedges depends on how its bytes are cut into TCP reads: try fresh pools until one does.
    let hung = 0;
    let rounds = 0;
    while (hung === 0 && rounds < 40) {
      rounds++;
      const sql = open({ serialize: false });
      await sql`select 1`;
      const outcomes = await Promise.all(burst(sql).map((q) => settledWithin(q, 2000)));
      hung = outcomes.filter((o) => o === 'HANG').length;
      await sql.end({ timeout: 0.1 }).catch(() => {});
    }
    // If this ever sees no hang, postgres.js or the pooler stopped pipelining into a released server.
    expect(hung, `no burst of ${rounds} wedged`).toBeGreaterThan(0);
  });

  it('with the gate (the default), the same bursts complete, on 40 fresh pools', async () => {
    for (let round = 0; round < 40; round++) {
      const sql = open();
      await sql`select 1`;
      const outcomes = await Promise.all(burst(sql).map((q) => settledWithin(q, 5000)));
      expect(outcomes, `round ${round}`).toEqual(Array(20).fill('ok'));
      await sql.end({ timeout: 1 });
    }
  });

  it('transactions, RLS-style asUser, reserved connections and errors mid-burst keep working', async () => {
    const sql = open();
    const [tx, user, bad, after] = await Promise.all([
      sql.begin(async (t) => {
        await t`create temporary table scratch (n int) on commit drop`;
        await t`insert into scratch select generate_series(1, ${5}::int)`;
        return (await t`select sum(n)::int as s from scratch`)[0]!.s;
      }),
      asUser(sql, { sub: '00000000-0000-0000-0000-000000000001', role: 'authenticated' }, async (t) =>
        (await t`select current_user as u, current_setting('request.jwt.claims', true)::jsonb ->> 'sub' as sub`)[0]),
      sql`select * from no_such_table where id = ${1}`.catch((e: { code?: string }) => e.code),
      sql`select ${'still fine'}::text as t`,
    ]);
    expect(tx).toBe(15);
    expect(user).toEqual({ u: 'authenticated', sub: '00000000-0000-0000-0000-000000000001' });
    expect(bad).toBe('42P01');
    expect(after[0]!.t).toBe('still fine');
    const reserved = await sql.reserve();
    try {
      await reserved`begin`;
      expect((await reserved`select ${2}::int as n`)[0]!.n).toBe(2);
      await reserved`commit`;
    } finally {
      reserved.release();
    }
  });

  /** COPY 2000 rows in, stream them out through a consumer, then run two more queries (one with 1 MB). */
  const copyRoundTrip = async (sql: Sql, table: string) => {
    await sql`create table if not exists ${sql(table)} (n int, t text)`;
    await pipeline(Readable.from(Array.from({ length: 2000 }, (_, i) => `${i}\tline ${i}\n`)), await sql`copy ${sql(table)} (n, t) from stdin`.writable());
    let lines = 0;
    await pipeline(await sql`copy (select n, t from ${sql(table)} order by n) to stdout`.readable(), new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines += chunk.toString().split('\n').length - 1;
        cb();
      },
    }));
    const big = 'x'.repeat(1024 * 1024);
    const after = await settledWithin(Promise.all([sql`select length(${big}::text) as n`, sql`select 1 as one`]), 3000);
    return { lines, after };
  };

  it('COPY to and from the client, then a 1 MB parameter: fine through the gate, a hang without it', async () => {
    // postgres.js pauses the socket for a slow COPY TO STDOUT consumer and may leave it paused after the
    // stream ends; the gated socket resumes it when the next request is written.
    for (let round = 0; round < 5; round++) {
      expect(await copyRoundTrip(open(), `gate_copy_on_${round}`), `round ${round}`).toEqual({ lines: 2000, after: 'ok' });
    }
    // The hang is a race (the pause must land as the stream ends): it shows within a few rounds alone, in more
    // on a loaded machine (17 with a busy process per core), so the ungated rounds go on until one hangs, at most 60.
    let hung = false;
    for (let round = 0; round < 60 && !hung; round++) {
      const { lines, after } = await copyRoundTrip(open({ serialize: false }), `gate_copy_off_${round}`);
      expect(lines).toBe(2000);
      hung = after === 'HANG';
    }
    expect(hung, 'no ungated round hung after its COPY TO STDOUT').toBe(true);
  });

  it('one connection per pool: the burst used one client connection to the pooler', async () => {
    const sql = connectDatabase(pooled, { max: 1, applicationName: 'gate-count' });
    pools.push(sql);
    await Promise.all(burst(sql));
    const clients = await bouncer.admin('SHOW CLIENTS');
    expect(clients.filter((c) => c.application_name === 'gate-count')).toHaveLength(1);
  });
});

// TLS is negotiated by the gated socket itself (SSLRequest, then TLS on the
// same connection), so the gate still sees the protocol: checked against a
// private Postgres with ssl = on and a throwaway self-signed certificate.
const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
if (!hasOpenssl) console.warn('TLS test skipped: openssl (to make a throwaway certificate) not found');

describe.skipIf(!hasOpenssl)('TLS (sslmode=require) through the gated socket', () => {
  let server: LocalPostgres;
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'queue-tls-pg-'));
    server = await startEmbeddedPostgres({ dataDir: path.join(root, 'data') });
    const certDir = path.join(root, 'data'); // inside the data directory: readable by the server's OS user
    await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-days', '1',
      '-keyout', path.join(certDir, 'tls.key'), '-out', path.join(certDir, 'tls.crt')]);
    const owner = await stat(path.join(certDir, 'PG_VERSION'));
    for (const f of ['tls.key', 'tls.crt']) {
      await chown(path.join(certDir, f), owner.uid, owner.gid);
      await chmod(path.join(certDir, f), 0o600);
    }
    await withAdmin(server.adminUrl, async (sql) => {
      await sql.unsafe(`alter system set ssl_cert_file = 'tls.crt'`);
      await sql.unsafe(`alter system set ssl_key_file = 'tls.key'`);
      await sql.unsafe('alter system set ssl = on');
      await sql.unsafe('select pg_reload_conf()');
    });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('connects over TLS and still keeps one request in flight', async () => {
    const sql = connectDatabase(`${server.adminUrl}?sslmode=require`, { max: 1 });
    try {
      const [row] = await sql`select ssl from pg_stat_ssl where pid = pg_backend_pid()`;
      expect(row!.ssl).toBe(true);
      const outcomes = await Promise.all(burst(sql).map((q) => settledWithin(q, 5000)));
      expect(outcomes).toEqual(Array(20).fill('ok'));
    } finally {
      await sql.end({ timeout: 1 });
    }
    // verify-full refuses the self-signed certificate: the query fails, it does not hang.
    const strict = connectDatabase(`${server.adminUrl}?sslmode=verify-full`, { max: 1 });
    try {
      expect(await settledWithin(strict`select 1`, 15_000)).toBe('error');
    } finally {
      await strict.end({ timeout: 1 });
    }
  });
});
