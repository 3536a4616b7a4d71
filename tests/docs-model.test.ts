// The docs are the model, the decision log is the history (issue 58): every
// record in docs/decisions/ opens with a Status line (kept / kept, amended by
// NNNN / superseded by NNNN / dropped / open) whose successors exist, and the
// index shows each record's status as the record does; docs/scaling.md and
// docs/performance.md hold the model and today's figures in at most 250 lines
// of at most 400 characters (the run history lives in bench/results/).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';

const DECISIONS = 'docs/decisions';
const read = (rel: string) => readFileSync(path.join(PROJECT_ROOT, rel), 'utf8');

const LINK = String.raw`\[(\d{4})\]\((\d{4}-[a-z0-9-]+\.md)\)`;
const STATUS = new RegExp(
  String.raw`^(?:- )?Status: ((?:kept|dropped|open)(?:, amended by ${LINK}(?:, ${LINK})*)?|superseded by ${LINK})(?=$|[ .;:(])`,
  'm',
);

/** A record's status phrase (links included), or null when its opening has none. */
export function statusOf(markdown: string): string | null {
  // The Status line belongs to the record's opening: before its first section.
  const opening = markdown.split(/^## /m)[0]!;
  return STATUS.exec(opening)?.[1] ?? null;
}

/** The decision files a status phrase names as successors or amendments. */
export function namedFiles(status: string): string[] {
  return [...status.matchAll(new RegExp(LINK, 'g'))].map((m) => m[2]!);
}

/** The index's rows: number, file linked and status cell. */
export function indexRows(markdown: string): { number: string; file: string; status: string }[] {
  return [...markdown.matchAll(/^\| \[(\d{4})\]\(([^)]+)\) \| .* \| ([^|]+) \|$/gm)].map((m) => ({ number: m[1]!, file: m[2]!, status: m[3]!.trim() }));
}

const records = readdirSync(path.join(PROJECT_ROOT, DECISIONS)).filter((f) => /^\d{4}-.*\.md$/.test(f)).sort();

describe('the decision log', () => {
  it('has its records', () => {
    expect(records.length).toBeGreaterThanOrEqual(50);
  });

  it.each(records)('%s opens with a Status line whose decisions exist', (file) => {
    const status = statusOf(read(`${DECISIONS}/${file}`));
    expect(status, `${file}: no "Status: kept | kept, amended by [NNNN](…) | superseded by [NNNN](…) | dropped | open" line`).not.toBeNull();
    for (const named of namedFiles(status!)) expect(records, `${file} names ${named}`).toContain(named);
    for (const m of status!.matchAll(new RegExp(LINK, 'g'))) expect(m[2]!.startsWith(m[1]!), `${file}: [${m[1]}] links ${m[2]}`).toBe(true);
  });

  it('the index lists every record once, with the status the record has', () => {
    const rows = indexRows(read(`${DECISIONS}/README.md`));
    expect(rows.map((r) => r.file).sort()).toEqual(records);
    for (const row of rows) {
      expect(row.file.startsWith(row.number), row.file).toBe(true);
      expect(row.status, row.file).toBe(statusOf(read(`${DECISIONS}/${row.file}`)));
    }
  });

  it('the checks can fail', () => {
    expect(statusOf('# 0001. A\n\n- Status: accepted, built\n')).toBeNull();
    expect(statusOf('# 0001. A\n\nSome text.\n\n## Status: kept\n')).toBeNull();
    expect(statusOf('# 0001. A\n\nStatus: kept. Where: `x`\n')).toBe('kept');
    expect(statusOf('# 0001. A\n\n- Status: superseded by [0002](0002-b.md) (one call)\n')).toBe('superseded by [0002](0002-b.md)');
    expect(statusOf('# 0001. A\n\n- Status: kept, amended by [0003](0003-c.md), [0004](0004-d.md)\n')).toBe('kept, amended by [0003](0003-c.md), [0004](0004-d.md)');
    expect(namedFiles('kept, amended by [0003](0003-c.md), [0004](0004-d.md)')).toEqual(['0003-c.md', '0004-d.md']);
    expect(indexRows('| [0001](0001-a.md) | a thing | dropped |\n| # | x | y |')).toEqual([{ number: '0001', file: '0001-a.md', status: 'dropped' }]);
  });
});

const MODEL_PAGES = ['docs/scaling.md', 'docs/performance.md'];
const MAX_LINES = 250;
const MAX_LINE_CHARS = 400;

/** What makes a model page too long, as messages. */
export function overLong(rel: string, markdown: string): string[] {
  const lines = markdown.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const out = lines.length > MAX_LINES ? [`${rel}: ${lines.length} lines`] : [];
  lines.forEach((line, n) => {
    if ([...line].length > MAX_LINE_CHARS) out.push(`${rel}:${n + 1}: ${[...line].length} characters`);
  });
  return out;
}

describe('the model pages', () => {
  it.each(MODEL_PAGES)(`%s has at most ${MAX_LINES} lines of at most ${MAX_LINE_CHARS} characters`, (rel) => {
    expect(overLong(rel, read(rel))).toEqual([]);
  });

  it('the check can fail', () => {
    expect(overLong('x.md', `${'a\n'.repeat(MAX_LINES)}`)).toEqual([]);
    expect(overLong('x.md', `${'a\n'.repeat(MAX_LINES + 1)}`)).toEqual([`x.md: ${MAX_LINES + 1} lines`]);
    expect(overLong('x.md', `ok\n${'b'.repeat(MAX_LINE_CHARS + 1)}\n`)).toEqual([`x.md:2: ${MAX_LINE_CHARS + 1} characters`]);
  });
});
