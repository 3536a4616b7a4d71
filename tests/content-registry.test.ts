// The content-type registry is the only list of content types in SQL: a ninth
// type added the documented way (one migration row, applied by the Supabase
// CLI) works end to end in a throwaway database — create_run, claim, save a
// page, complete, export run — while the real database still refuses it.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cloneDatabase, dropDatabase, PROJECT_ROOT } from '../scripts/lib/local-postgres.ts';
import { connectDatabase, type Sql } from '../shared/db.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { claimNextJob, completeFetchJob, completeJob, saveFetchedPage } from '../shared/queue.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { pgError } from './support/queue-fixtures.ts';

const run = promisify(execFile);
const db = useTestDatabase();
const NEW_TYPE = 'cms_domains';
// The documented way to add a content type: one row in a new migration.
const MIGRATION = `insert into private.content_types (content_type) values ('${NEW_TYPE}');\n`;

let workdir: string;
let throwaway: { name: string; url: string; sql: Sql };

/** A Supabase project directory with this project's migrations plus the new one. */
async function projectWithNewType(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'content-registry-'));
  await mkdir(path.join(dir, 'supabase/migrations'), { recursive: true });
  await copyFile(path.join(PROJECT_ROOT, 'supabase/config.toml'), path.join(dir, 'supabase/config.toml'));
  for (const f of await readdir(path.join(PROJECT_ROOT, 'supabase/migrations'))) {
    if (f.endsWith('.sql')) await copyFile(path.join(PROJECT_ROOT, 'supabase/migrations', f), path.join(dir, 'supabase/migrations', f));
  }
  await writeFile(path.join(dir, 'supabase/migrations/20991231000000_content_type_cms_domains.sql'), MIGRATION);
  return dir;
}

beforeAll(async () => {
  workdir = await projectWithNewType();
  const name = `queue_registry_${process.pid}_${randomUUID().slice(0, 8)}`;
  const url = await cloneDatabase(inject('pgAdminUrl'), inject('pgTemplate'), name);
  const u = new URL(url);
  u.searchParams.set('sslmode', 'disable');
  // The template already has every project migration recorded: the CLI applies only the new one.
  const { stdout, stderr } = await run(path.join(PROJECT_ROOT, 'node_modules/.bin/supabase'),
    ['migration', 'up', '--db-url', u.toString(), '--workdir', workdir],
    { env: { ...process.env, SUPABASE_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' }, maxBuffer: 16 * 1024 * 1024 });
  expect(`${stdout}${stderr}`).toMatch(/20991231000000/);
  throwaway = { name, url, sql: connectDatabase(url, { max: 4 }) };
});

afterAll(async () => {
  await throwaway?.sql.end({ timeout: 5 });
  if (throwaway) await dropDatabase(inject('pgAdminUrl'), throwaway.name);
  if (workdir) await rm(workdir, { recursive: true, force: true });
});

describe('content-type registry', () => {
  it('a ninth type added by one migration row works end to end in SQL', async () => {
    const sql = throwaway.sql;
    const { userId, portalId } = await createUserWithPortal(sql);
    const [created] = await sql`select * from public.create_run(${portalId}, ${userId}, 'fetch', ${[NEW_TYPE]}::text[], array[2])`;
    expect(created).toMatchObject({ created_types: [NEW_TYPE], duplicate_types: [] });
    const job = (await claimNextJob(sql, 'registry-worker'))!;
    expect(job).toMatchObject({ contentType: NEW_TYPE, kind: 'fetch', attempts: 1, progressTotal: 2 });
    expect(await saveFetchedPage(sql, job, [
      { id: 'd1', updatedAt: '2026-01-01T00:00:00Z', data: { domain: 'www.example.com' } },
      { id: 'd2', updatedAt: null, data: { domain: 'blog.example.com' } },
    ], { after: null, finished: true })).toEqual({ fetched: 2, added: 2, updated: 0, unchanged: 0 });
    expect(await completeFetchJob(sql, job)).toBe(true);
    const content = await sql`select hubspot_id, content_type from public.hubspot_content where portal_id = ${portalId} order by hubspot_id`;
    expect(content.map((c) => [c.hubspot_id, c.content_type])).toEqual([['d1', NEW_TYPE], ['d2', NEW_TYPE]]);
    const [runRow] = await sql`select status, content_types from public.runs where id = ${created!.run_id as string}`;
    expect(runRow).toEqual({ status: 'completed', content_types: [NEW_TYPE] });

    // An export run of the new type counts its stored items and is claimed like any other.
    const [exp] = await sql`select * from public.create_run(${portalId}, ${userId}, 'export', ${[NEW_TYPE]}::text[])`;
    const exportJob = (await claimNextJob(sql, 'registry-worker'))!;
    expect(exportJob).toMatchObject({ runId: exp!.run_id, kind: 'export', contentType: NEW_TYPE, progressTotal: 2 });
    expect(await completeJob(sql, exportJob)).toBe(true);

    // All nine types in one run.
    const all = [...CONTENT_TYPES, NEW_TYPE];
    const other = await createUserWithPortal(sql);
    const [nine] = await sql`select * from public.create_run(${other.portalId}, ${other.userId}, 'fetch', ${all}::text[])`;
    expect([...(nine!.created_types as string[])].sort()).toEqual([...all].sort());
  });

  it('the project database, without that row, refuses the type everywhere', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    const err = await pgError(() => db.sql`select * from public.create_run(${portalId}, ${userId}, 'fetch', ${[NEW_TYPE]}::text[])`);
    expect(err).toMatchObject({ code: '22023' });
    expect(err.message).toMatch(/distinct known types/);
    const fk = await pgError(() => db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data)
                                           values (${portalId}, ${userId}, ${NEW_TYPE}, 'x', '{}')`);
    expect(fk.code).toBe('23503');
    const [row] = await db.sql`select array_agg(content_type order by content_type) as types from private.content_types`;
    expect(row!.types).toEqual([...CONTENT_TYPES].sort());
  });
});
