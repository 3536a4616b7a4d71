// Arrays of Postgres' built-in types for postgres.js, registered from a fixed
// table instead of its startup query (`fetch_types`). postgres.js runs that
// query on every new connection and drops its promise: a connection cut off
// during it (a restart, a pooler hiccup) rejects it unhandled, which ends a
// Node process or an edge isolate (porsager/postgres#1192, #1205, #1223; open
// in 3.4.9). Built-in type oids never change, and the schema defines no type
// of its own, so the table covers every array the project reads or writes.

/** Built-in element type oid → its array type oid (pg_type.typarray), as Postgres 15 and 17 define them. */
export const BUILTIN_ARRAY_TYPES: Readonly<Record<number, number>> = {
  16: 1000, // bool
  17: 1001, // bytea
  18: 1002, // char
  19: 1003, // name
  20: 1016, // int8
  21: 1005, // int2
  23: 1007, // int4
  25: 1009, // text
  26: 1028, // oid
  114: 199, // json
  700: 1021, // float4
  701: 1022, // float8
  869: 1041, // inet
  1042: 1014, // bpchar
  1043: 1015, // varchar
  1082: 1182, // date
  1083: 1183, // time
  1114: 1115, // timestamp
  1184: 1185, // timestamptz
  1186: 1187, // interval
  1266: 1270, // timetz
  1700: 1231, // numeric
  2950: 2951, // uuid
  3802: 3807, // jsonb
};

type Codec = (value: any) => unknown;

/** The parts of a postgres.js pool's options that array support lives in (what its type fetch fills). */
export interface ArrayTypeTables {
  parsers: Record<number, Codec>;
  serializers: Record<number, Codec>;
  shared: { typeArrayMap: Record<number, number> };
}

/**
 * Adds the built-in array types to a pool's options, as postgres.js's type
 * fetch would: each array parses and serializes its elements with the
 * element type's own parser and serializer (none: text as is).
 */
export function registerBuiltinArrayTypes(options: ArrayTypeTables): void {
  for (const [element, array] of Object.entries(BUILTIN_ARRAY_TYPES)) {
    const oid = Number(element);
    options.shared.typeArrayMap[oid] = array;
    const parse = options.parsers[oid];
    const serialize = options.serializers[oid];
    // Not flagged `.array` as postgres.js flags its own: it would then cut the text's first character.
    options.parsers[array] = (text: string) => parseArray(text, parse);
    options.serializers[array] = (xs: unknown) => serializeArray(xs, serialize);
  }
}

/**
 * Postgres' text form of an array (`{a,"b c",NULL,{1,2}}`, with an optional
 * `[lower:upper]=` prefix) as nested JS arrays; unquoted NULL is null, every
 * other element goes through `parse` when given.
 */
export function parseArray(text: string, parse?: Codec): unknown[] {
  let i = text.charCodeAt(0) === 0x5b /* [ */ ? text.indexOf('=') + 1 : 0;
  const fail = (what: string) => new SyntaxError(`malformed array literal (${what} at ${i}): ${text.slice(0, 80)}`);
  const element = (raw: string) => (parse ? parse(raw) : raw);

  const readArray = (): unknown[] => {
    if (text[i] !== '{') throw fail('expected {');
    i++;
    const out: unknown[] = [];
    if (text[i] === '}') {
      i++;
      return out;
    }
    for (;;) {
      const c = text[i];
      if (c === '{') {
        out.push(readArray());
      } else if (c === '"') {
        let value = '';
        i++;
        for (;;) {
          const q = text[i];
          if (q === undefined) throw fail('unterminated quote');
          if (q === '\\') {
            value += text[i + 1] ?? '';
            i += 2;
          } else if (q === '"') {
            i++;
            break;
          } else {
            value += q;
            i++;
          }
        }
        out.push(element(value));
      } else {
        const start = i;
        while (i < text.length && text[i] !== ',' && text[i] !== '}') i++;
        const raw = text.slice(start, i);
        if (raw.length === 0) throw fail('empty element');
        out.push(raw.toUpperCase() === 'NULL' ? null : element(raw));
      }
      if (text[i] === ',') {
        i++;
      } else if (text[i] === '}') {
        i++;
        return out;
      } else {
        throw fail('expected , or }');
      }
    }
  };

  const out = readArray();
  if (i !== text.length) throw fail('trailing text');
  return out;
}

/** A JS array (nested for more dimensions) in Postgres' text form: every element quoted, null as NULL. */
export function serializeArray(xs: unknown, serialize?: Codec): unknown {
  if (!Array.isArray(xs)) return xs;
  return '{' + xs.map((x) => {
    if (Array.isArray(x)) return serializeArray(x, serialize);
    if (x === undefined) throw new TypeError('Undefined values are not allowed in an array parameter');
    if (x === null) return 'NULL';
    const text = String(serialize ? serialize(x) : x);
    return '"' + text.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
  }).join(',') + '}';
}
