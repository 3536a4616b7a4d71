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
import { PROJECT_ROOT, withAdmin, withDatabase } from '../scripts/lib/local-postgres.ts';
import { asUser, type TransactionSql } from '../shared/db.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { pgError } from './support/queue-fixtures.ts';

const db = useTestDatabase();
const MIGRATION = path.join(PROJECT_ROOT, 'supabase/migrations/20261130002000_exports_bucket.sql');
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
    expect((await tryAs((tx) => tx`delete from storage.objects where bucket_id = 'exports'`) as { count: number }).count).toBe(0);
    const [n] = await db.sql`select count(*)::int as n from storage.objects`;
    expect(n!.n).toBe(6);
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
