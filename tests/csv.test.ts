// CSV cells: RFC 4180 quoting and spreadsheet-formula neutralisation.
import { describe, expect, it } from 'vitest';
import { csvCell, csvRow } from '../functions/worker/csv.ts';
import { EXPORT_COLUMNS, exportHeader } from '../functions/worker/export-columns.ts';

describe('csv', () => {
  it('quotes commas, quotes and line breaks, doubling inner quotes', () => {
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('two\nlines')).toBe('"two\nlines"');
    expect(csvCell('crlf\r\nend')).toBe('"crlf\r\nend"');
    expect(csvCell('ünïcödé ✓')).toBe('ünïcödé ✓');
  });

  it('neutralises cells a spreadsheet would execute', () => {
    for (const dangerous of ['=HYPERLINK("x")', '+1+2', '-2+3', '@SUM(A1)', '\tcmd', '\rcmd']) {
      const cell = csvCell(dangerous);
      expect(cell.replace(/^"/, '').startsWith("'"), dangerous).toBe(true);
    }
    expect(csvCell(-5)).toBe('-5');
  });

  it('writes nested values as JSON, empty for null/undefined, dates as ISO', () => {
    expect(csvCell({ a: [1, 'x'] })).toBe('"{""a"":[1,""x""]}"');
    expect(csvCell(null)).toBe('');
    expect(csvCell(undefined)).toBe('');
    expect(csvCell(new Date('2026-01-02T03:04:05Z'))).toBe('2026-01-02T03:04:05.000Z');
    expect(csvRow(['a', 1, true])).toBe('a,1,true\r\n');
  });

  it('keeps a stable column list per type', () => {
    const header = exportHeader('blog_posts');
    expect(header.slice(0, 3)).toEqual(['hubspot_id', 'hubspot_updated_at', 'name']);
    expect(header.slice(2)).toEqual([...EXPORT_COLUMNS.blog_posts]);
  });
});
