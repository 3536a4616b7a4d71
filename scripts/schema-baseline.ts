// The migrations are generated from the declarative schema: two files.
//
//   npm run schema:baseline                 writes supabase/migrations/<timestamp>_baseline.sql (every
//                                           file of supabase/schemas/ in lexical order but the cron
//                                           jobs', under a generated-file header) and, stamped one
//                                           second later, <timestamp+1>_cron_jobs.sql (the cron jobs'
//                                           files, 09xx_cron_*.sql): a small migration of their own,
//                                           after the schema's (docs/decisions/0069)
//   npm run schema:baseline -- --check      exits 1 when either is not what the schema files give
//   npm run schema:baseline -- compare <git-ref> [--schemas]
//                                           builds one database from the migrations at <git-ref>
//                                           and one from this checkout's migrations (or, with
//                                           --schemas, straight from supabase/schemas/), and
//                                           compares their catalogs (scripts/lib/catalog-snapshot.ts)
//
// Until the first release these two are the only migrations and are
// regenerated whenever a schema file changes. After it, they are frozen:
// a change is made in its schema file and in a new migration written next to
// it, and tests/schema-sync.test.ts keeps the two equal (docs/decisions/0001).
import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { catalogSnapshot, diffSnapshots, formatDiff, snapshotCounts } from './lib/catalog-snapshot.ts';
import { isCronJobFile } from '../local/cron/cron.ts';
import {
  createDatabaseFromSchemas,
  createMigratedDatabase,
  dropDatabase,
  PROJECT_ROOT,
  schemaFiles,
  SCHEMAS_DIR,
  startEmbeddedPostgres,
  type LocalPostgres,
} from '../local/postgres.ts';

export const MIGRATIONS_DIR = path.join(PROJECT_ROOT, 'supabase/migrations');
/** The first line of the generated baseline: how tests and tools recognise it. */
export const GENERATED_MARK = '-- GENERATED FILE: do not edit. The baseline migration, made by scripts/schema-baseline.ts';
/** The first line of the generated cron jobs' migration. */
export const CRON_GENERATED_MARK = '-- GENERATED FILE: do not edit. The cron jobs\' migration, made by scripts/schema-baseline.ts';

/** A header, then each file under a line naming it. */
async function concatenated(header: string[], files: string[]): Promise<string> {
  const parts = [...header, ''];
  for (const file of files) {
    const text = await readFile(file, 'utf8');
    parts.push(`-- ==== supabase/schemas/${path.basename(file)} ====`, text.endsWith('\n') ? text : `${text}\n`);
  }
  return parts.join('\n');
}

/** The baseline's text: a header, then every schema file but the cron jobs' under a line naming it. */
export async function baselineText(dir: string = SCHEMAS_DIR): Promise<string> {
  return await concatenated([
    GENERATED_MARK,
    '-- (npm run schema:baseline) from supabase/schemas/, whose files it concatenates in',
    '-- lexical order, all but the cron jobs\' (09xx_cron_*.sql: the next migration).',
    '-- Change the schema files and regenerate it; docs/decisions/0001.',
  ], (await schemaFiles(dir)).filter((f) => !isCronJobFile(path.basename(f))));
}

/** The cron jobs' migration: a header, then the schema's cron job files (09xx_cron_*.sql). */
export async function cronJobsText(dir: string = SCHEMAS_DIR): Promise<string> {
  return await concatenated([
    CRON_GENERATED_MARK,
    '-- (npm run schema:baseline) from the cron job files of supabase/schemas/ (09xx_cron_*.sql),',
    '-- applied after the baseline: pg_cron 1.6.4 can miss the cron.job change of one',
    '-- large migration, never a small one\'s (docs/decisions/0069).',
  ], (await schemaFiles(dir)).filter((f) => isCronJobFile(path.basename(f))));
}

/** Whether a migration file is the generated baseline. */
export async function isGeneratedBaseline(file: string): Promise<boolean> {
  return (await readFile(file, 'utf8')).startsWith(GENERATED_MARK);
}

/** Whether a migration file is the generated cron jobs' migration. */
export async function isGeneratedCronJobs(file: string): Promise<boolean> {
  return (await readFile(file, 'utf8')).startsWith(CRON_GENERATED_MARK);
}

/** A migration stamp (UTC yyyymmddhhmmss) one second later. */
export function nextStamp(stamp: string): string {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$/.exec(stamp);
  if (!m) return String(BigInt(stamp) + 1n);
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  return new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s! + 1)).toISOString().replace(/\D/g, '').slice(0, 14);
}

/**
 * The generated migrations' paths: the existing ones', else the baseline named by the
 * current UTC time and the cron jobs' one second after it; `others` are the migrations written by hand.
 */
export async function generatedPaths(dir: string = MIGRATIONS_DIR): Promise<{ baseline: string; cronJobs: string; others: string[] }> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  let baseline: string | undefined;
  let cronJobs: string | undefined;
  const others: string[] = [];
  for (const f of files) {
    if (await isGeneratedBaseline(path.join(dir, f))) baseline = f;
    else if (await isGeneratedCronJobs(path.join(dir, f))) cronJobs = f;
    else others.push(f);
  }
  baseline ??= `${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}_baseline.sql`;
  cronJobs ??= `${nextStamp(baseline.split('_')[0]!)}_cron_jobs.sql`;
  return { baseline: path.join(dir, baseline), cronJobs: path.join(dir, cronJobs), others };
}

async function write(opts: { force: boolean }): Promise<void> {
  const { baseline, cronJobs, others } = await generatedPaths();
  if (others.length > 0 && !opts.force) {
    console.error(`supabase/migrations holds other migrations besides the generated ones (${others.join(', ')}).\n` +
      'After the first release the baseline is frozen: write a migration for your change instead ' +
      '(docs/decisions/0001). --force regenerates the baseline anyway.');
    process.exit(1);
  }
  await writeFile(baseline, await baselineText());
  await writeFile(cronJobs, await cronJobsText());
  const files = await schemaFiles();
  const cron = files.filter((f) => isCronJobFile(path.basename(f))).length;
  console.log(`wrote ${path.relative(PROJECT_ROOT, baseline)} from ${files.length - cron} schema files and ` +
    `${path.relative(PROJECT_ROOT, cronJobs)} from ${cron} cron job files`);
}

async function check(): Promise<void> {
  const { baseline, cronJobs } = await generatedPaths();
  let stale = false;
  for (const [file, text] of [[baseline, await baselineText()], [cronJobs, await cronJobsText()]] as const) {
    if ((await readFile(file, 'utf8').catch(() => '')) === text) {
      console.log(`${path.relative(PROJECT_ROOT, file)} is up to date`);
    } else {
      console.error(`${path.relative(PROJECT_ROOT, file)} is not what supabase/schemas/ gives: run npm run schema:baseline`);
      stale = true;
    }
  }
  if (stale) process.exit(1);
}

async function withServer<T>(fn: (adminUrl: string) => Promise<T>): Promise<T> {
  if (process.env.DATABASE_URL) return await fn(process.env.DATABASE_URL);
  const root = await mkdtemp(path.join(tmpdir(), 'schema-baseline-pg-'));
  let server: LocalPostgres | undefined;
  try {
    server = await startEmbeddedPostgres({ dataDir: path.join(root, 'data') });
    return await fn(server.adminUrl);
  } finally {
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }
}

async function snapshotOf(url: string) {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await catalogSnapshot(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function compare(ref: string, opts: { schemas: boolean }): Promise<void> {
  const project = await mkdtemp(path.join(tmpdir(), 'schema-baseline-ref-'));
  try {
    // The migrations (and config) as they were at `ref`, in a project of their own.
    const archive = execFileSync('git', ['archive', ref, 'supabase/migrations', 'supabase/config.toml'], { cwd: PROJECT_ROOT, maxBuffer: 64 << 20 });
    execFileSync('tar', ['-x', '-C', project], { input: archive });
    const refFiles = (await readdir(path.join(project, 'supabase/migrations'))).filter((f) => f.endsWith('.sql'));
    const here = opts.schemas ? 'supabase/schemas/' : `supabase/migrations/ (${(await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).length} files)`;
    console.log(`comparing ${refFiles.length} migrations at ${ref} with ${here}`);
    await withServer(async (adminUrl) => {
      const a = `schema_cmp_ref_${process.pid}`;
      const b = `schema_cmp_here_${process.pid}`;
      try {
        const urlA = await createMigratedDatabase(adminUrl, a, { recreate: true, workdir: project });
        const urlB = opts.schemas
          ? await createDatabaseFromSchemas(adminUrl, b, { recreate: true })
          : await createMigratedDatabase(adminUrl, b, { recreate: true });
        const [sa, sb] = [await snapshotOf(urlA), await snapshotOf(urlB)];
        const ca = snapshotCounts(sa);
        const cb = snapshotCounts(sb);
        console.log(Object.keys({ ...ca, ...cb }).map((k) => `  ${k}: ${ca[k] ?? 0}${ca[k] === cb[k] ? '' : ` / ${cb[k] ?? 0}`}`).join('\n'));
        const diff = diffSnapshots(sa, sb);
        if (diff.length === 0) {
          console.log('no differences');
        } else {
          console.log(`${diff.length} differences:\n${formatDiff(diff, [ref, 'here'], 200)}`);
          process.exitCode = 1;
        }
      } finally {
        await dropDatabase(adminUrl, a).catch(() => {});
        await dropDatabase(adminUrl, b).catch(() => {});
      }
    });
  } finally {
    await rm(project, { recursive: true, force: true });
  }
}

async function main(args: string[]): Promise<void> {
  if (args[0] === 'compare') {
    if (!args[1]) {
      console.error('usage: tsx scripts/schema-baseline.ts compare <git-ref> [--schemas]');
      process.exit(2);
    }
    await compare(args[1], { schemas: args.includes('--schemas') });
  } else if (args.includes('--check')) {
    await check();
  } else {
    await write({ force: args.includes('--force') });
  }
}

// Run as a script (not when a test imports baselineText and friends).
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await main(process.argv.slice(2));
