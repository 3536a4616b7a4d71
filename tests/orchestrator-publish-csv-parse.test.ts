// The strict RFC 4180 reader of uploaded CSV files (shared/csv-parse.ts):
// quotes, doubled quotes, CRLF and LF, a byte order mark, an empty unquoted
// cell (null) against a quoted empty one (""), every refusal with its row,
// line and column; the same answers as an independent parser (csv-parse) on
// random files; and its CPU on a 10,000-row export-shaped file, printed (the
// figure in the reader's header comment), never asserted.
import { parse } from 'csv-parse/sync';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseCsv, type CsvParseResult } from '../shared/csv-parse.ts';
import { contentType } from '../shared/content-types.ts';

const ok = (r: CsvParseResult) => {
  if (!r.ok) throw new Error(`refused: ${JSON.stringify(r.errors)}`);
  return r.csv;
};
const refused = (r: CsvParseResult) => {
  if (r.ok) throw new Error('expected a refusal');
  return r.errors;
};

/** A cell as an RFC 4180 writer (and COPY … csv) writes it: null empty, quoted when it must be or when empty. */
const cellText = (v: string | null) => (v === null ? '' : v === '' || /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);
const fileOf = (rows: (string | null)[][], eol = '\r\n') => rows.map((r) => r.map(cellText).join(',')).join(eol) + eol;

describe('parseCsv reads', () => {
  it('quoted cells with commas, doubled quotes and line ends; an empty unquoted cell as null, "" as the empty string', () => {
    const csv = ok(parseCsv('hubspot_id,name,metaDescription,slug\r\n1,"Say ""hi"", then go","two\nlines\r\nhere",\r\n2,,"",x\r\n'));
    expect(csv.header).toEqual(['hubspot_id', 'name', 'metaDescription', 'slug']);
    expect(csv.rows).toEqual([['1', 'Say "hi", then go', 'two\nlines\r\nhere', null], ['2', null, '', 'x']]);
  });

  it('LF or CRLF, mixed; the last line with or without its line end; a byte order mark skipped', () => {
    const expected = { header: ['a', 'b'], rows: [['1', '2'], ['3', '4']] };
    expect(ok(parseCsv('a,b\n1,2\r\n3,4'))).toEqual(expected);
    expect(ok(parseCsv('\ufeffa,b\r\n1,2\n3,4\n'))).toEqual(expected);
    expect(ok(parseCsv('\ufeff"a",b\r\n1,2\r\n3,"4"\r\n'))).toEqual(expected);
    // A header alone: no rows. A header's empty cell is null (Postgres names it an unknown column).
    expect(ok(parseCsv('a,,b\n'))).toEqual({ header: ['a', null, 'b'], rows: [] });
    // Spaces are kept: nothing is trimmed.
    expect(ok(parseCsv('a,b\n 1 ," 2"\n')).rows).toEqual([[' 1 ', ' 2']]);
    // Characters beyond the BMP and accents as they are.
    expect(ok(parseCsv('a\n"héllo 💥"\n')).rows).toEqual([['héllo 💥']]);
  });
});

describe('parseCsv refuses, with the row, line and column', () => {
  it('rows with more or fewer cells than the header (every one listed)', () => {
    const errors = refused(parseCsv('a,b,c\n1,2,3\n1,2\n"x\ny",2,3,4\n\n5,6,7\n'));
    expect(errors).toEqual([
      { row: 2, column: null, code: 'row_shape', message: 'Row 2 (line 3) has 2 cells; the header has 3' },
      { row: 3, column: null, code: 'row_shape', message: 'Row 3 (line 4) has 4 cells; the header has 3' },
      { row: 4, column: null, code: 'row_shape', message: 'Row 4 (line 6) has 1 cells; the header has 3' }, // an empty line is a row of one empty cell
    ]);
  });

  it('at most maxErrors, then one too_many_errors', () => {
    const text = `a,b\n${'1\n'.repeat(30)}`;
    const errors = refused(parseCsv(text, { maxErrors: 10 }));
    expect(errors).toHaveLength(11);
    expect(errors[10]).toEqual({ row: null, column: null, code: 'too_many_errors', message: '20 more errors' });
  });

  it.each([
    ['a quote inside an unquoted cell', 'a,b\n1,x"y\n', { row: 1, column: 'b', code: 'stray_quote' }, /^Row 1 \(line 2\), cell 2: a quote inside an unquoted cell/],
    ['text after a closing quote', 'a,b\n"1"x,2\n', { row: 1, column: 'a', code: 'stray_quote' }, /only a comma or a line end may follow a closing quote/],
    ['a quoted cell never closed', 'a,b\n1,2\n3,"open\n4,5\n', { row: 2, column: 'b', code: 'unterminated_quote' }, /^Row 2 \(line 3\), cell 2: a quoted cell is never closed/],
    ['a carriage return alone', 'a,b\r1,2\n', { row: null, column: null, code: 'bare_cr' }, /^The header \(line 1\), cell 2: a carriage return outside quotes/],
    ['a NUL character', 'a,b\n1,"x\u0000"\n', { row: 1, column: 'b', code: 'nul_character' }, /NUL/],
    ['a NUL character unquoted', 'a,b\n1,x\u0000\n', { row: 1, column: 'b', code: 'nul_character' }, /NUL/],
  ])('%s', (_label, text, expected, message) => {
    const errors = refused(parseCsv(text));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject(expected);
    expect(errors[0]!.message).toMatch(message);
  });

  it('an empty file (or a byte order mark alone)', () => {
    for (const text of ['', '\ufeff']) expect(refused(parseCsv(text))).toEqual([{ row: null, column: null, code: 'empty_file', message: 'The file is empty: upload the export with its header row.' }]);
  });
});

describe('parseCsv against an independent parser (csv-parse)', () => {
  const cell = fc.oneof(
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 6, arbitrary: fc.string({ unit: fc.constantFrom('a', 'Z', ' ', ',', '"', '\n', '\r', '=', "'", 'é', '💥', '\t'), maxLength: 12 }) },
  );
  it('reads every file an RFC 4180 writer writes as that writer meant it (null and "" kept apart)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 6 }).chain((width) => fc.array(fc.array(cell, { minLength: width, maxLength: width }), { minLength: 1, maxLength: 8 })),
      fc.constantFrom('\r\n', '\n'), fc.boolean(), (rows, eol, bom) => {
        // A header row of one null cell would be written as an empty line: give the header names.
        const header = rows[0]!.map((_, i) => `c${i}`);
        const text = (bom ? '\ufeff' : '') + fileOf([header, ...rows], eol);
        const mine = ok(parseCsv(text));
        expect(mine).toEqual({ header, rows });
        const theirs = parse(text, { bom: true, relax_column_count: false, cast: (v: string, ctx: { quoting: boolean }) => (v === '' && !ctx.quoting ? null : v) });
        // csv-parse skips a line that is one null cell in a one-column file; everything else must agree.
        if (header.length > 1) expect([mine.header, ...mine.rows]).toEqual(theirs);
      }), { numRuns: 300 });
  });
});

describe('parseCsv CPU', () => {
  it('a 10,000-row site-pages export (quoted commas, doubled quotes, line ends, nulls): parsed as csv-parse reads it; CPU printed', () => {
    const columns = ['hubspot_id', 'hubspot_updated_at', ...contentType('site_pages').exportColumns];
    const rows: (string | null)[][] = [];
    for (let i = 0; i < 10_000; i++) {
      const row: Record<string, string | null> = {
        hubspot_id: String(190_000_000_000 + i), hubspot_updated_at: '2026-01-10 00:00:00.123+00',
        name: `Page "${i}", about things`, slug: `page-${i}`, url: `https://example.test/page-${i}`, state: 'PUBLISHED',
        htmlTitle: `Title ${i} – héllo`, metaDescription: i % 7 === 0 ? `Line one\nline two, with "quotes" ${'x'.repeat(120)}` : `About page ${i}: ${'lorem ipsum '.repeat(12)}`,
        language: 'en', domain: 'example.test', authorName: i % 5 ? 'Ada Lovelace' : null, publishDate: '2025-06-01 00:00:00+00',
        created: '2025-06-01 00:00:00+00', updated: '2026-01-10 00:00:00.123+00', archivedAt: i % 3 ? "'=1970-01-01" : null,
      };
      rows.push(columns.map((c) => row[c] ?? null));
    }
    const text = fileOf([columns, ...rows]);
    const cpu = process.cpuUsage();
    const csv = ok(parseCsv(text));
    const parseUs = process.cpuUsage(cpu);
    const cpu2 = process.cpuUsage();
    const body = JSON.stringify(csv.rows); // what goes to Postgres
    const jsonUs = process.cpuUsage(cpu2);
    const ms = (u: NodeJS.CpuUsage) => ((u.user + u.system) / 1000).toFixed(1);
    console.log(`csv-parse: 10,000 rows, ${(text.length / 1e6).toFixed(1)} MB: parse ${ms(parseUs)} ms CPU, rows as JSON ${ms(jsonUs)} ms CPU (${(body.length / 1e6).toFixed(1)} MB)`);
    // Compared as JSON text: 150,000 cells compare in milliseconds so.
    expect(JSON.stringify(csv.header)).toBe(JSON.stringify(columns));
    expect(body).toBe(JSON.stringify(rows));
    const theirs = parse(text, { cast: (v: string, ctx: { quoting: boolean }) => (v === '' && !ctx.quoting ? null : v) }) as unknown[];
    expect(JSON.stringify([csv.header, ...csv.rows])).toBe(JSON.stringify(theirs));
  });
});
