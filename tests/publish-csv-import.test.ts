// CSV imports (public.import_csv_edits): an export written by the real export
// functions (COPY of public.export_rows, private.csv_cells' formula
// neutralising included), edited as a person would in a spreadsheet, read back
// into pending edits of exactly the cells changed; every bad input answered
// with its errors per row and nothing stored.
import { parse } from 'csv-parse/sync';
import postgres from 'postgres';
import { beforeEach, describe, expect, it } from 'vitest';
import { contentType, type ContentType } from '../shared/content-types.ts';
import { beginExport, exportPage, exportRowsCopy } from '../shared/sql/export.ts';
import { claimNextJob, completeJob } from '../shared/sql/jobs.ts';
import { importCsvEdits, publishRefusalOf, type CsvImportError } from '../shared/sql/publish.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { drainQueue } from './support/queue-fixtures.ts';
import { addEdit, cmsItem, HubSpotItems, makePlan, seedCopy, userClaims, type Item } from './support/publish-fixtures.ts';

const db = useTestDatabase();

beforeEach(async () => {
  await drainQueue(db.sql);
});

const T0 = '2026-01-10T00:00:00.000Z';
type Cells = (string | null)[];

/** The type's export as a person downloads it (the real export job's COPY), parsed: header and rows, an empty unquoted cell as null. */
async function exported(portal: { portalId: string; userId: string }, type: ContentType): Promise<{ columns: string[]; rows: Cells[] }> {
  const run = await createRun(db.sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'export', contentTypes: [type] });
  const job = (await claimNextJob(db.sql, 'exporter', ['export']))!;
  expect(job.runId).toBe(run.runId);
  const columns = ['hubspot_id', 'hubspot_updated_at', ...contentType(type).exportColumns];
  expect(await beginExport(db.sql, job, { columns: contentType(type).exportColumns })).toBe(true);
  const page = await exportPage(db.sql, job, '0', 1000);
  const chunks: Buffer[] = [];
  const stream = await db.sql.unsafe(exportRowsCopy(job, columns.length, '0', page.lastId!)).readable();
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  expect(await completeJob(db.sql, job)).toBe(true);
  const rows = parse(Buffer.concat(chunks).toString('utf8'), {
    cast: (value: string, ctx: { quoting: boolean }) => (value === '' && !ctx.quoting ? null : value),
  }) as Cells[];
  return { columns, rows };
}

/** Sets a cell of the row whose hubspot_id is `id`. */
function setCell(file: { columns: string[]; rows: Cells[] }, id: string, column: string, value: string | null): void {
  const row = file.rows.find((r) => r[0] === id)!;
  row[file.columns.indexOf(column)] = value;
}

async function pendingEdits(portalId: string) {
  return [...await db.sql`select hubspot_id, base_updated_at, patch, source, status, created_by from public.content_edits
                           where portal_id = ${portalId} and status = 'pending' order by hubspot_id`];
}

describe('import_csv_edits', () => {
  it('reads an edited export back as exactly the cells changed (formula-escaped cells as they were)', async () => {
    const portal = await createUserWithPortal(db.sql);
    const hs = new HubSpotItems('site_pages').put(
      cmsItem('1', T0), cmsItem('2', T0), cmsItem('3', T0, { name: '=1+1', htmlTitle: '@home' }), cmsItem('4', T0, { metaDescription: null }));
    await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
    const file = await exported(portal, 'site_pages');
    expect(file.rows.find((r) => r[0] === '3')![file.columns.indexOf('name')]).toBe("'=1+1"); // the export neutralised it
    expect(file.rows.find((r) => r[0] === '4')![file.columns.indexOf('metaDescription')]).toBeNull();

    setCell(file, '1', 'name', 'Renamed');
    setCell(file, '2', 'metaDescription', ''); // a quoted empty string: cleared to ''
    setCell(file, '3', 'htmlTitle', "'-5 degrees"); // typed with the apostrophe a spreadsheet wants
    setCell(file, '4', 'authorName', null); // cleared: JSON null
    const result = await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'site_pages', ...file });
    expect(result).toEqual({ edits: 4, errors: [] });
    const edits = await pendingEdits(portal.portalId);
    expect(edits.map((e) => [e.hubspot_id, e.patch, e.source, e.created_by])).toEqual([
      ['1', { name: 'Renamed' }, 'csv', portal.userId],
      ['2', { metaDescription: '' }, 'csv', portal.userId],
      ['3', { htmlTitle: '-5 degrees' }, 'csv', portal.userId],
      ['4', { authorName: null }, 'csv', portal.userId],
    ]);
    expect(edits[0]!.base_updated_at).toEqual(new Date(T0));

    // The same file again replaces each item's pending edit (still exactly these cells); an unchanged file makes none.
    expect(await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'site_pages', ...file }))
      .toEqual({ edits: 4, errors: [] });
    expect(await pendingEdits(portal.portalId)).toHaveLength(4);
    const untouched = await exported(portal, 'site_pages');
    expect(await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'site_pages', ...untouched }))
      .toEqual({ edits: 0, errors: [] });

    // The plan proposes exactly those cells, before → after.
    const plan = await makePlan(db.sql, portal, { site_pages: hs });
    const items = await db.sql`select hubspot_id, before, after, plan_status from public.publish_items where plan_id = ${plan.planId} order by hubspot_id`;
    expect(items.map((i) => [i.hubspot_id, i.before, i.after, i.plan_status])).toEqual([
      ['1', { name: 'Page 1' }, { name: 'Renamed' }, 'ready'],
      ['2', { metaDescription: 'About 2' }, { metaDescription: '' }, 'ready'],
      ['3', { htmlTitle: '@home' }, { htmlTitle: '-5 degrees' }, 'ready'],
      ['4', { authorName: 'Ada' }, { authorName: null }, 'ready'],
    ]);
  });

  it('typed fields: a cell whose value equals the copy is no edit (TRUE for true), changed ones are typed, HubDB values sparse', async () => {
    const portal = await createUserWithPortal(db.sql);
    const redirect = (id: string, fields: Record<string, unknown> = {}): Item => ({
      id, routePrefix: `/old-${id}`, destination: `/new-${id}`, redirectStyle: 301, isMatchFullUrl: false, isMatchQueryString: false,
      isPattern: false, precedence: 10, created: T0, updated: T0, ...fields,
    });
    await seedCopy(db.sql, portal, 'url_redirects', [redirect('r1'), redirect('r2')]);
    const file = await exported(portal, 'url_redirects');
    setCell(file, 'r1', 'isPattern', 'FALSE'); // a spreadsheet's spelling of the same value
    setCell(file, 'r1', 'precedence', '10');
    setCell(file, 'r2', 'isMatchFullUrl', 'TRUE');
    setCell(file, 'r2', 'precedence', ' 20 ');
    expect(await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'url_redirects', ...file }))
      .toEqual({ edits: 1, errors: [] });
    expect((await pendingEdits(portal.portalId)).map((e) => [e.hubspot_id, e.patch])).toEqual([['r2', { isMatchFullUrl: true, precedence: 20 }]]);

    const rows: Item[] = [{ id: '101', path: 'a', name: 'A', values: { title: 'Alpha', rank: 1 }, childTableId: '0', createdAt: T0, updatedAt: T0 }];
    await seedCopy(db.sql, portal, 'hubdb_rows', rows, '7');
    const hub = await exported(portal, 'hubdb_rows');
    expect(hub.rows[0]![hub.columns.indexOf('values')]).toBe('{"rank": 1, "title": "Alpha"}');
    setCell(hub, '7:101', 'values', '{"title":"Alpha","rank":2}');
    expect(await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'hubdb_rows', ...hub }))
      .toEqual({ edits: 1, errors: [] });
    expect((await pendingEdits(portal.portalId)).find((e) => e.hubspot_id === '7:101')!.patch).toEqual({ values: { rank: 2 } });
  });

  it('answers every bad row with its errors and stores nothing', async () => {
    const portal = await createUserWithPortal(db.sql);
    const hs = new HubSpotItems('site_pages').put(cmsItem('1', T0), cmsItem('2', T0), cmsItem('3', T0), cmsItem('4', T0));
    await seedCopy(db.sql, portal, 'site_pages', [...hs.items.values()]);
    await addEdit(db.sql, portal, 'site_pages', '1', T0, { name: 'Kept' });
    const file = await exported(portal, 'site_pages');
    setCell(file, '1', 'url', 'https://elsewhere.test/'); // read-only
    setCell(file, '1', 'name', 'Fine'); // a good cell on a bad row
    setCell(file, '2', 'hubspot_updated_at', '2025-12-31T00:00:00.000Z'); // not what the copy has: stale
    setCell(file, '3', 'hubspot_updated_at', 'yesterday'); // (a date Postgres reads, but not a timestamp)
    setCell(file, '4', 'created', '2020-01-01T00:00:00Z'); // read-only
    file.rows.push(['99', T0, ...contentType('site_pages').exportColumns.map(() => null)]); // not in the copy
    file.rows.push([...file.rows[4]!]); // hubspot_id 4 again
    file.rows.push(['2', T0]); // too short
    const before = await pendingEdits(portal.portalId);
    const result = await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'site_pages', ...file });
    expect(result.edits).toBe(0);
    expect(result.errors.map((e: CsvImportError) => [e.row, e.column, e.code])).toEqual([
      [1, 'url', 'read_only'],
      [2, 'hubspot_updated_at', 'stale'],
      [3, 'hubspot_updated_at', 'wrong_type'],
      [4, 'created', 'read_only'],
      [5, 'hubspot_id', 'not_in_copy'],
      [6, 'hubspot_id', 'duplicate_row'],
      [7, null, 'row_shape'],
    ]);
    expect(result.errors[0]!.message).toBe('url is read-only: leave its cell as exported');
    expect(result.errors[1]!.message).toMatch(/^the item changed since this file was exported \(hubspot_updated_at 2025-12-31T00:00:00.000Z, the copy has 2026-01-10T00:00:00.000Z\)/);
    expect(result.errors[4]!.message).toBe("site_pages 99 is not a live item of this portal's copy");
    expect(result.errors[6]!.message).toBe('the row has 2 cells; the header has 15');
    expect(await pendingEdits(portal.portalId)).toEqual(before);

    // Wrong types, per field.
    const redirects = [{ id: 'r1', routePrefix: '/a', destination: '/b', redirectStyle: 301, isMatchFullUrl: false, isMatchQueryString: false,
                         isPattern: false, precedence: 1, created: T0, updated: T0 }];
    await seedCopy(db.sql, portal, 'url_redirects', redirects);
    const r = await exported(portal, 'url_redirects');
    setCell(r, 'r1', 'precedence', '1.5');
    setCell(r, 'r1', 'isPattern', 'yes');
    setCell(r, 'r1', 'redirectStyle', null);
    const typed = await importCsvEdits(db.sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'url_redirects', ...r });
    expect(typed.errors.map((e) => [e.row, e.column, e.code, e.message])).toEqual([
      [1, 'redirectStyle', 'wrong_type', 'redirectStyle must be a whole number'],
      [1, 'isPattern', 'wrong_type', 'isPattern must be true or false'],
      [1, 'precedence', 'wrong_type', 'precedence must be a whole number'],
    ]);
  });

  it('checks the header first: unknown, duplicate and missing columns', async () => {
    const portal = await createUserWithPortal(db.sql);
    await seedCopy(db.sql, portal, 'blog_tags', [{ id: 't1', name: 'News', slug: 'news', language: 'en', created: T0, updated: T0 }]);
    const result = await importCsvEdits(db.sql, {
      portalId: portal.portalId, userId: portal.userId, contentType: 'blog_tags',
      columns: ['hubspot_id', 'name', 'name', 'colour'], rows: [['t1', 'x', 'x', 'red']],
    });
    expect(result.edits).toBe(0);
    expect(result.errors).toEqual([
      { row: null, column: 'hubspot_updated_at', code: 'missing_column', message: "the header must have a hubspot_updated_at column (the export's own)" },
      { row: null, column: 'name', code: 'duplicate_column', message: 'name is in the header more than once' },
      { row: null, column: 'colour', code: 'unknown_column', message: 'colour is not a column of the blog_tags export' },
    ]);
  });

  it('refuses, with nothing stored: another user, a type that is not editable, too many rows', async () => {
    const portal = await createUserWithPortal(db.sql);
    const other = await createUserWithPortal(db.sql);
    const call = (input: Partial<Parameters<typeof importCsvEdits>[1]>) => importCsvEdits(db.sql, {
      portalId: portal.portalId, userId: portal.userId, contentType: 'blog_tags', columns: ['hubspot_id', 'hubspot_updated_at'], rows: [], ...input,
    }).then(() => null, (e) => publishRefusalOf(e));
    expect(await call({ userId: other.userId })).toMatchObject({ code: 'not_found', status: 404 });
    expect(await call({ contentType: 'hubdb_tables' })).toMatchObject({ code: 'invalid', message: 'hubdb_tables items are not editable' });
    await db.sql`update private.publish_settings set max_edits_per_plan = 2`;
    try {
      expect(await call({ rows: [['a', T0], ['b', T0], ['c', T0]] })).toMatchObject({ code: 'too_many', status: 413 });
    } finally {
      await db.sql`update private.publish_settings set max_edits_per_plan = 50000`;
    }
    expect(await pendingEdits(portal.portalId)).toEqual([]);
  });
});

describe('the lookups of the copy by key', () => {
  it("an edit's trigger and an import probe hubspot_content_one_per_item, never the type's live items whole", async () => {
    // 3,000 live items of a type: the partial index of live items (hubspot_content_live_idx) matches a lookup
    // that says `deleted_at is null`, and a generic plan read it whole per edit stored (a 10,000-row import: 77 s, now 2.4 s).
    const portal = await createUserWithPortal(db.sql);
    // (Not analyzed: as a copy just fetched, before autovacuum has looked at it.)
    await seedCopy(db.sql, portal, 'site_pages', Array.from({ length: 3000 }, (_, i) => cmsItem(String(i + 1), T0)));
    const notices: string[] = [];
    const sql = postgres(db.directUrl, { prepare: false, max: 1, onnotice: (n) => notices.push(String(n.message)) });
    try {
      try {
        await sql`load 'auto_explain'`;
      } catch {
        console.log('publish-csv-import: auto_explain is not available on this server: the lookups\' plans not checked');
        return;
      }
      await sql`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
        set_config('auto_explain.log_level', 'notice', false)`;
      for (let i = 1; i <= 6; i++) { // past the plan cache's five custom plans
        await sql.begin(async (tx) => {
          await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${JSON.stringify(userClaims(portal.userId))}, true)`;
          await tx`insert into public.content_edits (portal_id, content_type, hubspot_id, base_updated_at, patch)
                   values (${portal.portalId}, 'site_pages', ${String(i)}, ${T0}, ${tx.json({ name: `Edit ${i}` })})`;
        });
      }
      const columns = ['hubspot_id', 'hubspot_updated_at', 'name'];
      for (let i = 0; i < 6; i++) {
        await importCsvEdits(sql, { portalId: portal.portalId, userId: portal.userId, contentType: 'site_pages', columns,
                                    rows: [[String(100 + i), T0, `Imported ${i}`]] });
      }
    } finally {
      await sql.end({ timeout: 5 });
    }
    const lookups = notices.filter((n) => /hubspot_content/.test(n) && /Query Text/.test(n));
    expect(lookups.length).toBeGreaterThanOrEqual(12);
    expect(lookups.filter((n) => n.includes('hubspot_content_live_idx'))).toEqual([]);
    expect(lookups.every((n) => n.includes('hubspot_content_one_per_item'))).toBe(true);
  }, 60_000);
});
