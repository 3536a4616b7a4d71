// Checks an update's fields against the item's published schema
// (schema-facts-writes.ts): unknown fields and values of the wrong type are
// refused with the message a Java JSON binder gives, naming the field; fields
// HubSpot sets itself are dropped.

import type { FieldType, ListShapeName } from './schema-facts.ts';
import { fieldTypes, ITEM_SHAPE, READ_ONLY_FIELDS } from './schema-facts-writes.ts';
import type { Fields } from './write-state.ts';

export interface FieldProblem {
  field: string;
  message: string;
  code: 'UNKNOWN_FIELD' | 'INVALID_TYPE';
}

export type Checked = { ok: true; fields: Fields } | { ok: false; problem: FieldProblem };

type UpdatableType = keyof typeof READ_ONLY_FIELDS;

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/;

/** The fields of an update that change the item: unknown fields and wrong types refused, read-only ones dropped. */
export function checkFields(type: Exclude<UpdatableType, 'hubdb_rows'>, input: Record<string, unknown>): Checked {
  const schema: ListShapeName = ITEM_SHAPE[type];
  const types = fieldTypes(schema);
  const readOnly = READ_ONLY_FIELDS[type];
  const fields: Fields = {};
  for (const [field, value] of Object.entries(input)) {
    const type = types[field];
    if (type === undefined) return { ok: false, problem: unknownField(field, schema) };
    if (readOnly.includes(field)) continue;
    const expected = typeProblem(value, type, field === 'language');
    if (expected !== null) return { ok: false, problem: wrongType(field, value, expected, schema) };
    fields[field] = value;
  }
  return { ok: true, fields };
}

export function unknownField(field: string, schema: string): FieldProblem {
  return { field, code: 'UNKNOWN_FIELD', message: `Unrecognized field "${field}" (class ${schema}), not marked as ignorable` };
}

export function wrongType(field: string, value: unknown, javaType: string, schema: string): FieldProblem {
  return { field, code: 'INVALID_TYPE', message: `Cannot deserialize value of type \`${javaType}\` from ${kindOf(value)} (through reference chain: ${schema}["${field}"])` };
}

// How a JSON binder names the value it was given.
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'Array value';
  if (typeof value === 'object') return 'Object value';
  if (typeof value === 'string') return `String "${value.length > 40 ? `${value.slice(0, 40)}…` : value}"`;
  if (typeof value === 'boolean') return `Boolean value (${value})`;
  return `Number value (${String(value)})`;
}

/**
 * Null when the value has the published type, else the Java type it failed
 * (nested schemas checked as objects or arrays only; `anyString`: a string is
 * enough, for an enum the simulator knows only in part).
 */
export function typeProblem(value: unknown, type: FieldType, anyString = false): string | null {
  if (typeof type === 'string') {
    switch (type) {
      case 'string': return typeof value === 'string' ? null : 'java.lang.String';
      case 'date-time': return typeof value === 'string' && DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)) ? null : 'java.time.Instant';
      case 'integer': return Number.isInteger(value) ? null : 'java.lang.Long';
      case 'number': return typeof value === 'number' && Number.isFinite(value) ? null : 'java.lang.Double';
      case 'boolean': return typeof value === 'boolean' ? null : 'java.lang.Boolean';
      case 'object': return isObject(value) ? null : 'java.util.Map';
    }
  }
  if ('enum' in type) {
    if (typeof value !== 'string') return 'java.lang.String';
    return anyString || type.enum.includes(value) ? null : `enum value of [${type.enum.slice(0, 8).join(', ')}${type.enum.length > 8 ? ', …' : ''}]`;
  }
  if ('arrayOf' in type) {
    if (!Array.isArray(value)) return 'java.util.List';
    for (const element of value) {
      const problem = typeof type.arrayOf === 'string' || !('shape' in type.arrayOf) ? typeProblem(element, type.arrayOf) : isObject(element) ? null : 'java.util.Map';
      if (problem !== null) return `java.util.List<${problem}>`;
    }
    return null;
  }
  return isObject(value) ? null : 'java.util.Map';
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
