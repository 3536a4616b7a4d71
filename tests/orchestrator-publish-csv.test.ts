// The CSV upload (POST /orchestrator/publish/csv, functions/orchestrator/
// publish-csv.ts), the handler called directly on a real database: an
// export written by the real export job (the file a person downloads),
// edited as a spreadsheet would, uploaded and planned: the plan proposes
// exactly the cells changed (formula-escaped cells read back as what they
// were). Every bad file or request answers 4xx with its code and leaves
// nothing behind: unknown columns, changed read-only cells, wrong types, ids
// not in the copy, stale rows, ragged rows, bad quotes, not UTF-8, a file
// over the size limit, the wrong Content-Type, another type's export,
// another user's portal, a plan that cannot be made (nothing imported).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { csvImportedResponse, itemPageResponse } from '../functions/orchestrator/publish-schemas.ts';
import { errorBody } from '../functions/orchestrator/schemas.ts';
import type { JobContext } from '../functions/worker/job-context.ts';
import { processExportJob } from '../functions/worker/export-job.ts';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { startHubSpotSimulator, type HubSpotSimulator } from '../hubspot-sim/server.ts';
import type { ContentType } from '../shared/content-types.ts';
import { parseCsv } from '../shared/csv-parse.ts';
import { localExportPath } from '../shared/export-location.ts';
import { silentLogger } from '../shared/log.ts';
import { claimNextJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { createUser, createUserWithPortal, useTestDatabase } from './support/database.ts';
import { orchestratorHarness, type OrchestratorHarness } from './support/orchestrator-harness.ts';
import { addEdit, cmsItem, HubSpotItems, runPlan, seedCopy, type Item } from './support/publish-fixtures.ts';
import { documented, expectRefused, publishClient } from './support/publish-http.ts';
import { drainQueue, jobRow } from './support/queue-fixtures.ts';

const db = useTestDatabase();
let sim: HubSpotSimulator;
let h: OrchestratorHarness;
let api: ReturnType<typeof publishClient>;
let dir: string;

const T0 = '2026-01-10T00:00:00.000Z';

beforeAll(async () => {
  sim = await startHubSpotSimulator();
  h = await orchestratorHarness(db.sql, sim.url);
  api = publishClient(h);
  dir = await mkdtemp(path.join(tmpdir(), 'publish-csv-'));
  await db.sql`update private.write_limit_settings set max_writes = 100000`; // the limit itself: its own case below
});
afterAll(async () => {
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await drainQueue(db.sql);
});

/** A user with a portal whose copy (and HubSpot) holds `items` of `type`, and the user's token. */
async function owner(type: ContentType, items: Item[]) {
  const portal = await createUserWithPortal(db.sql);
  const hs = new HubSpotItems(type).put(...items);
  await seedCopy(db.sql, portal, type, items);
  return { ...portal, hs, token: await h.keys.signUserToken(portal.userId) };
}

/** The type's export file as a person downloads it: the real export job, to a local directory. */
async function exportFile(portal: { portalId: string; userId: string }, type: ContentType): Promise<string> {
  const run = await createRun(db.sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'export', contentTypes: [type] });
  const job = (await claimNextJob(db.sql, 'exporter', ['export']))!;
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
  const { location } = (await jobRow(db.sql, job.id)).result as { location: string };
  return readFile(localExportPath(dir, location), 'utf8');
}

/** A file opened in a spreadsheet: its cells by row (the hubspot_id's) and column, changed, saved again (CRLF, quoted as RFC 4180 says). */
function spreadsheet(text: string) {
  const parsed = parseCsv(text);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const { header, rows } = parsed.csv;
  const cellText = (v: string | null) => (v === null ? '' : v === '' || /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);
  return {
    header, rows,
    get: (id: string, column: string) => rows.find((r) => r[0] === id)![header.indexOf(column)],
    set(id: string, column: string, value: string | null) {
      const row = rows.find((r) => r[0] === id);
      if (!row) throw new Error(`no row ${id}`);
      row[header.indexOf(column)] = value;
      return this;
    },
    save: () => [header, ...rows].map((r) => r.map(cellText).join(',')).join('\r\n') + '\r\n',
  };
}

const upload = (o: { token: string; portalId: string }, type: string, file: string | Uint8Array, extra = '', headers: Record<string, string> = {}) =>
  api.upload(o.token, `portalId=${o.portalId}&contentType=${type}${extra}`, file, headers);

describe('the CSV round trip: export, edit in a spreadsheet, upload and plan', () => {
  it('plans exactly the cells changed, formula-escaped cells read back as what they were', async () => {
    const o = await owner('site_pages', [
      cmsItem('1', T0), cmsItem('2', T0), cmsItem('3', T0, { htmlTitle: '+44 20 7946' }), cmsItem('4', T0), cmsItem('5', T0),
      cmsItem('6', T0, { name: '=1+1', htmlTitle: '@home', metaDescription: 'has "quotes", commas\nand lines' }), cmsItem('7', T0, { metaDescription: null }),
    ]);
    const exported = await exportFile(o, 'site_pages');
    const sheet = spreadsheet(exported);
    expect(sheet.get('6', 'name')).toBe("'=1+1"); // the export neutralised it
    expect(sheet.get('3', 'htmlTitle')).toBe("'+44 20 7946");
    expect(sheet.get('7', 'metaDescription')).toBeNull();

    // The untouched file: no edit at all.
    const untouched = await upload(o, 'site_pages', exported);
    expect([untouched.status, documented(csvImportedResponse, untouched.body)]).toEqual([200, { portalId: o.portalId, contentType: 'site_pages', rows: 7, edits: 0, plan: null }]);

    sheet.set('1', 'name', 'Renamed, with a comma')
      .set('2', 'metaDescription', '') // a quoted empty cell: the empty string
      .set('3', 'htmlTitle', "'-5 degrees") // typed with the apostrophe a spreadsheet wants
      .set('4', 'slug', 'new-slug').set('4', 'authorName', 'Grace "Amazing" Hopper')
      .set('7', 'authorName', null); // cleared: null
    const wakes = h.wakes.count;
    const planned = await upload(o, 'site_pages', `\ufeff${sheet.save()}`, '&plan=true'); // saved with a byte order mark, as Excel does
    expect(planned.status, JSON.stringify(planned.body)).toBe(202);
    const body = documented(csvImportedResponse, planned.body);
    expect(body).toMatchObject({ rows: 7, edits: 5, plan: { items: 5 } });
    expect(h.wakes.count).toBe(wakes + 1);
    expect(await db.sql`select source, status, created_by from public.content_edits where portal_id = ${o.portalId} group by 1, 2, 3`)
      .toEqual([{ source: 'csv', status: 'planned', created_by: o.userId }]);

    await runPlan(db.sql, body.plan!.runId, { site_pages: o.hs });
    const items = documented(itemPageResponse, (await api.get(o.token, `/publish/plans/${body.plan!.planId}/items`)).body).items;
    expect(items.map((i) => [i.hubspotId, i.planStatus, i.before, i.after])).toEqual([
      ['1', 'ready', { name: 'Page 1' }, { name: 'Renamed, with a comma' }],
      ['2', 'ready', { metaDescription: 'About 2' }, { metaDescription: '' }],
      ['3', 'ready', { htmlTitle: '+44 20 7946' }, { htmlTitle: '-5 degrees' }],
      ['4', 'ready', { slug: 'page-4', authorName: 'Ada' }, { slug: 'new-slug', authorName: 'Grace "Amazing" Hopper' }],
      ['7', 'ready', { authorName: 'Ada' }, { authorName: null }],
    ]);
  });

  it('typed fields and HubDB values: a cell equal to the copy is no edit, changed ones are typed, values sparse; a file replaces pending edits', async () => {
    const redirect = (id: string): Item => ({
      id, routePrefix: `/old-${id}`, destination: `/new-${id}`, redirectStyle: 301, isMatchFullUrl: false, isMatchQueryString: false,
      isPattern: false, precedence: 10, created: T0, updated: T0,
    });
    const o = await owner('url_redirects', [redirect('r1'), redirect('r2')]);
    await addEdit(db.sql, o, 'url_redirects', 'r1', T0, { destination: '/from-the-app' });
    const sheet = spreadsheet(await exportFile(o, 'url_redirects'));
    sheet.set('r1', 'isPattern', 'FALSE').set('r2', 'precedence', '20').set('r2', 'isMatchFullUrl', 'TRUE');
    const r = await upload(o, 'url_redirects', sheet.save());
    expect([r.status, r.body.edits]).toEqual([200, 1]);
    expect([...await db.sql`select hubspot_id, patch, source from public.content_edits where portal_id = ${o.portalId} and status = 'pending' order by 1`]).toEqual([
      { hubspot_id: 'r1', patch: { destination: '/from-the-app' }, source: 'app' }, // r1's cells equal the copy: its app edit stays
      { hubspot_id: 'r2', patch: { isMatchFullUrl: true, precedence: 20 }, source: 'csv' },
    ]);
    // A wrong type: every bad cell named, nothing stored.
    sheet.set('r1', 'precedence', 'ten').set('r2', 'isPattern', 'maybe');
    const bad = await expectRefused(db.sql, () => upload(o, 'url_redirects', sheet.save()), 422, 'INVALID_CSV');
    expect(bad.body.details.errors.map((e: { row: number; column: string; code: string }) => [e.row, e.column, e.code]))
      .toEqual([[1, 'precedence', 'wrong_type'], [2, 'isPattern', 'wrong_type']]);
    documented(errorBody, bad.body);

    const rows = await owner('hubdb_rows', []);
    await seedCopy(db.sql, rows, 'hubdb_rows', [{ id: '101', path: 'a', name: 'A', values: { title: 'Alpha', rank: 1 }, childTableId: '0', createdAt: T0, updatedAt: T0 }], '7');
    const hub = spreadsheet(await exportFile(rows, 'hubdb_rows'));
    hub.set('7:101', 'values', '{"title": "Alpha", "rank": 2}');
    expect((await upload(rows, 'hubdb_rows', hub.save())).body.edits).toBe(1);
    expect((await db.sql`select patch from public.content_edits where portal_id = ${rows.portalId}`)[0]!.patch).toEqual({ values: { rank: 2 } });
  });
});

describe('a bad upload answers 4xx with its code and leaves nothing behind', () => {
  it('the file\'s errors, all of them, per row and column (422 INVALID_CSV)', async () => {
    const o = await owner('site_pages', [cmsItem('1', T0), cmsItem('2', T0), cmsItem('3', T0), cmsItem('4', T0)]);
    const exported = await exportFile(o, 'site_pages');
    const sheet = spreadsheet(exported);
    sheet.set('1', 'url', 'https://elsewhere.test/') // read-only
      .set('1', 'name', 'Fine') // a good cell on a bad row
      .set('2', 'hubspot_updated_at', '2025-12-31T00:00:00.000Z') // the item changed since: stale
      .set('3', 'created', '2020-01-01T00:00:00Z') // read-only
      .set('4', 'hubspot_id', '99'); // not in the copy
    const rowsErr = await expectRefused(db.sql, () => upload(o, 'site_pages', sheet.save()), 422, 'INVALID_CSV');
    expect(rowsErr.body.details.errors.map((e: { row: number; column: string; code: string }) => [e.row, e.column, e.code])).toEqual([
      [1, 'url', 'read_only'], [2, 'hubspot_updated_at', 'stale'], [3, 'created', 'read_only'], [4, 'hubspot_id', 'not_in_copy'],
    ]);
    expect(rowsErr.body.message).toBe('The file was not imported, nothing was stored: row 1: url is read-only: leave its cell as exported (and 3 more: see details.errors).');

    const cases: [string, string | Uint8Array, { row: number | null; column: string | null; code: string }[]][] = [
      ['an unknown column', exported.replace('hubspot_id,hubspot_updated_at,name', 'hubspot_id,hubspot_updated_at,title'), [{ row: null, column: 'title', code: 'unknown_column' }]],
      ['a ragged row (the reader: rows and numbers)', exported.replace(/\n(2,[^\n]*)\n/, '\n$1,extra\n').replace(/\n4,[^\n]*\n/, '\n4\n'),
        [{ row: 2, column: null, code: 'row_shape' }, { row: 4, column: null, code: 'row_shape' }]],
      ['a quote inside an unquoted cell', exported.replace('Page 3', 'Page "3"'), [{ row: 3, column: 'name', code: 'stray_quote' }]],
      ['a quoted cell never closed', `${exported}"5,${T0}\n`, [{ row: 5, column: 'hubspot_id', code: 'unterminated_quote' }]],
      ['bytes that are not UTF-8 (a Windows-1252 é)', Buffer.concat([Buffer.from(exported), Buffer.from([0x31, 0xe9, 0x0a])]), [{ row: null, column: null, code: 'not_utf8' }]],
      ['an empty file', '', [{ row: null, column: null, code: 'empty_file' }]],
    ];
    for (const [label, file, errors] of cases) {
      const r = await expectRefused(db.sql, () => upload(o, 'site_pages', file), 422, 'INVALID_CSV');
      expect(r.body.details.errors.map((e: object) => ({ row: (e as never)['row'], column: (e as never)['column'], code: (e as never)['code'] })), label).toEqual(errors);
    }
    // Another type's export: its columns are not this type's.
    const tags = await owner('blog_tags', [{ id: 't1', name: 'News', slug: 'news', language: 'en', created: T0, updated: T0 }]);
    const tagFile = await exportFile(tags, 'blog_tags');
    const wrongType = await expectRefused(db.sql, () => upload(tags, 'blog_authors', tagFile), 422, 'INVALID_CSV');
    expect(wrongType.body.details.errors.map((e: { column: string; code: string }) => `${e.column} ${e.code}`)).toEqual(['name unknown_column']);
  });

  it('the request: query, Content-Type, size, another user\'s portal, the write limit', async () => {
    const o = await owner('blog_tags', [{ id: 't1', name: 'News', slug: 'news', language: 'en', created: T0, updated: T0 }]);
    const file = spreadsheet(await exportFile(o, 'blog_tags')).set('t1', 'name', 'Updates').save();
    for (const q of ['', `portalId=${o.portalId}`, `portalId=${o.portalId}&contentType=hubdb_tables`, `portalId=nope&contentType=blog_tags`,
      `portalId=${o.portalId}&contentType=blog_tags&plan=yes`, `portalId=${o.portalId}&contentType=blog_tags&mode=draft`,
      `portalId=${o.portalId}&contentType=blog_tags&plan=true&mode=draft`]) {
      await expectRefused(db.sql, () => api.upload(o.token, q, file), 400, 'INVALID_QUERY');
    }
    for (const type of ['application/json', 'text/plain', 'application/octet-stream', 'text/csv; charset=windows-1252']) {
      await expectRefused(db.sql, () => upload(o, 'blog_tags', file, '', { 'Content-Type': type }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    }
    expect((await upload(o, 'blog_tags', file, '', { 'Content-Type': 'text/csv; charset=UTF-8' })).status).toBe(200);

    const stranger = { token: await h.keys.signUserToken(await createUser(db.sql)), portalId: o.portalId };
    await expectRefused(db.sql, () => upload(stranger, 'blog_tags', file), 404, 'PORTAL_NOT_FOUND');

    await db.sql`update private.publish_settings set max_csv_bytes = 1024`;
    try {
      const big = file + `${'x'.repeat(1100)}\n`;
      const streamed = await expectRefused(db.sql, () => upload(o, 'blog_tags', big), 413, 'PAYLOAD_TOO_LARGE');
      expect(streamed.body.message).toBe('The file must be at most 1024 bytes (1 KiB): split it by rows.');
      await expectRefused(db.sql, () => upload(o, 'blog_tags', big, '', { 'Content-Length': String(Buffer.byteLength(big)) }), 413, 'PAYLOAD_TOO_LARGE');
      expect((await upload(o, 'blog_tags', file)).status).toBe(200); // under the limit
    } finally {
      await db.sql`update private.publish_settings set max_csv_bytes = 5242880`;
    }

    await db.sql`update private.write_limit_settings set max_writes = 1`;
    try {
      const limited = { token: await h.keys.signUserToken(await createUser(db.sql)), portalId: o.portalId };
      await expectRefused(db.sql, () => upload(limited, 'blog_tags', file), 404, 'PORTAL_NOT_FOUND'); // counted
      const r = await expectRefused(db.sql, () => upload(limited, 'blog_tags', file), 429, 'RATE_LIMITED');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await db.sql`update private.write_limit_settings set max_writes = 100000`;
    }
  });

  it('plan=true: when no plan can be made, nothing of the file is stored either', async () => {
    const o = await owner('site_pages', [cmsItem('1', T0), cmsItem('2', T0)]);
    const exported = await exportFile(o, 'site_pages');
    // Nothing changed and nothing pending: no plan, and no edits.
    await expectRefused(db.sql, () => upload(o, 'site_pages', exported, '&plan=true'), 409, 'NO_PENDING_EDITS');
    // A plan of the type still being made: the file's edits are not stored (one transaction).
    await addEdit(db.sql, o, 'site_pages', '1', T0, { name: 'From the app' });
    expect((await api.post(o.token, { action: 'create_publish_plan', portalId: o.portalId })).status).toBe(202);
    const file = spreadsheet(exported).set('2', 'name', 'Two').save();
    await expectRefused(db.sql, () => upload(o, 'site_pages', file, '&plan=true'), 409, 'PLAN_IN_PROGRESS');
    // Without plan=true the edits are stored, and planned with the app's by the next plan.
    expect((await upload(o, 'site_pages', file)).body.edits).toBe(1);
    // Scheduled: a page's plan may be written at a time.
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const p = await owner('site_pages', [cmsItem('1', T0)]);
    const scheduled = await upload(p, 'site_pages', spreadsheet(await exportFile(p, 'site_pages')).set('1', 'slug', 'later').save(), `&plan=true&mode=schedule&publishAt=${encodeURIComponent(at)}`);
    expect(scheduled.status, JSON.stringify(scheduled.body)).toBe(202);
    expect(await db.sql`select mode, publish_at from public.publish_plans where id = ${scheduled.body.plan.planId}`).toEqual([{ mode: 'schedule', publish_at: new Date(at) }]);
  });
});
