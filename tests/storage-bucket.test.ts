// The `exports` bucket migration, with RLS as two different users (exactly as
// Storage runs a user's request: `set local role authenticated` + the JWT's
// claims): each owner reads only the objects under their own folder of that
// bucket; nobody but the service role writes; the migration is idempotent and
// a no-op (with a notice) where Storage's schema is absent.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import postgres from 'postgres';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, withAdmin, withDatabase } from '../local/postgres.ts';
import { asUser, type TransactionSql } from '../shared/db.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();
class Rollback extends Error {}
const MIGRATION = path.join(PROJECT_ROOT, 'supabase/schemas/0950_storage_exports_bucket.sql');
let a: string;
let b: string;

const as = (userId: string) => ({ sub: userId, role: 'authenticated', aud: 'authenticated' });
const visible = (userId: string) =>
  asUser(db.sql, as(userId), async (tx) => (await tx`select bucket_id, name from storage.objects order by name`).map((r) => `${r.bucket_id}:${r.name}`));

beforeAll(async () => {
  a = await createUser(db.sql);
  b = await createUser(db.sql);
  await db.sql`insert into storage.buckets (id, name, public) values ('other', 'other', false) on conflict do nothing`;
  for (const [bucket, name] of [
    ['exports', `${a}/run-1/site_pages-7.csv`],
    ['exports', `${a}/run-2/blog_posts-9.csv.partial-9`],
    ['exports', `${b}/run-3/site_pages-4.csv`],
    ['exports', `not-a-uuid/${a}.csv`],
    ['exports', `${a}.csv`],
    ['other', `${a}/elsewhere.csv`],
  ]) {
    await db.sql`insert into storage.objects (bucket_id, name, owner_id) values (${bucket!}, ${name!}, 'service')`;
  }
});

describe('exports bucket', () => {
  it('exists, is private and has a file-size limit', async () => {
    const [bucket] = await db.sql`select public, file_size_limit from storage.buckets where id = 'exports'`;
    expect(bucket).toEqual({ public: false, file_size_limit: '52428800' });
  });

  it('each owner reads only the objects under their own folder of the exports bucket', async () => {
    expect(await visible(a)).toEqual([`exports:${a}/run-1/site_pages-7.csv`, `exports:${a}/run-2/blog_posts-9.csv.partial-9`]);
    expect(await visible(b)).toEqual([`exports:${b}/run-3/site_pages-4.csv`]);
    expect(await visible(randomUUID())).toEqual([]);
    const anon = await asUser(db.sql, { sub: '', role: 'anon' }, (tx) => tx`select name from storage.objects`);
    expect(anon).toHaveLength(0);
  });

  it('users write nothing: insert, update and delete are refused or touch no row', async () => {
    const tryAs = (fn: (tx: TransactionSql) => Promise<unknown>) => asUser(db.sql, as(a), fn);
    const insert = await pgError(() => tryAs((tx) => tx`insert into storage.objects (bucket_id, name) values ('exports', ${`${a}/mine.csv`})`));
    expect(insert.code).toBe('42501'); // new row violates row-level security policy
    expect((await tryAs((tx) => tx`update storage.objects set name = name || 'x' where bucket_id = 'exports'`) as { count: number }).count).toBe(0);
    // Deleting is refused outright: no row of storage.objects is deleted by SQL (see below).
    expect((await pgError(() => tryAs((tx) => tx`delete from storage.objects where bucket_id = 'exports'`))).code).toBe('42501');
    const [n] = await db.sql`select count(*)::int as n from storage.objects`;
    expect(n!.n).toBe(6);
  });

  it('as on Supabase, nobody deletes storage rows by SQL (not even the owner of the tables): only the Storage API does', async () => {
    // supabase/storage's migration 0055-prevent-direct-deletes: storage.protect_delete() refuses every DELETE
    // statement on storage.objects and storage.buckets unless the transaction set storage.allow_delete_query,
    // as the Storage server does for its own (so the object in the backend is never orphaned).
    for (const table of ['objects', 'buckets']) {
      const refused = await pgError(() => db.sql.unsafe(`delete from storage.${table} where false`));
      expect(refused).toEqual({ code: '42501', message: 'Direct deletion from storage tables is not allowed. Use the Storage API instead.' });
    }
    const name = `${a}/run-9/deleted-by-the-api.csv`;
    await db.sql`insert into storage.objects (bucket_id, name, owner_id) values ('exports', ${name}, 'service')`;
    const deleted = await db.sql.begin(async (tx) => {
      await tx`select set_config('storage.allow_delete_query', 'true', true)`;
      return (await tx`delete from storage.objects where bucket_id = 'exports' and name = ${name}`).count;
    });
    expect(deleted).toBe(1);
    // The setting was the transaction's only.
    expect((await pgError(() => db.sql`delete from storage.objects where name = ${name}`)).code).toBe('42501');
  });

  it('as on Supabase, the API roles hold every privilege on the storage tables, TRUNCATE included (docs/reliability.md)', async () => {
    // supabase/storage's migration 0046-buckets-objects-grants: `grant all on storage.buckets, storage.objects`
    // to service_role, authenticated and anon. The stand-in grants the same, no more and no less.
    const rows = await db.sql`
      select r.role, t.tbl, array_agg(p.priv order by p.priv) filter (where has_table_privilege(r.role, t.tbl, p.priv)) as held
        from unnest(array['anon', 'authenticated', 'service_role']) r(role)
       cross join unnest(array['storage.buckets', 'storage.objects']) t(tbl)
       cross join unnest(array['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
       group by 1, 2 order by 1, 2`;
    const all = ['DELETE', 'INSERT', 'REFERENCES', 'SELECT', 'TRIGGER', 'TRUNCATE', 'UPDATE'];
    expect(rows.map((r) => [r.role, r.tbl, r.held])).toEqual(
      ['anon', 'authenticated', 'service_role'].flatMap((role) => [[role, 'storage.buckets', all], [role, 'storage.objects', all]]),
    );
  });

  it('the bootstrap adds the protection only to the stand-in tables, and re-running it keeps one trigger each', async () => {
    const bootstrap = await readFile(path.join(PROJECT_ROOT, 'local/supabase-bootstrap.sql'), 'utf8');
    await db.sql.unsafe(bootstrap);
    const triggers = async () =>
      (await db.sql`select tgrelid::regclass::text as t, tgname from pg_trigger where tgname like 'protect_%_delete' order by 1`).map((r) => `${r.t}:${r.tgname}`);
    expect(await triggers()).toEqual(['storage.buckets:protect_buckets_delete', 'storage.objects:protect_objects_delete']);
    // Where Supabase Storage's own migrations ran (storage.migrations exists), the bootstrap leaves its protection alone.
    await db.sql.begin(async (tx) => {
      await tx`create table storage.migrations (id int primary key, name text)`;
      await tx`drop trigger protect_objects_delete on storage.objects`;
      await tx.unsafe(bootstrap);
      expect((await tx`select count(*)::int as n from pg_trigger where tgname = 'protect_objects_delete'`)[0]!.n).toBe(0);
      throw new Rollback();
    }).catch((e) => {
      if (!(e instanceof Rollback)) throw e;
    });
    expect(await triggers()).toEqual(['storage.buckets:protect_buckets_delete', 'storage.objects:protect_objects_delete']);
  });

  it('the migration is idempotent: re-running it keeps one policy and makes a bucket made public private again', async () => {
    const text = await readFile(MIGRATION, 'utf8');
    await db.sql`update storage.buckets set public = true, file_size_limit = null where id = 'exports'`;
    await db.sql.unsafe(text);
    await db.sql.unsafe(text);
    const [bucket] = await db.sql`select public, file_size_limit from storage.buckets where id = 'exports'`;
    expect(bucket).toEqual({ public: false, file_size_limit: '52428800' });
    const policies = await db.sql`select policyname, cmd, roles::text[] as roles from pg_policies where schemaname = 'storage' and tablename = 'objects'`;
    expect(policies).toEqual([{ policyname: 'exports: owners read their own files', cmd: 'SELECT', roles: ['authenticated'] }]);
    expect(await visible(b)).toEqual([`exports:${b}/run-3/site_pages-4.csv`]);
  });

  it('is a no-op with a notice on a Postgres without the storage schema', async () => {
    const adminUrl = withDatabase(db.directUrl, 'postgres');
    const name = `queue_nostorage_${randomUUID().slice(0, 8)}`;
    await withAdmin(adminUrl, (sql) => sql.unsafe(`create database "${name}"`));
    const notices: string[] = [];
    const sql = postgres(withDatabase(db.directUrl, name), { max: 1, onnotice: (n) => notices.push(String(n.message)) });
    try {
      await sql.unsafe(await readFile(MIGRATION, 'utf8'));
      expect(notices.join('\n')).toMatch(/storage schema not found/);
      const [row] = await sql`select to_regnamespace('storage') as ns`;
      expect(row!.ns).toBeNull();
    } finally {
      await sql.end({ timeout: 5 });
      await withAdmin(adminUrl, (s) => s.unsafe(`drop database if exists "${name}" with (force)`));
    }
  });
});
