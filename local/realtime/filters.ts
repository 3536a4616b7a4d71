// The subscription parameters of a postgres_changes binding, parsed as
// supabase/realtime parses them (Extensions.PostgresCdcRls.Subscriptions.
// parse_subscription_params): event, schema, table, `filter` (PostgREST-style
// `column=op.value`, several joined by commas as AND, `not.` negates, `in.(a,b)`,
// double quotes protect reserved characters) and `select` (columns). Errors
// carry the real server's messages.

export const FILTER_OPS = ['eq', 'neq', 'lt', 'lte', 'gt', 'gte', 'in', 'like', 'ilike', 'is', 'match', 'imatch', 'isdistinct'] as const;
export type FilterOp = (typeof FILTER_OPS)[number];

export interface Filter {
  column: string;
  op: FilterOp;
  /** For `in`: a Postgres array literal ({a,b}). */
  value: string;
  negate: boolean;
}

export type Action = '*' | 'INSERT' | 'UPDATE' | 'DELETE';

export interface SubscriptionParams {
  action: Action;
  /** '*' matches every schema (as SQL LIKE '%'). */
  schema: string;
  /** '*' matches every table. */
  table: string;
  filters: Filter[];
  /** Columns to send (the primary key always goes too); null: all the role may read. */
  selectedColumns: string[] | null;
}

function actionFilter(event: unknown): Action {
  if (typeof event !== 'string') return '*';
  const up = event.toUpperCase();
  return up === 'INSERT' || up === 'UPDATE' || up === 'DELETE' ? up : '*';
}

/** Splits on commas outside parentheses and double quotes. */
function splitTopLevel(filter: string): string[] {
  const parts: string[] = [];
  let current = '';
  let depth = 0;
  let quoted = false;
  let prev = '';
  for (let i = 0; i < filter.length; i++) {
    const ch = filter[i]!;
    if (quoted) {
      if (ch === '\\' && i + 1 < filter.length) {
        current += ch + filter[++i]!;
        prev = filter[i]!;
        continue;
      }
      if (ch === '"') quoted = false;
      current += ch;
    } else if (ch === '"' && (prev === '.' || prev === '(' || prev === ',')) {
      quoted = true;
      current += ch;
    } else if (ch === '(') {
      depth++;
      current += ch;
    } else if (ch === ')') {
      depth = Math.max(0, depth - 1);
      current += ch;
    } else if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
      prev = '';
      continue;
    } else current += ch;
    prev = ch;
  }
  parts.push(current);
  return parts;
}

function unquote(value: string): string {
  if (!value.startsWith('"')) return value;
  let out = '';
  for (let i = 1; i < value.length; i++) {
    const ch = value[i]!;
    if (ch === '"') return i === value.length - 1 ? out : value;
    if (ch === '\\' && i + 1 < value.length) out += value[++i]!;
    else out += ch;
  }
  return value;
}

/** An Elixir-style inspect of the parts that could not be parsed, as the real error shows them. */
const inspectParts = (parts: string[]) => `[${parts.map((p) => JSON.stringify(p)).join(', ')}]`;

function parseSegment(segment: string): Filter | string {
  const trimmed = segment.trim();
  if (!trimmed) return 'filter must not contain empty segments (check for extra commas)';
  const eq = trimmed.indexOf('=');
  if (eq < 0) return inspectParts([trimmed]);
  const column = trimmed.slice(0, eq);
  let rest = trimmed.slice(eq + 1);
  const negate = rest.startsWith('not.');
  if (negate) rest = rest.slice(4);
  const dot = rest.indexOf('.');
  if (dot < 0) return inspectParts([rest]);
  const op = rest.slice(0, dot);
  const value = rest.slice(dot + 1);
  if (!(FILTER_OPS as readonly string[]).includes(op)) return inspectParts([op, value]);
  if (op === 'in') {
    if (value.length >= 2 && value.startsWith('(') && value.endsWith(')')) return { column, op, value: `{${value.slice(1, -1)}}`, negate };
    return '`in` filter value must be wrapped by parentheses';
  }
  return { column, op: op as FilterOp, value: unquote(value), negate };
}

/** Parses one postgres_changes entry of a join's config; a string is the real server's error message. */
export function parseSubscriptionParams(params: Record<string, unknown>): SubscriptionParams | string {
  const action = actionFilter(params.event);
  let selectedColumns: string[] | null = null;
  if (Array.isArray(params.select)) {
    const cols = params.select.filter((c): c is string => typeof c === 'string');
    selectedColumns = cols.length ? cols : null;
  } else if (typeof params.select === 'string') {
    return 'Error parsing `select` params: expected a list of column name strings, e.g. select: ["col1", "col2"]';
  }
  const has = (k: string) => k in params;
  const { schema, table, filter } = params;
  let out: SubscriptionParams;
  if (typeof schema === 'string' && typeof table === 'string' && typeof filter === 'string') {
    const filters: Filter[] = [];
    if (filter.trim()) {
      for (const seg of splitTopLevel(filter.trim())) {
        const f = parseSegment(seg);
        if (typeof f === 'string') return `Error parsing \`filter\` params: ${f}`;
        filters.push(f);
      }
    }
    out = { action, schema, table, filters, selectedColumns };
  } else if (typeof schema === 'string' && typeof table === 'string' && !has('filter')) {
    out = { action, schema, table, filters: [], selectedColumns };
  } else if (typeof schema === 'string' && !has('table') && !has('filter')) {
    out = { action, schema, table: '*', filters: [], selectedColumns };
  } else if (typeof table === 'string' && !has('schema') && !has('filter')) {
    out = { action, schema: 'public', table, filters: [], selectedColumns };
  } else {
    return `No subscription params provided. Please provide at least a \`schema\` or \`table\` to subscribe to: ${JSON.stringify(params)}`;
  }
  if (selectedColumns && (out.schema === '*' || out.table === '*')) {
    return 'Column selection is not supported for wildcard subscriptions. Provide an explicit schema and table name.';
  }
  return out;
}

/** How the real server lists the parameters in its "Unable to subscribe" messages. */
export function paramsToLog(p: SubscriptionParams): string {
  const filters = `[${p.filters.map((f) => `{${JSON.stringify(f.column)}, ${JSON.stringify(f.op)}, ${JSON.stringify(f.value)}, ${f.negate}}`).join(', ')}]`;
  const select = p.selectedColumns ? `[${p.selectedColumns.map((c) => JSON.stringify(c)).join(', ')}]` : 'nil';
  return `event: ${p.action}, schema: ${p.schema}, table: ${p.table}, filters: ${filters}, select: ${select}`;
}
