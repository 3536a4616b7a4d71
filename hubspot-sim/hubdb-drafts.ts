// HubDB's draft rows and publish: POST …/rows/draft/batch/read and
// …/rows/draft/batch/update, POST …/rows/batch/read (published rows) and POST
// …/draft/publish. A row's draft changes (and is stamped) when it is edited;
// the published row, which lists and the published batch read return, and its
// updatedAt change only when the table is published, as do the table's
// updatedAt and publishedAt (one stamp for all of them).

import type { Body, SimItem } from './collection.ts';
import { changed, itemJson } from './collection.ts';
import type { SimUser } from './audit-log.ts';
import { batchAnswer, inputInvalid, inputNotFound, json, notFound, type SimResponse, type StandardError } from './responses.ts';
import { tableJson } from './routes.ts';
import { READ_ONLY_FIELDS } from './schema-facts-writes.ts';
import { isObject, unknownField, wrongType, type FieldProblem } from './write-validation.ts';
import { parseIdInputs, parseObjectInputs } from './writes.ts';
import type { PortalWrites, WriteContext } from './write-state.ts';

/** A row update that passed the checks: the columns to set (null clears one) and the row's own fields. */
export interface RowChange {
  values: Record<string, unknown>;
  fields: Record<string, unknown>;
}

const SCHEMA = 'HubDbTableRowV3BatchUpdateRequest';

/**
 * Checks a row update against the table's columns. The schema types `values`
 * entries only as objects; the simulator takes what HubDB's column types hold:
 * text-like columns a string, NUMBER/CURRENCY a number, BOOLEAN a boolean,
 * DATE/DATETIME epoch milliseconds, SELECT an option named by id or name,
 * MULTISELECT a list of them; other types any value; null clears the column.
 */
export function checkRowChange(table: SimItem, input: Record<string, unknown>): { ok: true; change: RowChange } | { ok: false; problem: FieldProblem } {
  const fail = (problem: FieldProblem) => ({ ok: false as const, problem });
  const fields: Record<string, unknown> = {};
  const values: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(input)) {
    if (READ_ONLY_FIELDS.hubdb_rows.includes(field) || field === 'displayIndex') {
      if (field === 'displayIndex' && !Number.isInteger(value)) return fail(wrongType(field, value, 'java.lang.Integer', SCHEMA));
      continue;
    }
    if (field === 'name' || field === 'path') {
      if (typeof value !== 'string') return fail(wrongType(field, value, 'java.lang.String', SCHEMA));
      fields[field] = value;
    } else if (field === 'childTableId') {
      if (!Number.isInteger(value)) return fail(wrongType(field, value, 'java.lang.Long', SCHEMA));
      fields[field] = String(value);
    } else if (field === 'values') {
      if (!isObject(value)) return fail(wrongType(field, value, 'java.util.Map', SCHEMA));
      const columns = (table.body['columns'] as { name: string; type: string; options?: Body[] }[]) ?? [];
      for (const [name, cell] of Object.entries(value)) {
        const column = columns.find((c) => c.name === name);
        if (!column) return fail({ field: `values.${name}`, code: 'UNKNOWN_FIELD', message: `Column ${name} does not exist in table ${String(table.body['name'])}` });
        const cellValue = cell === null ? null : cellOf(column, cell);
        if (cellValue === undefined) {
          return fail({ field: `values.${name}`, code: 'INVALID_TYPE', message: `Invalid value for column ${name} of type ${column.type}: ${JSON.stringify(cell)?.slice(0, 60)}` });
        }
        values[name] = cellValue;
      }
    } else {
      return fail(unknownField(field, SCHEMA));
    }
  }
  return { ok: true, change: { values, fields } };
}

// A cell as the row keeps it, or undefined when the column's type does not take it.
function cellOf(column: { type: string; options?: Body[] }, cell: unknown): unknown {
  const option = (v: unknown) => {
    if (!isObject(v)) return undefined;
    const found = column.options?.find((o) => (v['id'] !== undefined && String(o['id']) === String(v['id'])) || (v['name'] !== undefined && o['name'] === v['name']));
    return found ? { id: found['id'], name: found['name'], type: 'option', order: found['order'] } : undefined;
  };
  switch (column.type) {
    case 'TEXT': case 'RICHTEXT': case 'URL': case 'CODE': return typeof cell === 'string' ? cell : undefined;
    case 'NUMBER': case 'CURRENCY': return typeof cell === 'number' && Number.isFinite(cell) ? cell : undefined;
    case 'BOOLEAN': return typeof cell === 'boolean' ? cell : undefined;
    case 'DATE': case 'DATETIME': return Number.isInteger(cell) ? cell : undefined;
    case 'SELECT': return option(cell);
    case 'MULTISELECT': {
      if (!Array.isArray(cell)) return undefined;
      const options = cell.map(option);
      return options.includes(undefined) ? undefined : options;
    }
    default: return cell;
  }
}

/** A row's draft: its own once edited, else the published row. */
export function rowDraftOf(state: PortalWrites, tableId: number, row: SimItem): Body {
  return state.rowDrafts.get(tableId)?.get(row.id) ?? row.body;
}

/** Edits a row's draft (one write, stamped; the published row is untouched). Returns the draft. */
export function updateDraftRow(state: PortalWrites, table: SimItem, row: SimItem, change: RowChange, user: SimUser, endpoint: string | null): Body {
  let drafts = state.rowDrafts.get(table.id);
  if (!drafts) state.rowDrafts.set(table.id, (drafts = new Map()));
  let draft = drafts.get(row.id);
  if (!draft) drafts.set(row.id, (draft = structuredClone(row.body)));
  const stamp = state.portal.writeMs();
  const values = { ...(draft['values'] as Record<string, unknown>) };
  for (const [name, value] of Object.entries(change.values)) {
    if (value === null) delete values[name];
    else values[name] = structuredClone(value);
  }
  Object.assign(draft, change.fields, { values, updatedAt: new Date(stamp).toISOString() });
  state.logEvent('hubdb_rows', 'UPDATED', String(table.id), String(table.body['name']), user, stamp, { version: 'draft', rowId: String(row.id) });
  if (endpoint !== null) state.countWrite('hubdb_rows', row, endpoint);
  return draft;
}

/** Publishes a table: every draft row goes live, rows and table stamped with one time (returned). */
export function publishTable(state: PortalWrites, table: SimItem, user: SimUser, endpoint: string | null): number {
  const stamp = state.portal.writeMs();
  const iso = new Date(stamp).toISOString();
  const drafts = state.rowDrafts.get(table.id) ?? new Map<number, Body>();
  const rows = state.portal.tableRows(table.id);
  let published = 0;
  for (const [rowId, draft] of drafts) {
    const row = rows.byId(rowId);
    if (!row) continue;
    row.body = { ...draft, updatedAt: iso, publishedAt: iso };
    changed(row);
    published++;
  }
  state.rowDrafts.delete(table.id);
  Object.assign(table.body, { updatedAt: iso, publishedAt: iso, published: true });
  changed(table);
  state.logEvent('hubdb_tables', 'PUBLISHED', String(table.id), String(table.body['name']), user, stamp, { rowsUpdated: published });
  if (endpoint !== null) state.countWrite('hubdb_tables', table, endpoint);
  return stamp;
}

function tableOf(ctx: WriteContext): SimItem | undefined {
  return ctx.portal.findTable(ctx.params['tableIdOrName'] ?? '');
}

function noTable(ctx: WriteContext): SimResponse {
  return notFound(`The table ${ctx.params['tableIdOrName']} could not be found.`);
}

// A live row of the table by its id.
function rowOf(ctx: WriteContext, table: SimItem, id: string): SimItem | undefined {
  if (!/^\d+$/.test(id)) return undefined;
  const row = ctx.portal.tableRows(table.id).byId(Number(id));
  return row && !row.archived ? row : undefined;
}

/** POST …/rows/batch/read (published rows) and …/rows/draft/batch/read (drafts). */
export function rowsRead(ctx: WriteContext, draft: boolean): SimResponse {
  const table = tableOf(ctx);
  if (!table) return noTable(ctx);
  const started = ctx.portal.now();
  const parsed = parseIdInputs(ctx.body);
  if (!parsed.ok) return parsed.response;
  const found: SimItem[] = [];
  const errors: StandardError[] = [];
  for (const id of parsed.inputs) {
    const row = rowOf(ctx, table, id);
    if (row) found.push(row);
    else errors.push(inputNotFound(id));
  }
  return ctx.read(found, () => {
    const results = found.map((row) => (draft ? JSON.stringify(rowDraftOf(ctx.state, table.id, row)) : itemJson(row)));
    return batchAnswer(started, ctx.portal.now(), results, errors);
  });
}

/** POST …/rows/draft/batch/update: each input a sparse update of the row its `id` names (at most 100). */
export function draftRowsUpdate(ctx: WriteContext): SimResponse {
  const table = tableOf(ctx);
  if (!table) return noTable(ctx);
  const started = ctx.portal.now();
  const parsed = parseObjectInputs(ctx.body, 'BatchInputHubDbTableRowV3BatchUpdateRequest');
  if (!parsed.ok) return parsed.response;
  const results: string[] = [];
  const errors: StandardError[] = [];
  for (const input of parsed.inputs) {
    const id = input['id'];
    if (typeof id !== 'string') {
      errors.push(inputInvalid(String(id ?? ''), { field: 'id', code: 'REQUIRED', message: 'Each input needs the id of the row to update' }));
      continue;
    }
    const row = rowOf(ctx, table, id);
    if (!row) {
      errors.push(inputNotFound(id));
      continue;
    }
    const checked = checkRowChange(table, input);
    if (!checked.ok) {
      errors.push(inputInvalid(id, checked.problem));
      continue;
    }
    results.push(JSON.stringify(updateDraftRow(ctx.state, table, row, checked.change, ctx.user, ctx.endpoint)));
  }
  return batchAnswer(started, ctx.portal.now(), results, errors);
}

/** POST …/draft/publish: answers the table (HubDbTableV3). */
export function publish(ctx: WriteContext): SimResponse {
  const table = tableOf(ctx);
  if (!table) return noTable(ctx);
  publishTable(ctx.state, table, ctx.user, ctx.endpoint);
  return json(200, JSON.parse(tableJson(ctx.portal, table.id, table.body)));
}
