// The declarative schema (supabase/schemas/) and the migrations
// (supabase/migrations/) describe the same database: one built from each has
// the same catalog, object by object (functions with their bodies and
// settings, columns, constraints, indexes, triggers, policies, grants, default
// privileges, publications, cron jobs, buckets, seeded rows). Change a schema
// file and write its migration (or, before the first release, regenerate the
// generated ones: the baseline, and the cron jobs' migration after it): this
// test keeps the two equal. docs/decisions/0001, 0069.
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { catalogSnapshot, diffSnapshots, formatDiff, snapshotCounts, type CatalogSnapshot } from '../scripts/lib/catalog-snapshot.ts';
import { cloneDatabase, createDatabaseFromSchemas, dropDatabase, PROJECT_ROOT, SCHEMAS_DIR, withAdmin } from '../local/postgres.ts';
import { isCronJobFile } from '../local/cron/cron.ts';
import {
  baselineText, cronJobsText, generatedPaths, isGeneratedBaseline, isGeneratedCronJobs, MIGRATIONS_DIR, nextStamp,
} from '../scripts/schema-baseline.ts';

const adminUrl = inject('pgAdminUrl');
const suffix = `${process.pid}_${randomUUID().slice(0, 8)}`;
const created: string[] = [];
let fromMigrations: CatalogSnapshot;
let migratedUrl: string;
let fromSchemas: CatalogSnapshot;

async function snapshot(url: string): Promise<CatalogSnapshot> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await catalogSnapshot(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function fromSchemaDir(name: string, dir?: string): Promise<CatalogSnapshot> {
  created.push(name);
  return await snapshot(await createDatabaseFromSchemas(adminUrl, name, { recreate: true, dir }));
}

beforeAll(async () => {
  // The template every test file clones: bootstrap + `supabase migration up` (+ the
  // test harness's queue_test helpers, which the snapshot leaves out).
  const clone = `schema_sync_migrations_${suffix}`;
  created.push(clone);
  migratedUrl = await cloneDatabase(adminUrl, inject('pgTemplate'), clone);
  fromMigrations = await snapshot(migratedUrl);
  fromSchemas = await fromSchemaDir(`schema_sync_schemas_${suffix}`);
}, 120_000);

afterAll(async () => {
  for (const name of created) await dropDatabase(adminUrl, name).catch(() => {});
});

/** Function names created by each SQL file (create [or replace] function <schema>.<name>). */
async function functionsDefinedIn(dir: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const f of (await readdir(dir)).filter((n) => n.endsWith('.sql'))) {
    const text = await readFile(path.join(dir, f), 'utf8');
    for (const m of text.matchAll(/^\s*create\s+(?:or\s+replace\s+)?function\s+([a-z_][\w]*\.[a-z_][\w]*)\s*\(/gim)) {
      const name = m[1]!.toLowerCase();
      out.set(name, [...(out.get(name) ?? []), f]);
    }
  }
  return out;
}

describe('supabase/schemas and supabase/migrations', () => {
  it('build the same database, object by object', () => {
    const diff = diffSnapshots(fromMigrations, fromSchemas);
    const counts = snapshotCounts(fromSchemas);
    console.log(`schema-sync: compared ${Object.entries(counts).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    expect(formatDiff(diff, ['migrations', 'schemas']), 'a schema file and the migrations disagree: write the migration (or regenerate the baseline)').toBe('');
    // The comparison did look at the queue.
    expect(counts.functions).toBeGreaterThan(40);
    expect(Object.keys(fromSchemas.functions!)).toContain('claim_jobs(text,integer,text[])');
    expect(counts.grants).toBeGreaterThan(100);
    expect(counts.policies).toBeGreaterThanOrEqual(6);
  });

  it('would notice a schema file changed without its migration', async () => {
    // A copy of supabase/schemas with one function body changed by a comment.
    const dir = await mkdtemp(path.join(tmpdir(), 'schema-sync-'));
    try {
      await cp(SCHEMAS_DIR, dir, { recursive: true });
      const file = (await readdir(dir)).find((f) => f.endsWith('_function_claim_jobs.sql'))!;
      const text = await readFile(path.join(dir, file), 'utf8');
      await writeFile(path.join(dir, file), text.replace('begin\n', 'begin\n  -- changed without a migration\n'));
      const changed = await fromSchemaDir(`schema_sync_changed_${suffix}`, dir);
      const diff = diffSnapshots(fromSchemas, changed);
      expect(diff.map((d) => `${d.section} ${d.key} ${d.change}`)).toEqual(['functions claim_jobs(text,integer,text[]) changed']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('write out each function once: in one schema file, never again in a migration', async () => {
    const inSchemas = await functionsDefinedIn(SCHEMAS_DIR);
    const twice = [...inSchemas].filter(([, files]) => files.length > 1);
    expect(twice.map(([fn, files]) => `${fn}: ${files.join(', ')}`)).toEqual([]);
    // The generated baseline copies the schema files; any other migration up to it must not
    // define functions (the ones after it, post-release changes, restate what they change).
    const migrations = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    const generated: string[] = [];
    const cronJobs: string[] = [];
    for (const f of migrations) {
      if (await isGeneratedBaseline(path.join(MIGRATIONS_DIR, f))) generated.push(f);
      if (await isGeneratedCronJobs(path.join(MIGRATIONS_DIR, f))) cronJobs.push(f);
    }
    expect(generated, 'one generated baseline migration').toHaveLength(1);
    expect(cronJobs, 'one generated cron jobs migration').toHaveLength(1);
    const before = migrations.filter((f) => f < generated[0]!);
    const defined = await functionsDefinedIn(MIGRATIONS_DIR);
    const stray = [...defined].flatMap(([fn, files]) => files.filter((f) => before.includes(f) || f === cronJobs[0]).map((f) => `${fn}: ${f}`));
    expect(stray).toEqual([]);
    // Nothing else under supabase/ defines functions (supabase/functions holds TypeScript).
    const other = (await readdir(path.join(PROJECT_ROOT, 'supabase'), { recursive: true }))
      .map(String)
      .filter((f) => f.endsWith('.sql') && !f.startsWith('schemas/') && !f.startsWith('migrations/'));
    expect(other).toEqual([]);
  });

  it('the cron jobs are scheduled by a migration of their own, applied right after the baseline', async () => {
    const { baseline, cronJobs } = await generatedPaths();
    const migrations = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    // Next in order, stamped one second later (the baseline keeps its name).
    expect(migrations[migrations.indexOf(path.basename(baseline)) + 1]).toBe(path.basename(cronJobs));
    expect(path.basename(cronJobs).split('_')[0]).toBe(nextStamp(path.basename(baseline).split('_')[0]!));
    // The baseline holds every schema file but the cron jobs'; the cron migration those, and nothing else.
    const filesOf = async (file: string) => [...(await readFile(file, 'utf8')).matchAll(/^-- ==== supabase\/schemas\/(\S+) ====$/gm)].map((m) => m[1]!);
    const schemaNames = (await readdir(SCHEMAS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    const cronFiles = schemaNames.filter(isCronJobFile);
    expect(cronFiles.length).toBeGreaterThanOrEqual(4);
    expect(await filesOf(cronJobs)).toEqual(cronFiles);
    expect(await filesOf(baseline)).toEqual(schemaNames.filter((f) => !isCronJobFile(f)));
    // Every cron.schedule of the schema is in a cron file, none elsewhere.
    const schedulers = [];
    for (const f of schemaNames) if (/\bcron\.schedule\s*\(/.test(await readFile(path.join(SCHEMAS_DIR, f), 'utf8'))) schedulers.push(f);
    expect(schedulers).toEqual(cronFiles);
    // `supabase migration up` applied them in that order to the template every test file clones.
    const applied = await withAdmin(migratedUrl, (sql) => sql`select version, name from supabase_migrations.schema_migrations order by version`);
    expect(applied.map((r) => `${r.version}_${r.name}.sql`)).toEqual(migrations);
  });

  it('stamps the cron jobs\' migration one second after the baseline', () => {
    expect(nextStamp('20261201111501')).toBe('20261201111502');
    expect(nextStamp('20261231235959')).toBe('20270101000000');
    expect(nextStamp('7')).toBe('8');
  });

  it('the generated migrations are what the schema files give (while they are the only migrations)', async () => {
    const { baseline, cronJobs, others } = await generatedPaths();
    if (others.length > 0) {
      console.log('schema-sync: migrations after the generated ones exist, so those are frozen; the catalog comparison above keeps them in step');
      return;
    }
    expect(await readFile(baseline, 'utf8'), 'run npm run schema:baseline').toBe(await baselineText());
    expect(await readFile(cronJobs, 'utf8'), 'run npm run schema:baseline').toBe(await cronJobsText());
  });
});
