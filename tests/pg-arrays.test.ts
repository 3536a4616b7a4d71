// Arrays without postgres.js's per-connection type fetch (shared/pg-arrays.ts):
// connectDatabase reads and writes every built-in array exactly as postgres.js
// does with the types it fetches, and a connection cut off right after startup
// fails only the query on it, where postgres.js as shipped rejects its type
// fetch unhandled (porsager/postgres#1192).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseArray, serializeArray } from '../shared/pg-arrays.ts';
import { useTestDatabase } from './support/database.ts';

const run = promisify(execFile);
const db = useTestDatabase();
let fetched: postgres.Sql;

beforeAll(() => {
  fetched = postgres(db.directUrl, { max: 1, prepare: false, onnotice: () => {} });
});
afterAll(async () => {
  await fetched?.end({ timeout: 1 });
});

const tricky = ['', 'NULL', 'null', 'a,b', '{x}', 'say "hi"', 'back\\slash', ' spaced ', 'tab\tnew\nline', 'é ünï 🚀', "it's"];

describe('built-in arrays without the type fetch', () => {
  it('results: every built-in array type parses as with the fetched types', async () => {
    const query = (sql: postgres.Sql) => sql`select
        array['a', 'NULL', 'say "hi"', 'back\\slash', 'a,b', '{x}', '', ' s ']::text[] as texts,
        array[1, -3]::int4[] as ints, array[9007199254740993]::int8[] as bigs, array[1, 2]::int2[] as smalls,
        array[1.5, 'NaN']::float8[] as floats, array[1.25]::float4[] as reals, array['1.10']::numeric[] as numerics,
        array[true, false]::bool[] as bools, array[gen_random_uuid()]::uuid[] as uuids,
        array['2026-12-05 01:02:03.456+00']::timestamptz[] as stamps, array['2026-12-05 01:02:03']::timestamp[] as plain_stamps,
        array['2026-12-05']::date[] as dates, array['1 day 02:00']::interval[] as intervals,
        array['{"a": [1, "x\\"y"]}', '"s"']::jsonb[] as jsonbs, array['{"b": 2}']::json[] as jsons,
        array['x', 'y']::varchar[] as varchars, array['ab']::bpchar[] as chars, array['pg_class']::name[] as names,
        array['\\x00ff']::bytea[] as bytes, array['127.0.0.1']::inet[] as inets,
        array[[1, 2], [3, 4]]::int4[] as grid, '{}'::text[] as empty, null::text[] as none,
        array[]::uuid[] as no_uuids`;
    const [ours] = await query(db.sql);
    const [theirs] = await query(fetched);
    // uuids differ per call: compare their shape, then the rest exactly.
    expect((ours!.uuids as unknown[]).map((u) => typeof u)).toEqual(['string']);
    delete ours!.uuids;
    delete theirs!.uuids;
    expect(ours).toEqual(theirs);
    expect(ours!.texts).toEqual(['a', 'NULL', 'say "hi"', 'back\\slash', 'a,b', '{x}', '', ' s ']);
    expect(ours!.grid).toEqual([[1, 2], [3, 4]]);
    expect((ours!.stamps as unknown[])[0]).toBeInstanceOf(Date);
  });

  it('results where postgres.js\'s own parser errs: a NULL element is null (not the string "NULL"), bounds are dropped', async () => {
    const query = (sql: postgres.Sql) => sql`select array['a', null, 'NULL']::text[] as texts, array[[1, null]]::int4[] as grid,
        array['{"a": 1}', null]::jsonb[] as jsonbs, array[null, true]::bool[] as bools, '[0:1]={7,8}'::int4[] as shifted`;
    const [ours] = await query(db.sql);
    expect(ours).toEqual({ texts: ['a', null, 'NULL'], grid: [[1, null]], jsonbs: [{ a: 1 }, null], bools: [null, true], shifted: [7, 8] });
    const [theirs] = await query(fetched).catch(() => [null]);
    expect(theirs === null || (theirs.texts as unknown[])[1] === 'NULL').toBe(true);
  });

  it('parameters: JS arrays go in as the server expects them, and come back the same', async () => {
    // Each case alone, so that one the server refuses (an array of Dates or booleans is sent as its
    // element type by postgres.js either way) is compared as that refusal.
    const cases: [string, (sql: postgres.Sql) => Promise<unknown>][] = [
      ['texts', (sql) => sql`select ${tricky}::text[] as v`],
      ['ints', (sql) => sql`select ${[1, 2, 3]}::int4[] as v`],
      ['bigints as text', (sql) => sql`select ${['9007199254740993']}::int8[] as v`],
      ['uuids', (sql) => sql`select ${['00000000-0000-0000-0000-000000000001']}::uuid[] as v`],
      ['empty', (sql) => sql`select ${[] as string[]}::text[] as v`],
      ['time stamps as text', (sql) => sql`select ${['2026-12-05T01:02:03.456Z']}::timestamptz[] as v`],
      ['Dates', (sql) => sql`select ${[new Date(0)]}::timestamptz[] as v`],
      ['booleans', (sql) => sql`select ${[true, false]}::bool[] as v`],
      ['json values', (sql) => sql`select ${[{ a: 'x"y', b: [1] }, 'plain'] as never}::jsonb[] as v`],
      ['any()', (sql) => sql`select count(*)::int as v from unnest(${tricky}::text[]) u(t) where t = any (${tricky}::text[])`],
    ];
    const outcome = (p: Promise<unknown>) => p.then((rows) => ({ value: (rows as { v: unknown }[])[0]!.v }), (e: Error) => ({ error: e.message }));
    for (const [name, query] of cases) {
      const ours = await outcome(query(db.sql));
      expect({ name, ...ours }).toEqual({ name, ...(await outcome(query(fetched))) });
    }
    expect(await outcome(cases[0]![1](db.sql))).toEqual({ value: tricky });
    expect(await outcome(cases[8]![1](db.sql))).toEqual({ value: [{ a: 'x"y', b: [1] }, 'plain'] });
    expect(await outcome(cases[9]![1](db.sql))).toEqual({ value: tricky.length });
    // A null element goes in as NULL, and comes back null.
    expect(await outcome(db.sql`select ${['a', null, 'NULL'] as string[]}::text[] as v, array_position(${['a', null] as string[]}::text[], null) as p`))
      .toEqual({ value: ['a', null, 'NULL'] });
  });

  it('parses and writes the text form itself', () => {
    expect(parseArray('{}')).toEqual([]);
    expect(parseArray('{NULL,null,"NULL",""}')).toEqual([null, null, 'NULL', '']);
    expect(parseArray('{{1,2},{3,4}}', Number)).toEqual([[1, 2], [3, 4]]);
    expect(parseArray('[2:3]={a,b}')).toEqual(['a', 'b']);
    expect(parseArray('{"a\\"b","c\\\\d",e f}')).toEqual(['a"b', 'c\\d', 'e f']);
    expect(() => parseArray('{a,b')).toThrow(SyntaxError);
    expect(() => parseArray('{a}x')).toThrow(SyntaxError);
    expect(serializeArray(['a"b', 'c\\d', null, ['x']])).toBe('{"a\\"b","c\\\\d",NULL,{"x"}}');
    expect(() => serializeArray([undefined])).toThrow(TypeError);
  });
});

describe('a connection cut off right after startup', () => {
  const cutOff = async (mode: 'library' | 'ours') => {
    const { stdout } = await run(path.resolve('node_modules/.bin/tsx'), [path.resolve('tests/fixtures/startup-cutoff.ts'), db.directUrl, mode], { timeout: 60_000 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as { first: string; second: string; third: string; unhandled: string[] };
  };

  it('postgres.js as shipped: its type fetch is rejected unhandled (what would end the process)', async () => {
    const r = await cutOff('library');
    expect(r.unhandled).toContain('57P01');
  });

  it('connectDatabase: the query on it fails, nothing is left unhandled, and the connection comes back', async () => {
    const r = await cutOff('ours');
    expect(r.unhandled).toEqual([]);
    expect(r.first).toBe('error CONNECTION_CLOSED');
    // `second` may get the dead connection's FATAL error again (postgres.js keeps it across the
    // reconnect: porsager/postgres#1223, docs/reliability.md); the next one runs.
    expect(r.third).toBe('["a","b"]');
  });
});
