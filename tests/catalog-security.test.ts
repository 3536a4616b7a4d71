// Security checks over the whole catalog (so new tables and functions are
// covered without new tests), plus Supabase's own advisors.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { useTestDatabase } from './support/database.ts';

const run = promisify(execFile);
const db = useTestDatabase();
const API_ROLES = ['anon', 'authenticated'];

describe('catalog', () => {
  it('every table in public and private has row level security enabled', async () => {
    const tables = await db.sql`select n.nspname || '.' || c.relname as name, c.relrowsecurity as rls
                                  from pg_class c join pg_namespace n on n.oid = c.relnamespace
                                 where n.nspname in ('public', 'private') and c.relkind in ('r', 'p')
                                 order by 1`;
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['public.jobs', 'public.runs', 'private.portal_credentials']));
    expect(tables.filter((t) => !t.rls).map((t) => t.name)).toEqual([]);
  });

  it('no function in public or private is executable by anon or authenticated', async () => {
    const rows = await db.sql`select p.oid::regprocedure::text as fn, r.rolname as role
                                from pg_proc p
                                join pg_namespace n on n.oid = p.pronamespace
                                cross join pg_roles r
                               where n.nspname in ('public', 'private') and r.rolname in ${db.sql(API_ROLES)}
                                 and has_function_privilege(r.oid, p.oid, 'execute')
                               order by 1, 2`;
    expect(rows.map((r) => `${r.role}: ${r.fn}`)).toEqual([]);
    const [count] = await db.sql`select count(*)::int as n from pg_proc where pronamespace = 'public'::regnamespace`;
    expect(count!.n).toBeGreaterThanOrEqual(18); // the check above did look at the queue API
  });

  it('the service role can execute every public function', async () => {
    const rows = await db.sql`select p.oid::regprocedure::text as fn from pg_proc p
                               where p.pronamespace = 'public'::regnamespace
                                 and not has_function_privilege('service_role', p.oid, 'execute')`;
    expect(rows.map((r) => r.fn)).toEqual([]);
  });

  it('every function in public and private has a fixed, empty search_path (SECURITY DEFINER ones above all)', async () => {
    const rows = await db.sql`select p.oid::regprocedure::text as fn, p.prosecdef as definer, p.proconfig as config
                                from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                               where n.nspname in ('public', 'private')`;
    expect(rows.filter((r) => r.definer).length).toBeGreaterThanOrEqual(18);
    const bad = rows.filter((r) => !((r.config as string[] | null) ?? []).includes('search_path=""'));
    expect(bad.map((r) => `${r.fn}${r.definer ? ' (SECURITY DEFINER)' : ''}: ${JSON.stringify(r.config)}`)).toEqual([]);
  });

  it('the API roles hold only the intended table privileges', async () => {
    const grants = await db.sql`select grantee, table_schema || '.' || table_name as tbl, privilege_type as priv
                                  from information_schema.role_table_grants
                                 where grantee in ${db.sql(API_ROLES)} and table_schema in ('public', 'private')
                                 order by 1, 2, 3`;
    expect(grants.map((g) => `${g.grantee} ${g.priv} ${g.tbl}`)).toEqual([
      // A portal's owner writes their pending edits under RLS (insert and update by column, below).
      'authenticated DELETE public.content_edits',
      'authenticated SELECT public.content_edits',
      'authenticated SELECT public.hubspot_content',
      'authenticated SELECT public.jobs',
      'authenticated SELECT public.notifications',
      'authenticated SELECT public.portals',
      'authenticated SELECT public.publish_items',
      'authenticated SELECT public.publish_plans',
      'authenticated SELECT public.quiet_cycles',
      'authenticated SELECT public.runs',
      'authenticated SELECT public.sync_marks',
      // A portal's owner manages its sync schedule under RLS (insert and update by column, below).
      'authenticated DELETE public.sync_schedules',
      'authenticated SELECT public.sync_schedules',
    ]);
    const columns = await db.sql`select grantee, table_name, column_name, privilege_type as priv
                                   from information_schema.column_privileges
                                  where grantee in ${db.sql(API_ROLES)} and table_schema in ('public', 'private')
                                    and privilege_type <> 'SELECT'
                                  order by table_name, privilege_type, column_name`;
    const owned = ['content_types', 'full_every_minutes', 'hubdb_sweep_every_minutes', 'incremental_every_minutes', 'overlap_seconds', 'paused'];
    expect(columns.map((c) => `${c.grantee} ${c.priv} ${c.table_name}.${c.column_name}`)).toEqual([
      ...['base_updated_at', 'content_type', 'hubspot_id', 'patch', 'portal_id'].map((c) => `authenticated INSERT content_edits.${c}`),
      ...['base_updated_at', 'patch'].map((c) => `authenticated UPDATE content_edits.${c}`),
      'authenticated UPDATE notifications.read_at',
      ...[...owned, 'portal_id'].sort().map((c) => `authenticated INSERT sync_schedules.${c}`),
      ...owned.map((c) => `authenticated UPDATE sync_schedules.${c}`),
    ]);
    const seqs = await db.sql`select c.oid::regclass::text as seq, r.rolname as role from pg_class c cross join pg_roles r
                               where c.relkind = 'S' and c.relnamespace in ('public'::regnamespace, 'private'::regnamespace)
                                 and r.rolname in ${db.sql(API_ROLES)}
                                 and has_sequence_privilege(r.oid, c.oid, 'usage,select,update')`;
    expect(seqs).toHaveLength(0);
  });

  it('the API roles cannot use the private schema', async () => {
    for (const role of API_ROLES) {
      const [row] = await db.sql`select has_schema_privilege(${role}, 'private', 'usage') as usage`;
      expect(row!.usage, role).toBe(false);
    }
  });
});

describe('supabase db advisors', () => {
  it('reports no security or performance issue at warn level or above', async () => {
    const url = new URL(db.url);
    url.searchParams.set('sslmode', 'disable');
    const bin = path.join(PROJECT_ROOT, 'node_modules/.bin/supabase');
    const { stdout, stderr } = await run(
      bin,
      ['db', 'advisors', '--db-url', url.toString(), '--type', 'all', '--level', 'warn', '-o', 'json', '--workdir', PROJECT_ROOT],
      { env: { ...process.env, SUPABASE_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' }, maxBuffer: 16 * 1024 * 1024, timeout: 60_000 },
    );
    // No issues: an empty stdout ("No issues found" on stderr); otherwise a JSON array of lints.
    const issues = stdout.trim() ? (JSON.parse(stdout) as { level: string; name: string; detail: string }[]) : [];
    expect(issues.map((i) => `${i.level} ${i.name}: ${i.detail}`)).toEqual([]);
    expect(`${stdout}${stderr}`).toMatch(/No issues found|^\s*\[\s*\]\s*$/m);

    // The advisors are really checking this database: an info-level run finds the known INFO lints.
    const info = await run(bin, ['db', 'advisors', '--db-url', url.toString(), '--type', 'all', '--level', 'info', '-o', 'json'],
      { env: { ...process.env, SUPABASE_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' }, maxBuffer: 16 * 1024 * 1024, timeout: 60_000 });
    const infos = JSON.parse(info.stdout) as { level: string; detail: string }[];
    expect(infos.length).toBeGreaterThan(0);
    expect(infos.every((i) => i.level === 'INFO')).toBe(true);
    expect(infos.some((i) => i.detail.includes('public.jobs') || i.detail.includes('private.'))).toBe(true);
  });
});
