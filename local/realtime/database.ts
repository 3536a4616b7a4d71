// What the Realtime stand-in asks Postgres, each as hosted Realtime's SQL does
// it (realtime.apply_rls, subscription_check_filters, check_equality_op, cast):
// the publication's tables, filter checks at subscribe time, filter matches,
// row visibility under the subscriber's own claims (RLS), and typed records.
import type postgres from 'postgres';
import type { Filter } from './filters.ts';

type Sql = postgres.Sql;

export interface Entity {
  oid: number;
  schema: string;
  table: string;
  rls: boolean;
}

export interface TableColumn {
  name: string;
  /** pg_type.typname, as the payload's `columns` name it (int4, text, timestamptz, _text, ...). */
  typname: string;
  /** The type as SQL can name it in a cast (regtype). */
  sqlType: string;
  pkey: boolean;
  /** The role may SELECT it (column or table privilege). */
  selectable: boolean;
}

const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;
export const qualified = (e: { schema: string; table: string }) => `${ident(e.schema)}.${ident(e.table)}`;

/** Tables of the publication matching a subscription's schema and table ('*': any). */
export async function matchingEntities(sql: Sql, publication: string, schema: string, table: string): Promise<Entity[]> {
  const rows = await sql`
    select c.oid::int as oid, p.schemaname as schema, p.tablename as "table", c.relrowsecurity as rls
      from pg_publication_tables p
      join pg_class c on c.oid = format('%I.%I', p.schemaname, p.tablename)::regclass
     where p.pubname = ${publication}
       and p.schemaname like (case ${schema}::text when '*' then '%' else ${schema}::text end) escape ''
       and p.tablename like (case ${table}::text when '*' then '%' else ${table}::text end) escape ''
     order by 1`;
  return rows as unknown as Entity[];
}

export async function tableColumns(sql: Sql, oid: number, role: string): Promise<TableColumn[]> {
  const rows = await sql`
    select a.attname as name, t.typname, a.atttypid::regtype::text as "sqlType",
           coalesce(a.attnum = any(pk.conkey), false) as pkey,
           has_column_privilege(${role}::text, a.attrelid, a.attnum, 'SELECT') as selectable
      from pg_attribute a
      join pg_type t on t.oid = a.atttypid
      left join pg_constraint pk on pk.conrelid = a.attrelid and pk.contype = 'p'
     where a.attrelid = ${oid} and a.attnum > 0 and not a.attisdropped
     order by a.attnum`;
  return rows as unknown as TableColumn[];
}

/** subscription_check_filters: the filters and selected columns must name readable columns and castable values. */
export async function checkFilters(sql: Sql, columns: TableColumn[], filters: Filter[], selected: string[] | null): Promise<void> {
  const readable = new Map(columns.filter((c) => c.selectable).map((c) => [c.name, c]));
  for (const f of filters) {
    const col = readable.get(f.column);
    if (!col) throw new Error(`invalid column for filter ${f.column}`);
    if (f.op === 'in') {
      const [{ n }] = (await sql.unsafe(`select coalesce(cardinality($1::text::${col.sqlType}[]), 0) as n`, [f.value])) as unknown as [{ n: number }];
      if (n > 100) throw new Error('too many values for `in` filter. Maximum 100');
    } else if (f.op === 'is') {
      if (!['null', 'true', 'false', 'unknown'].includes(f.value)) throw new Error('invalid value for is filter: must be null, true, false, or unknown');
      if (f.value !== 'null' && col.sqlType !== 'boolean') throw new Error(`is ${f.value} filter requires a boolean column, got ${col.sqlType}`);
    } else if (f.op === 'like' || f.op === 'ilike' || f.op === 'match' || f.op === 'imatch') {
      const opr = f.op === 'like' || f.op === 'ilike' ? '~~' : f.op === 'imatch' ? '~*' : '~';
      const [{ ok }] = (await sql`select exists (select 1 from pg_operator where oprname = ${opr} and oprleft = ${col.sqlType}::regtype) as ok`) as unknown as [{ ok: boolean }];
      if (!ok) throw new Error(`operator ${f.op} requires a text-compatible column type, got ${col.sqlType}`);
      if (f.op === 'match' || f.op === 'imatch') {
        await sql`select '' ~ ${f.value}`.catch((e: Error) => {
          throw new Error(`invalid regular expression for ${f.op} filter: ${e.message}`);
        });
      }
    } else {
      await sql.unsafe(`select $1::text::${col.sqlType}`, [f.value]);
    }
  }
  for (const c of selected ?? []) if (!readable.has(c)) throw new Error(`invalid column for select ${c}`);
}

const OP_SYMBOL: Partial<Record<Filter['op'], string>> = { eq: '=', neq: '!=', lt: '<', lte: '<=', gt: '>', gte: '>=', like: 'LIKE', ilike: 'ILIKE', match: '~', imatch: '~*' };

export interface FilterCheck {
  /** The row's value as text (null: SQL NULL). */
  value: string | null;
  sqlType: string;
  filter: Filter;
}

/** check_equality_op for many (value, filter) pairs in one query; a NULL comparison is false. */
export async function evaluateFilters(sql: Sql, checks: FilterCheck[]): Promise<boolean[]> {
  if (!checks.length) return [];
  const params: (string | null)[] = [];
  const exprs = checks.map(({ value, sqlType: t, filter: f }) => {
    params.push(value);
    const a = `$${params.length}::text::${t}`;
    let expr: string;
    if (f.op === 'is') {
      expr = `(${a} is ${f.negate ? 'not ' : ''}${f.value.toUpperCase()})`;
      return `coalesce(${expr}, false)`;
    }
    params.push(f.value);
    const b = `$${params.length}::text`;
    if (f.op === 'isdistinct') return `coalesce((${a} is ${f.negate ? 'not ' : ''}distinct from ${b}::${t}), false)`;
    expr = f.op === 'in' ? `(${a} = any(${b}::${t}[]))` : `(${a} ${OP_SYMBOL[f.op]} ${b}::${t})`;
    return `coalesce(${f.negate ? `not ${expr}` : expr}, false)`;
  });
  const [row] = (await sql.unsafe(`select array[${exprs.join(', ')}]::boolean[] as r`, params)) as unknown as [{ r: boolean[] }];
  return row!.r;
}

/**
 * Which of the given rows (their primary key values as text) the role, with these
 * JWT claims, may see now: realtime.apply_rls's `select exists(... where pk = ...)`,
 * run as the subscriber (role and request.jwt.claims set for the transaction).
 */
export async function visibleRows(sql: Sql, entity: Entity, pk: TableColumn[], role: string, claims: string, keys: Record<string, string | null>[]): Promise<Set<number>> {
  if (!keys.length) return new Set();
  const match = pk.map((c) => `e.${ident(c.name)} = (k.v ->> ${`'${c.name.replaceAll("'", "''")}'`})::${c.sqlType}`).join(' and ');
  try {
    return await sql.begin(async (tx) => {
      await tx`select set_config('role', ${role}, true), set_config('request.jwt.claims', ${claims}, true)`;
      const rows = await tx.unsafe(
        `select (k.i - 1)::int as i from jsonb_array_elements($1::text::jsonb) with ordinality as k(v, i)
          where exists (select 1 from ${qualified(entity)} e where ${match})`,
        [JSON.stringify(keys)],
      );
      return new Set(rows.map((r) => Number(r.i)));
    });
  } catch {
    return new Set(); // e.g. a role that does not exist: nothing is visible
  }
}

/** realtime.cast for whole rows: text values (json/jsonb parsed) to their typed JSON, via the table's row type. */
export async function typedRecords(sql: Sql, entity: Entity, rows: Record<string, unknown>[]): Promise<Record<string, unknown>[]> {
  if (!rows.length) return [];
  const out = await sql.unsafe(
    `select to_jsonb(jsonb_populate_record(null::${qualified(entity)}, x.v)) as r
       from jsonb_array_elements($1::text::jsonb) with ordinality as x(v, i) order by x.i`,
    [JSON.stringify(rows)],
  );
  // Only the columns the row carried (an unchanged TOASTed value is not sent, as hosted omits it).
  return out.map((o, i) => Object.fromEntries(Object.keys(rows[i]!).map((k) => [k, (o.r as Record<string, unknown>)[k]])));
}
