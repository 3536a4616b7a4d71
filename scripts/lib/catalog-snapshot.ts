// A database's schema as data: every object the migrations (or the schema
// files) create, read from the catalog, so two databases can be compared
// object by object. Used by tests/schema-sync.test.ts (a database built from
// supabase/schemas/ against one built from supabase/migrations/) and by
// `tsx scripts/schema-baseline.ts compare <git-ref>` (an older migration
// history against the baseline).
import type postgres from 'postgres';

/** Section name -> object key -> canonical description (JSON text). */
export type CatalogSnapshot = Record<string, Record<string, string>>;

export interface SnapshotOptions {
  /** Schemas left out besides Postgres's own (default: the CLI's history and the test harness's helpers). */
  excludeSchemas?: readonly string[];
}

export const DEFAULT_EXCLUDED_SCHEMAS = ['supabase_migrations', 'queue_test'] as const;

type Row = Record<string, unknown>;

const canonical = (value: unknown): string => JSON.stringify(value);

function section(rows: readonly Row[], key: (r: Row) => string, value: (r: Row) => unknown = (r) => r): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of rows) {
    const k = key(r);
    if (k in out) throw new Error(`catalog snapshot: duplicate key ${k}`);
    out[k] = canonical(value(r));
  }
  return out;
}

/**
 * Reads the schema of the database `sql` is connected to. Names are stable
 * across databases (no oids); the database's own name is replaced by
 * `<current_database>` wherever it appears (cron jobs).
 */
export async function catalogSnapshot(sql: postgres.Sql, opts: SnapshotOptions = {}): Promise<CatalogSnapshot> {
  const excluded = [...(opts.excludeSchemas ?? DEFAULT_EXCLUDED_SCHEMAS)];
  // The user namespaces: everything but Postgres's own and the excluded ones.
  const ns = `n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
              and n.nspname not like 'pg\\_temp\\_%' and n.nspname not like 'pg\\_toast\\_temp\\_%'
              and n.nspname <> all (array[${excluded.map((e) => `'${e.replace(/'/g, "''")}'`).join(', ')}]::text[])`;
  const q = (text: string) => sql.unsafe(text) as unknown as Promise<Row[]>;
  // An object belongs to an extension: created by CREATE EXTENSION, compared as the extension.
  const notExtension = (classOid: string, oid: string) =>
    `not exists (select 1 from pg_depend d where d.classid = '${classOid}'::regclass and d.objid = ${oid} and d.deptype = 'e')`;

  const snapshot: CatalogSnapshot = {};

  snapshot.schemas = section(
    await q(`select n.nspname as name, pg_get_userbyid(n.nspowner) as owner, obj_description(n.oid, 'pg_namespace') as comment
               from pg_namespace n where ${ns} order by 1`),
    (r) => String(r.name),
  );

  snapshot.extensions = section(
    await q(`select e.extname as name, n2.nspname as schema, e.extversion as version, e.extrelocatable as relocatable
               from pg_extension e join pg_namespace n2 on n2.oid = e.extnamespace order by 1`),
    (r) => String(r.name),
  );

  snapshot.functions = section(
    await q(`select p.oid::regprocedure::text as signature, p.prokind as kind, pg_get_functiondef(p.oid) as definition,
                    p.proconfig as config, p.prosecdef as security_definer, p.provolatile as volatility,
                    p.proparallel as parallel, p.proisstrict as strict, p.proleakproof as leakproof,
                    p.procost as cost, p.prorows as rows, pg_get_userbyid(p.proowner) as owner,
                    obj_description(p.oid, 'pg_proc') as comment
               from pg_proc p join pg_namespace n on n.oid = p.pronamespace
              where ${ns} and p.prokind in ('f', 'p', 'w') and ${notExtension('pg_proc', 'p.oid')}
              order by 1`),
    (r) => String(r.signature),
  );

  snapshot.aggregates = section(
    await q(`select p.oid::regprocedure::text as signature, pg_get_userbyid(p.proowner) as owner
               from pg_proc p join pg_namespace n on n.oid = p.pronamespace
              where ${ns} and p.prokind = 'a' and ${notExtension('pg_proc', 'p.oid')} order by 1`),
    (r) => String(r.signature),
  );

  snapshot.relations = section(
    await q(`select n.nspname || '.' || c.relname as name, c.relkind as kind, pg_get_userbyid(c.relowner) as owner,
                    c.reloptions as options, c.relpersistence as persistence, c.relrowsecurity as rls,
                    c.relforcerowsecurity as force_rls, c.relreplident as replica_identity, c.relispartition as partition,
                    case when c.relkind in ('v', 'm') then pg_get_viewdef(c.oid) end as view_definition,
                    obj_description(c.oid, 'pg_class') as comment
               from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where ${ns} and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S') and ${notExtension('pg_class', 'c.oid')}
              order by 1`),
    (r) => String(r.name),
  );

  // Columns in their order (select * and `setof <table>` answers depend on it), dropped ones skipped.
  snapshot.columns = section(
    await q(`select n.nspname || '.' || c.relname as rel, a.attname as name,
                    row_number() over (partition by c.oid order by a.attnum) as position,
                    format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
                    pg_get_expr(ad.adbin, ad.adrelid) as default, a.attidentity as identity, a.attgenerated as generated,
                    case when a.attcollation <> 0 then (select co.collname from pg_collation co where co.oid = a.attcollation) end as collation,
                    a.attcompression as compression, a.attstorage as storage, a.attstattarget as stattarget,
                    col_description(c.oid, a.attnum) as comment
               from pg_attribute a
               join pg_class c on c.oid = a.attrelid
               join pg_namespace n on n.oid = c.relnamespace
               left join pg_attrdef ad on ad.adrelid = a.attrelid and ad.adnum = a.attnum
              where ${ns} and c.relkind in ('r', 'p', 'v', 'm', 'f') and a.attnum > 0 and not a.attisdropped
                and ${notExtension('pg_class', 'c.oid')}
              order by 1, a.attnum`),
    (r) => `${String(r.rel)}.${String(r.name)}`,
    (r) => ({ ...r, position: Number(r.position), stattarget: r.stattarget == null ? null : Number(r.stattarget) }),
  );

  snapshot.constraints = section(
    await q(`select coalesce(n.nspname || '.' || c.relname, tn.nspname || '.' || t.typname) as rel, k.conname as name,
                    k.contype as type, pg_get_constraintdef(k.oid) as definition, k.condeferrable as deferrable,
                    k.condeferred as deferred, k.convalidated as validated, k.connoinherit as no_inherit,
                    obj_description(k.oid, 'pg_constraint') as comment
               from pg_constraint k
               left join pg_class c on c.oid = k.conrelid
               left join pg_namespace n on n.oid = c.relnamespace
               left join pg_type t on t.oid = k.contypid
               left join pg_namespace tn on tn.oid = t.typnamespace
              where k.conparentid = 0
                and coalesce(n.nspname, tn.nspname) in (select n.nspname from pg_namespace n where ${ns})
                and coalesce(${notExtension('pg_class', 'c.oid')}, true)
              order by 1, 2`),
    (r) => `${String(r.rel)} ${String(r.name)}`,
  );

  snapshot.indexes = section(
    await q(`select n.nspname || '.' || i.relname as name, pg_get_indexdef(i.oid) as definition,
                    x.indisunique as unique, x.indisprimary as primary, x.indisreplident as replica_identity,
                    i.reloptions as options, obj_description(i.oid, 'pg_class') as comment
               from pg_index x
               join pg_class i on i.oid = x.indexrelid
               join pg_class t on t.oid = x.indrelid
               join pg_namespace n on n.oid = i.relnamespace
              where ${ns} and ${notExtension('pg_class', 't.oid')}
              order by 1`),
    (r) => String(r.name),
  );

  snapshot.sequences = section(
    await q(`select n.nspname || '.' || c.relname as name, format_type(s.seqtypid, null) as type, s.seqstart::text as start,
                    s.seqincrement::text as increment, s.seqmax::text as max, s.seqmin::text as min, s.seqcache::text as cache,
                    s.seqcycle as cycle,
                    (select dn.nspname || '.' || dc.relname || '.' || da.attname
                       from pg_depend d join pg_class dc on dc.oid = d.refobjid
                       join pg_namespace dn on dn.oid = dc.relnamespace
                       join pg_attribute da on da.attrelid = d.refobjid and da.attnum = d.refobjsubid
                      where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.refclassid = 'pg_class'::regclass
                        and d.deptype in ('a', 'i') limit 1) as owned_by
               from pg_sequence s join pg_class c on c.oid = s.seqrelid join pg_namespace n on n.oid = c.relnamespace
              where ${ns} and ${notExtension('pg_class', 'c.oid')} order by 1`),
    (r) => String(r.name),
  );

  snapshot.triggers = section(
    await q(`select n.nspname || '.' || c.relname as rel, t.tgname as name, pg_get_triggerdef(t.oid) as definition,
                    t.tgenabled as enabled, obj_description(t.oid, 'pg_trigger') as comment
               from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
              where ${ns} and not t.tgisinternal order by 1, 2`),
    (r) => `${String(r.rel)} ${String(r.name)}`,
  );

  snapshot.event_triggers = section(
    await q(`select e.evtname as name, e.evtevent as event, e.evtfoid::regproc::text as function, e.evtenabled as enabled,
                    e.evttags as tags from pg_event_trigger e order by 1`),
    (r) => String(r.name),
  );

  snapshot.policies = section(
    await q(`select p.schemaname || '.' || p.tablename as rel, p.policyname as name, p.permissive, p.roles::text[] as roles,
                    p.cmd, p.qual, p.with_check
               from pg_policies p join pg_namespace n on n.nspname = p.schemaname
              where ${ns} order by 1, 2`),
    (r) => `${String(r.rel)} ${String(r.name)}`,
  );

  // Privileges: the ACL of every object (its default ACL when none is set), one grant a key.
  const grantRows = await q(`
    with acls as (
      select 'schema' as kind, n.nspname as name, coalesce(n.nspacl, acldefault('n', n.nspowner)) as acl
        from pg_namespace n where ${ns}
      union all
      select case c.relkind when 'S' then 'sequence' else 'table' end, n.nspname || '.' || c.relname,
             coalesce(c.relacl, acldefault((case c.relkind when 'S' then 's' else 'r' end)::"char", c.relowner))
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where ${ns} and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S') and ${notExtension('pg_class', 'c.oid')}
      union all
      select 'function', p.oid::regprocedure::text, coalesce(p.proacl, acldefault('f', p.proowner))
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where ${ns} and ${notExtension('pg_proc', 'p.oid')}
      union all
      select 'type', n.nspname || '.' || t.typname, coalesce(t.typacl, acldefault('T', t.typowner))
        from pg_type t join pg_namespace n on n.oid = t.typnamespace
       where ${ns} and t.typtype in ('d', 'e', 'r', 'm') and ${notExtension('pg_type', 't.oid')}
    )
    select a.kind, a.name, case when x.grantee = 0 then 'PUBLIC' else pg_get_userbyid(x.grantee) end as grantee,
           pg_get_userbyid(x.grantor) as grantor, x.privilege_type as privilege, x.is_grantable as grantable
      from acls a cross join lateral aclexplode(a.acl) x
     order by 1, 2, 3, 5`);
  snapshot.grants = section(grantRows, (r) => `${String(r.kind)} ${String(r.name)} ${String(r.grantee)} ${String(r.privilege)}`);

  snapshot.column_grants = section(
    await q(`select n.nspname || '.' || c.relname || '.' || a.attname as col,
                    case when x.grantee = 0 then 'PUBLIC' else pg_get_userbyid(x.grantee) end as grantee,
                    pg_get_userbyid(x.grantor) as grantor, x.privilege_type as privilege, x.is_grantable as grantable
               from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
              cross join lateral aclexplode(a.attacl) x
              where ${ns} and a.attacl is not null and not a.attisdropped
              order by 1, 2, 4`),
    (r) => `${String(r.col)} ${String(r.grantee)} ${String(r.privilege)}`,
  );

  snapshot.default_privileges = section(
    await q(`select pg_get_userbyid(d.defaclrole) as role, coalesce(n.nspname, '*') as schema, d.defaclobjtype as objtype,
                    case when x.grantee = 0 then 'PUBLIC' else pg_get_userbyid(x.grantee) end as grantee,
                    x.privilege_type as privilege, x.is_grantable as grantable
               from pg_default_acl d left join pg_namespace n on n.oid = d.defaclnamespace
              cross join lateral aclexplode(d.defaclacl) x
              order by 1, 2, 3, 4, 5`),
    (r) => `${String(r.role)} ${String(r.schema)} ${String(r.objtype)} ${String(r.grantee)} ${String(r.privilege)}`,
  );

  snapshot.types = section(
    await q(`select n.nspname || '.' || t.typname as name, t.typtype as type, format_type(t.typbasetype, t.typtypmod) as base,
                    t.typnotnull as not_null, t.typdefault as default,
                    (select array_agg(e.enumlabel order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid) as labels
               from pg_type t join pg_namespace n on n.oid = t.typnamespace
              where ${ns} and t.typtype in ('d', 'e', 'r', 'm') and ${notExtension('pg_type', 't.oid')} order by 1`),
    (r) => String(r.name),
  );

  snapshot.publications = section(
    await q(`select p.pubname as name, pg_get_userbyid(p.pubowner) as owner, p.puballtables as all_tables,
                    p.pubinsert as insert, p.pubupdate as update, p.pubdelete as delete, p.pubtruncate as truncate
               from pg_publication p order by 1`),
    (r) => String(r.name),
  );

  snapshot.publication_tables = section(
    await q(`select t.pubname as publication, t.schemaname || '.' || t.tablename as rel, t.attnames::text[] as columns,
                    t.rowfilter as row_filter
               from pg_publication_tables t order by 1, 2`),
    (r) => `${String(r.publication)} ${String(r.rel)}`,
  );

  // Rows of our own tables (the settings and registry rows a schema seeds). Time
  // columns are left out: they say when the database was built.
  const tables = await q(`select n.nspname as schema, c.relname as name
                            from pg_class c join pg_namespace n on n.oid = c.relnamespace
                           where n.nspname in ('public', 'private') and c.relkind in ('r', 'p') order by 1, 2`);
  snapshot.rows = {};
  for (const t of tables) {
    const rel = `"${String(t.schema)}"."${String(t.name)}"`;
    const rows = (await sql.unsafe(`
      select coalesce(jsonb_agg(r.row order by r.row::text), '[]') as rows
        from (select to_jsonb(x) - coalesce((select array_agg(a.attname::text) from pg_attribute a
                                              where a.attrelid = '${rel}'::regclass and a.attnum > 0
                                                and a.atttypid in ('timestamptz'::regtype, 'timestamp'::regtype, 'timestamptz[]'::regtype)),
                                             '{}') as row
                from ${rel} x) r`)) as unknown as Row[];
    snapshot.rows[`${String(t.schema)}.${String(t.name)}`] = canonical(rows[0]?.rows ?? []);
  }

  snapshot.cron_jobs = {};
  const [cron] = (await sql`select to_regclass('cron.job') is not null as present`) as unknown as Row[];
  if (cron?.present) {
    snapshot.cron_jobs = section(
      (await sql.unsafe(`select j.jobname as name, j.schedule, j.command, j.username, j.active,
                                case when j.database = current_database() then '<current_database>' else j.database end as database
                           from cron.job j order by 1`)) as unknown as Row[],
      (r) => String(r.name),
    );
  }

  snapshot.storage_buckets = {};
  const [storage] = (await sql`select to_regclass('storage.buckets') is not null as present`) as unknown as Row[];
  if (storage?.present) {
    snapshot.storage_buckets = section(
      (await sql.unsafe(`select to_jsonb(b) - 'created_at' - 'updated_at' as bucket from storage.buckets b order by b.id`)) as unknown as Row[],
      (r) => String((r.bucket as Row).id),
      (r) => r.bucket,
    );
  }

  return snapshot;
}

export interface SnapshotDiff {
  section: string;
  key: string;
  /** Present only in the first snapshot, only in the second, or in both with different descriptions. */
  change: 'only-in-a' | 'only-in-b' | 'changed';
  a?: string;
  b?: string;
}

/** Every difference between two snapshots (empty: the same schema). */
export function diffSnapshots(a: CatalogSnapshot, b: CatalogSnapshot): SnapshotDiff[] {
  const out: SnapshotDiff[] = [];
  for (const name of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    const sa = a[name] ?? {};
    const sb = b[name] ?? {};
    for (const key of [...new Set([...Object.keys(sa), ...Object.keys(sb)])].sort()) {
      if (!(key in sb)) out.push({ section: name, key, change: 'only-in-a', a: sa[key] });
      else if (!(key in sa)) out.push({ section: name, key, change: 'only-in-b', b: sb[key] });
      else if (sa[key] !== sb[key]) out.push({ section: name, key, change: 'changed', a: sa[key], b: sb[key] });
    }
  }
  return out;
}

/** How many objects each section holds. */
export function snapshotCounts(s: CatalogSnapshot): Record<string, number> {
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, Object.keys(v).length]));
}

/** A readable report of a diff (the first `limit` differences, long descriptions cut). */
export function formatDiff(diff: readonly SnapshotDiff[], labels: [string, string] = ['a', 'b'], limit = 40): string {
  const cut = (s: string | undefined) => (s && s.length > 600 ? `${s.slice(0, 600)}…` : s);
  const lines = diff.slice(0, limit).map((d) =>
    d.change === 'only-in-a' ? `- [${d.section}] ${d.key}: only in ${labels[0]}\n    ${cut(d.a)}`
      : d.change === 'only-in-b' ? `- [${d.section}] ${d.key}: only in ${labels[1]}\n    ${cut(d.b)}`
        : `- [${d.section}] ${d.key}: differs\n    ${labels[0]}: ${cut(d.a)}\n    ${labels[1]}: ${cut(d.b)}`);
  if (diff.length > limit) lines.push(`… and ${diff.length - limit} more`);
  return lines.join('\n');
}
