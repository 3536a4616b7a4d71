// The migrations on a real pg_cron, as self-hosted Postgres runs it: Debian's
// postgresql-15 with postgresql-15-cron (1.4.2, which takes no sub-minute
// schedules), a throwaway cluster with pg_cron preloaded, and a database owned
// by a role that is not a superuser (as hosted Supabase's `postgres`), which
// applies the migrations with the Supabase CLI. Then public.heal_cron_jobs
// touches the jobs through pg_cron's own cron.alter_job as that role. pg_net
// and Vault are absent, so only the jobs that need pg_cron alone are
// scheduled. Skipped, with the reason printed, where those packages are not
// installed (apt-get install postgresql-15 postgresql-15-cron). Decision 0069.
import { execFile } from 'node:child_process';
import { access, appendFile, chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyBootstrap, applyMigrations, freePort, withAdmin } from '../local/postgres.ts';

const run = promisify(execFile);
const PG_BIN = '/usr/lib/postgresql/15/bin';
const PG_CRON = '/usr/lib/postgresql/15/lib/pg_cron.so';
const DATABASE = 'queue_cron_test';
const OWNER = 'queue_owner';

/** Why this machine cannot run the test, or null. */
async function missing(): Promise<string | null> {
  for (const [file, pkg] of [[`${PG_BIN}/initdb`, 'postgresql-15'], [PG_CRON, 'postgresql-15-cron']] as const) {
    if (!(await access(file).then(() => true, () => false))) return `${file} not found (apt-get install ${pkg})`;
  }
  if (userInfo().uid === 0 && !(await run('id', ['-u', 'postgres']).then(() => true, () => false))) return 'running as root without a postgres OS user to run Postgres as';
  return null;
}

const skipReason = await missing();
if (skipReason) console.log(`cron-pg-cron: skipped, ${skipReason}`);

let root: string;
let dataDir: string;
let started = false;
let superUrl: string;
let ownerUrl: string;
let migrationOutput = '';

/** Runs a Postgres binary as the OS user that owns the cluster (postgres when this is root). */
async function pgRun(bin: string, args: string[]): Promise<string> {
  const [cmd, argv] = userInfo().uid === 0 ? ['runuser', ['-u', 'postgres', '--', `${PG_BIN}/${bin}`, ...args]] : [`${PG_BIN}/${bin}`, args];
  const { stdout, stderr } = await run(cmd, argv, { cwd: root });
  return `${stdout}${stderr}`;
}

describe.skipIf(skipReason !== null)('the migrations on Debian\'s pg_cron, applied by a role that is not a superuser', () => {
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'cron-pg-cron-'));
    dataDir = path.join(root, 'data');
    if (userInfo().uid === 0) {
      const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
      const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
      await chown(root, uid, gid);
      await chmod(root, 0o700);
    }
    await pgRun('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C']);
    const port = await freePort();
    await appendFile(path.join(dataDir, 'postgresql.conf'), [
      "listen_addresses = '127.0.0.1'", `port = ${port}`, "unix_socket_directories = ''", 'fsync = off',
      "shared_preload_libraries = 'pg_cron'", `cron.database_name = '${DATABASE}'`, '',
    ].join('\n'));
    await pgRun('pg_ctl', ['-D', dataDir, '-l', path.join(root, 'log'), '-w', 'start']);
    started = true;
    superUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
    ownerUrl = `postgres://${OWNER}:owner@127.0.0.1:${port}/${DATABASE}`;
    // The platform's part: roles, a database its owner may do everything in, pg_cron (a superuser's
    // extension) with the privileges hosted Supabase gives `postgres` over it.
    await withAdmin(superUrl, async (sql) => {
      await sql.unsafe(`
        create role ${OWNER} login password 'owner' nosuperuser createrole createdb bypassrls;
        create role anon nologin noinherit; create role authenticated nologin noinherit;
        create role service_role nologin noinherit bypassrls; create role authenticator login noinherit;
        grant anon, authenticated, service_role to authenticator;
        grant anon, authenticated, service_role to ${OWNER} with admin option;`);
      await sql.unsafe(`create database ${DATABASE} owner ${OWNER}`);
    });
    await withAdmin(`postgres://postgres@127.0.0.1:${port}/${DATABASE}`, (sql) => sql.unsafe(`
      create schema extensions authorization ${OWNER};
      create extension pg_cron with schema pg_catalog;
      grant usage on schema cron to ${OWNER};
      grant all on all tables in schema cron to ${OWNER};
      grant all on all sequences in schema cron to ${OWNER};
      grant all on all functions in schema cron to ${OWNER};`));
    // The project's part, as that role.
    await applyBootstrap(ownerUrl);
    migrationOutput = await applyMigrations(ownerUrl);
  }, 120_000);

  afterAll(async () => {
    if (started) await pgRun('pg_ctl', ['-D', dataDir, '-m', 'immediate', 'stop']).catch(() => '');
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('apply, with every-minute schedules where pg_cron takes no seconds, and record the jobs', async () => {
    expect(migrationOutput).toMatch(/_cron_jobs\.sql/);
    const owner = postgres(ownerUrl, { max: 1, onnotice: () => {} });
    try {
      const [{ version }] = (await owner`select extversion as version from pg_extension where extname = 'pg_cron'`) as unknown as [{ version: string }];
      const [major, minor] = version.split(/[.-]/).map(Number) as [number, number];
      const subMinute = major > 1 || minor >= 5;
      console.log(`cron-pg-cron: pg_cron ${version}`);
      const jobs = await owner`select jobname, schedule, username, active from cron.job order by jobid`;
      // pg_net is absent: the two worker jobs are not scheduled, the two that need pg_cron alone are.
      expect(jobs.map((j) => `${j.jobname} ${j.schedule} ${j.username} ${j.active}`)).toEqual([
        `prune-queue-history ${subMinute ? '20 seconds' : '* * * * *'} ${OWNER} true`,
        `prune-oauth-install-states */5 * * * * ${OWNER} true`,
      ]);
      const recorded = await owner`select jobname from private.cron_jobs_scheduled where settled_at is null order by jobname`;
      expect(recorded.map((r) => r.jobname)).toEqual(['prune-oauth-install-states', 'prune-queue-history']);
      // The schema's tables are there: the whole migration applied.
      expect((await owner`select to_regclass('public.jobs') is not null as present`)[0]!.present).toBe(true);
    } finally {
      await owner.end({ timeout: 5 });
    }
  });

  it('heal_cron_jobs touches them once through pg_cron\'s cron.alter_job, as that role', async () => {
    const owner = postgres(ownerUrl, { max: 1, onnotice: () => {} });
    try {
      expect((await owner`select public.heal_cron_jobs() as h`)[0]!.h).toBeNull(); // scheduled just now
      // As if heal_after had passed with no run (cron.log_run is not readable by this role: pg_cron's default, on).
      await owner`delete from cron.job_run_details`;
      await owner`update private.cron_jobs_scheduled set scheduled_at = now() - heal_after - interval '1 second'`;
      const [{ h }] = (await owner`select public.heal_cron_jobs() as h`) as unknown as [{ h: { touched: string[]; error: string | null } }];
      expect(h).toMatchObject({ touched: ['prune-queue-history', 'prune-oauth-install-states'], error: null });
      expect((await owner`select public.heal_cron_jobs() as h`)[0]!.h).toBeNull();
      const jobs = await owner`select jobname from cron.job where active`;
      expect(jobs).toHaveLength(2);
    } finally {
      await owner.end({ timeout: 5 });
    }
  });
});

describe.skipIf(skipReason === null)('without postgresql-15-cron', () => {
  it('is skipped, saying why', () => {
    expect(skipReason).toMatch(/not found|postgres OS user/);
  });
});
