// CSV as Postgres writes it for exports: private.csv_cells (spreadsheet-formula
// neutralisation, JSON values as JSON text) under COPY ... WITH (FORMAT csv)
// (RFC 4180 quoting), read back as the bytes COPY sends, plus one real export.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportColumns, exportHeader } from '../functions/worker/export-columns.ts';
import { processExportJob } from '../functions/worker/export-job.ts';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { localExportPath } from '../shared/export-location.ts';
import type { JobContext } from '../functions/worker/job-context.ts';
import { silentLogger } from '../shared/log.ts';
import { claimNextJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { parseCsv } from '../scripts/chaos/checks.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { jobRow } from './support/queue-fixtures.ts';

const db = useTestDatabase();

beforeAll(async () => {
  await db.sql`create table public.csv_cases (id serial primary key, lead text[] not null, data jsonb not null, fields text[] not null)`;
});

/** The CSV record COPY writes for private.csv_cells(lead, data, fields). */
async function record(lead: (string | null)[], data: Record<string, unknown>, fields: string[]): Promise<string> {
  const [row] = await db.sql`insert into public.csv_cases (lead, data, fields) values (${lead}::text[], ${db.sql.json(data as never)}, ${fields}) returning id`;
  const width = lead.length + fields.length;
  const columns = Array.from({ length: width }, (_, i) => `e.v[${i + 1}]`).join(', ');
  const stream = await db.sql
    .unsafe(`copy (select ${columns} from (select private.csv_cells(c.lead, c.data, c.fields) from public.csv_cases c where c.id = ${Number(row!.id)}) as e(v)) to stdout with (format csv)`)
    .readable();
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** One field's cell as COPY writes it (without the record's line end). */
async function cell(value: unknown): Promise<string> {
  const line = await record([], value === undefined ? {} : { v: value }, ['v']);
  expect(line.endsWith('\n')).toBe(true);
  return line.slice(0, -1);
}

describe('csv (Postgres)', () => {
  it('quotes commas, quotes and line breaks, doubling inner quotes', async () => {
    expect(await cell('plain')).toBe('plain');
    expect(await cell('a,b')).toBe('"a,b"');
    expect(await cell('say "hi"')).toBe('"say ""hi"""');
    expect(await cell('two\nlines')).toBe('"two\nlines"');
    expect(await cell('crlf\r\nend')).toBe('"crlf\r\nend"');
    expect(await cell('ünïcödé ✓')).toBe('ünïcödé ✓');
    // An empty string is quoted, to tell it from a missing value (an empty cell).
    expect(await cell('')).toBe('""');
  });

  it('neutralises cells a spreadsheet would execute', async () => {
    for (const dangerous of ['=HYPERLINK("x")', '+1+2', '-2+3', '@SUM(A1)', '\tcmd', '\rcmd']) {
      const c = await cell(dangerous);
      expect(c.replace(/^"/, '').startsWith("'"), dangerous).toBe(true);
      expect(parseCsv(`${c}\n`)[0]![0]).toBe(`'${dangerous}`);
    }
    expect(await cell('=1,2')).toBe(`"'=1,2"`);
    // Numbers are numbers, not formulas.
    expect(await cell(-5)).toBe('-5');
    // Our own leading columns (hubspot_id, hubspot_updated_at) get the same treatment.
    expect(await record(['=id', '2026-01-02T03:04:05.000Z', null], { v: 'x' }, ['v'])).toBe(`'=id,2026-01-02T03:04:05.000Z,,x\n`);
  });

  it('writes nested values as JSON, empty for JSON null and missing fields, scalars as text', async () => {
    expect(await cell({ a: [1, 'x'] })).toBe('"{""a"": [1, ""x""]}"');
    expect(JSON.parse(parseCsv(`${await cell({ a: [1, 'x'], b: { c: null } })}\n`)[0]![0]!)).toEqual({ a: [1, 'x'], b: { c: null } });
    expect(await cell(['=x'])).toBe('"[""=x""]"');
    expect(await cell(null)).toBe('');
    expect(await cell(undefined)).toBe('');
    expect(await cell(1.5)).toBe('1.5');
    expect(await cell(true)).toBe('true');
    expect(await record(['a'], { n: 1, b: true }, ['n', 'b'])).toBe('a,1,true\n');
  });

  it('keeps a stable column list per type', () => {
    const header = exportHeader('blog_posts');
    expect(header.slice(0, 3)).toEqual(['hubspot_id', 'hubspot_updated_at', 'name']);
    expect(header.slice(2)).toEqual([...exportColumns('blog_posts')]);
  });
});

describe('an export file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'csv-export-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('has the type header, one record per live item in id order, ISO timestamps, and neutralised cells', async () => {
    const { userId, portalId } = await createUserWithPortal(db.sql);
    await db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at, deleted_at) values
      (${portalId}, ${userId}, 'blog_tags', '11', ${db.sql.json({ name: '=SUM(A1)', slug: 'a,b', language: null, created: 5, updated: { at: 'x' } })}, '2026-01-02T03:04:05.678Z', null),
      (${portalId}, ${userId}, 'blog_tags', '-12', ${db.sql.json({ name: 'line\nbreak', slug: 'say "hi"' })}, null, null),
      (${portalId}, ${userId}, 'blog_tags', '13', ${db.sql.json({ name: 'deleted' })}, now(), now())`;
    const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['blog_tags'] });
    const job = (await claimNextJob(db.sql, 'csv-test', ['export']))!;
    expect(job.runId).toBe(run.runId);
    const ctx: JobContext = {
      sql: db.sql, job, log: silentLogger, signal: new AbortController().signal,
      timeLeft: () => 60_000, outOfBudget: () => null, cpuMs: () => 0, now: Date.now,
      hubspotForPortal: async () => {
        throw new Error('not used');
      },
      exportSink: localDirectorySink(dir),
    };
    expect(await processExportJob(ctx)).toEqual({ kind: 'completed' });
    const result = (await jobRow(db.sql, job.id)).result as { rows: number; bytes: number; location: string };
    const text = await readFile(localExportPath(dir, result.location), 'utf8');
    expect(result).toMatchObject({ rows: 2, bytes: Buffer.byteLength(text) });
    expect(text).toBe(
      'hubspot_id,hubspot_updated_at,name,slug,language,created,updated\n' +
        `11,2026-01-02T03:04:05.678Z,'=SUM(A1),"a,b",,5,"{""at"": ""x""}"\n` +
        `'-12,,"line\nbreak","say ""hi""",,,\n`,
    );
    expect(parseCsv(text)[0]).toEqual(exportHeader('blog_tags'));
  });
});
