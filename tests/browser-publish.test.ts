// The Publish view of the page (web/publish-*.js) in a real headless Chromium
// (Debian's `chromium` through playwright-core), against the local system:
// Postgres, the HubSpot simulator, both functions under Deno behind the local
// gateway, cron played by a loop, and the page server. A small portal is
// fetched and exported over the HTTP API; then, on the page: the real export
// with four cells changed is uploaded and planned (the plan shows exactly those
// four diffs), a plan past its freshness is refused with the page's words and
// planned again, one item is edited "in HubSpot" between plan and approve (a
// conflict) and one right after the apply's re-read (overwritten), the plan is
// approved (the confirmation names how many items), its progress followed in
// the run card, its results read per item and compared with the database,
// rolled back and those results compared too, the audit CSV downloaded; then an
// app's pending edit planned, a stale file refused with its rows listed, and
// the publish jobs found by kind in the Operator view. Screenshots of plan,
// conflicts, progress, results and rollback go to test-artifacts/publish/ (not
// committed). Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { parseCsv } from '../shared/csv-parse.ts';
import { useTestDatabase } from './support/database.ts';
import { addEdit } from './support/publish-fixtures.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
const SCREENSHOT_DIR = path.join(PROJECT_ROOT, 'test-artifacts/publish');
const HUBSPOT_PORTAL = 25_000_001;
const HUBSPOT_TOKEN = 'pat-publish-browser-test';
const PAGES = 24; // 21 of them edited: the diff's second page (20 items a page) holds one

if (!CHROMIUM) console.log('browser test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');

/** A file opened in a spreadsheet: cells changed by row (hubspot_id) and column, saved again (RFC 4180, CRLF). */
function spreadsheet(text: string) {
  const parsed = parseCsv(text);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const { header, rows } = parsed.csv;
  const cellText = (v: string | null) => (v === null ? '' : v === '' || /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);
  return {
    ids: rows.map((r) => r[0]!),
    get: (id: string, column: string) => rows.find((r) => r[0] === id)![header.indexOf(column)]!,
    set(id: string, column: string, value: string) {
      rows.find((r) => r[0] === id)![header.indexOf(column)] = value;
    },
    save: () => [header, ...rows].map((r) => r.map(cellText).join(',')).join('\r\n') + '\r\n',
  };
}

interface ShownRow { id: string; field: string; before: string; after: string; current: string | null; status: string }

/** The diff as the page shows it: one entry per item and field. */
const shownRows = (page: Page): Promise<ShownRow[]> => page.$$eval('#publish-items tr[data-hubspot-id]', (trs) => trs.map((tr) => {
  const el = tr as HTMLElement;
  return {
    id: el.dataset.hubspotId!, field: el.dataset.field!, status: el.dataset.status!,
    before: el.querySelector('td.before')!.textContent!, after: el.querySelector('td.after')!.textContent!,
    current: el.querySelector('td.current')?.textContent ?? null,
  };
}));

/** Every page of the diff, turned page by page from the first (and back to it). */
async function allRows(page: Page): Promise<ShownRow[]> {
  await page.waitForSelector('#publish-items[data-page="1"]');
  const rows = await shownRows(page);
  let n = 1;
  while (!(await page.isDisabled('#publish-next'))) {
    await page.click('#publish-next');
    await page.waitForSelector(`#publish-items[data-page="${++n}"]`);
    rows.push(...await shownRows(page));
  }
  for (; n > 1; n--) {
    await page.click('#publish-prev');
    await page.waitForSelector(`#publish-items[data-page="${n - 1}"]`);
  }
  return rows;
}
const byId = <T extends { id: string }>(rows: T[]): T[] => [...rows].sort((a, b) => a.id.localeCompare(b.id));

/** The chips' counts: { filter: count } ('' is All). */
const chipCounts = (page: Page): Promise<Record<string, number>> => page.$$eval('#publish-chips button[data-count]', (bs) =>
  Object.fromEntries(bs.map((b) => [(b as HTMLElement).dataset.filter!, Number((b as HTMLElement).dataset.count)])));

const waitPhase = (page: Page, phase: string, timeout = 60_000) =>
  page.waitForSelector(`#publish-plan[data-phase="${phase}"]`, { timeout });

describe.skipIf(!CHROMIUM)('the Publish view in headless Chromium', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let web: WebServer;
  let browser: Browser;
  let page: Page;
  let jwt: string;
  let userId: string;
  let portalId: string;
  let exported: string;
  let cronOn = true;
  let cron: Promise<void>;
  const consoleErrors: string[] = [];
  // Four of the edited pages: renamed, retitled (then changed in HubSpot: a conflict), described, renamed (overwritten in its window);
  // and 17 more described.
  const edited = { renamed: '', retitled: '', described: '', overwritten: '' };
  const EDITS = 21;
  let planId: string;

  const shot = (name: string) => page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });

  /** The orchestrator over HTTP, as the user. */
  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${sys.functions.url}/functions/v1/orchestrator${route}`, {
      method, headers: { Authorization: `Bearer ${jwt}`, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
    return res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text;
  };
  /** GET ?runId= once the run has finished (the cron loop runs the worker). */
  const finished = async (runId: string) => {
    for (let i = 0; i < 240; i++) {
      const d = await call('GET', `?runId=${runId}`);
      if (d.run.finishedAt) return d;
      await sleep(250);
    }
    throw new Error(`run ${runId} did not finish within 60 s`);
  };
  /** The plan's items as the database holds them, by HubSpot id. */
  type ItemRow = { hubspot_id: string; plan_status: string; outcome: string | null; restore_outcome: string | null; after: unknown; current: unknown };
  const itemsInDb = async (id: string): Promise<Record<string, ItemRow>> => Object.fromEntries((await db.sql<ItemRow[]>`select hubspot_id, plan_status,
      outcome, restore_outcome, after, current from public.publish_items where plan_id = ${id} order by id`).map((r) => [r.hubspot_id, r]));
  /** A stored page's field in the copy. */
  const stored = async (hubspotId: string, field: string) =>
    (await db.sql`select data->>${field} as v from public.hubspot_content where portal_id = ${portalId} and content_type = 'site_pages' and hubspot_id = ${hubspotId}`)[0]!.v as string;

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    sys = await startLocalSystem(db.url, { env: { WORKER_LANES: '1' } });
    sys.sim.addPortal({ portalId: HUBSPOT_PORTAL, token: HUBSPOT_TOKEN, sizes: { site_pages: PAGES } });
    userId = crypto.randomUUID();
    await db.sql`insert into auth.users (id, email, aud, role, raw_app_meta_data)
      values (${userId}, 'publisher@example.test', 'authenticated', 'authenticated', '{"queue_operator": true}')`;
    jwt = await sys.keys.signUserToken(userId, { expiresInSeconds: 3600 });
    cron = (async () => {
      while (cronOn) {
        await sys.invokeWorker().catch(() => {});
        await sleep(200);
      }
    })();
    // A fetched portal and the export of its site pages, as a person downloads it.
    portalId = (await call('POST', '', { action: 'connect_portal', name: 'Publish portal', accessToken: HUBSPOT_TOKEN })).portalId;
    await finished((await call('POST', '', { portalId, contentTypes: ['site_pages'] })).runId);
    const exp = await finished((await call('POST', '', { portalId, contentTypes: ['site_pages'], kind: 'export' })).runId);
    expect(exp.run.status).toBe('completed');
    exported = await call('GET', `/exports/${exp.jobs[0].id}`);
    web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: jwt });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) consoleErrors.push(m.text()); // 4xx answers are the page's to explain
    });
    page.on('pageerror', (e) => consoleErrors.push(e.message));
  }, 180_000);

  afterAll(async () => {
    cronOn = false;
    await browser?.close();
    await cron?.catch(() => {});
    await web?.close();
    await sys?.stop();
  }, 60_000);

  it('plan: the export with 21 cells changed, uploaded, shows exactly those diffs over two pages, fresh for the plan\'s time', async () => {
    const sheet = spreadsheet(exported);
    expect(sheet.ids).toHaveLength(PAGES);
    [edited.renamed, edited.retitled, edited.described, edited.overwritten] = sheet.ids as [string, string, string, string];
    const changes: [string, string, string][] = [
      [edited.renamed, 'name', 'Renamed, with a comma'],
      [edited.retitled, 'htmlTitle', 'Our "new" title'],
      [edited.described, 'metaDescription', 'A fresh description'],
      [edited.overwritten, 'name', 'Our name'],
      ...sheet.ids.slice(5, 22).map((id, i): [string, string, string] => [id, 'metaDescription', `Described ${i + 1}`]),
    ];
    expect(changes).toHaveLength(EDITS);
    const expected = byId(changes.map(([id, field, after]) => ({ id, field, before: sheet.get(id, field), after, current: null, status: 'ready' })));
    for (const [id, field, value] of changes) sheet.set(id, field, value);

    await page.goto(web.url);
    await page.waitForSelector('#publish-card:not([hidden])');
    await page.setInputFiles('#publish-file', { name: 'site_pages-0a1b2c3d.csv', mimeType: 'text/csv', buffer: Buffer.from(sheet.save()) });
    expect(await page.inputValue('#publish-type')).toBe('site_pages'); // read from the export's file name
    await page.click('#publish-upload');
    await page.waitForFunction(() => /21 edits from 24 rows/.test(document.getElementById('publish-message')!.textContent!));
    await page.waitForFunction(() => /^Plan · today /.test(document.getElementById('run-title')!.textContent!)); // the plan run, labelled as such
    await waitPhase(page, 'review');
    planId = (await page.getAttribute('#publish-plan', 'data-plan-id'))!;
    await page.waitForFunction(() => document.querySelectorAll('#publish-items tr[data-hubspot-id]').length === 20);

    expect(await chipCounts(page)).toEqual({ '': EDITS, ready: EDITS, conflict: 0, invalid: 0, unchanged: 0, missing: 0 });
    expect(byId(await allRows(page))).toEqual(expected);
    expect(await page.textContent('#publish-plan-status')).toBe('Ready to approve');
    expect(await page.textContent('#publish-plan-note')).toMatch(/^fresh for (29|30) min/);
    expect(await page.textContent('#publish-approve')).toBe(`Approve: write ${EDITS} items`);
    // The database's plan: the same 21 items, the same targets.
    const inDb = await itemsInDb(planId);
    expect(Object.keys(inDb).sort()).toEqual(expected.map((e) => e.id));
    for (const e of expected) expect(inDb[e.id]).toMatchObject({ plan_status: 'ready', after: { [e.field]: e.after } });
    expect(await page.$$eval('#runs-list .run-name', (els) => els.map((e) => e.textContent!.split(' · ')[0]))).toEqual(['Plan', 'Export', 'Fetch']);
    await shot('plan');
  });

  it('stale: approving past the plan\'s freshness is refused in the view\'s words; "Plan again" makes a fresh plan of the same edits', async () => {
    await page.click('#publish-approve');
    await page.waitForSelector('#publish-confirm:not([hidden])');
    expect(await page.textContent('#publish-confirm-text')).toMatch(/^Write 21 items to HubSpot\?/);
    await db.sql`update public.publish_plans set fresh_until = now() - interval '1 second' where id = ${planId}`; // back-dated, not waited for
    await page.click('#publish-confirm-yes');
    await page.waitForSelector('#publish-message.error');
    expect(await page.textContent('#publish-message')).toBe('HubSpot content may have changed since this plan was made: plan again.PLAN_STALE');
    await page.waitForFunction(() => document.getElementById('publish-plan-status')!.textContent === 'No longer fresh');
    expect(await page.isHidden('#publish-approve')).toBe(true);
    const [refused] = await db.sql`select status, approved_at from public.publish_plans where id = ${planId}`;
    expect(refused).toEqual({ status: 'ready', approved_at: null });

    await page.click('#publish-again');
    await page.waitForFunction((old) => document.getElementById('publish-plan')!.dataset.planId !== old, planId);
    await waitPhase(page, 'review');
    const again = (await page.getAttribute('#publish-plan', 'data-plan-id'))!;
    expect((await db.sql`select status from public.publish_plans where id = ${planId}`)[0]!.status).toBe('discarded');
    planId = again;
    await page.waitForFunction(() => document.querySelectorAll('#publish-items tr[data-hubspot-id]').length === 20);
    expect(await chipCounts(page)).toMatchObject({ ready: EDITS });
  });

  it('approve: a page changed in HubSpot since the plan is a conflict (HubSpot\'s value beside ours), one changed in its window overwritten; progress, then results as the database has them', async () => {
    // Between plan and approve, a person changes the retitled page's title in HubSpot; and the renamed-then-overwritten
    // page gets a person's edit of its name right after the apply's re-read, before our write.
    sys.sim.editInHubSpot(HUBSPOT_PORTAL, 'site_pages', edited.retitled, { htmlTitle: 'Their title' });
    sys.sim.editAfterNextRead(HUBSPOT_PORTAL, 'site_pages', edited.overwritten, { name: 'Their name' });
    sys.sim.setFaults({ slowMs: 800 }); // HubSpot answers slowly: progress to watch
    await page.click('#publish-approve');
    expect(await page.textContent('#publish-confirm-text')).toMatch(/^Write 21 items to HubSpot\? An item changed in HubSpot since this plan is skipped/);
    expect(await page.textContent('#publish-confirm-yes')).toBe('Write 21 items');
    await page.click('#publish-confirm-yes');
    await page.waitForFunction(() => document.getElementById('run-title')!.textContent!.startsWith('Publish · '));
    await page.waitForSelector('#run-status[data-status="running"]');
    await waitPhase(page, 'publishing');
    expect(await page.textContent('#publish-progress')).toMatch(/^Publish run: \d+ of 21 items handled/);
    await shot('progress');
    await waitPhase(page, 'published');
    sys.sim.clearFaults();
    await page.waitForSelector('#run-status[data-status="partially_failed"]');
    await page.waitForSelector('#publish-chips button[data-filter="applied"][data-count]');

    expect(await chipCounts(page)).toEqual({ '': EDITS, applied: EDITS - 2, unchanged: 0, conflict: 1, invalid: 0, failed: 0, overwritten: 1 });
    const db1 = await itemsInDb(planId);
    const rows = await allRows(page);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual(Object.fromEntries(Object.entries(db1).map(([id, r]) => [id, r.outcome])));
    expect(Object.fromEntries(rows.filter((r) => Object.values(edited).includes(r.id)).map((r) => [r.id, r.status]))).toEqual({
      [edited.renamed]: 'applied', [edited.retitled]: 'conflict', [edited.described]: 'applied', [edited.overwritten]: 'overwritten',
    });
    // The conflict: HubSpot's title kept, shown beside ours, as the database recorded it.
    expect(db1[edited.retitled]!.current).toEqual({ htmlTitle: 'Their title' });
    expect(rows.find((r) => r.id === edited.retitled)).toMatchObject({ after: 'Our "new" title', current: 'Their title' });
    expect(await stored(edited.renamed, 'name')).toBe('Renamed, with a comma'); // HubSpot's answer in the copy
    const overwritten = await page.textContent(`#publish-items tr[data-hubspot-id="${edited.overwritten}"] .item-message`);
    const [rev] = await db.sql`select overwritten_revision_id from public.publish_items where plan_id = ${planId} and hubspot_id = ${edited.overwritten}`;
    expect(rev!.overwritten_revision_id).toBeTruthy();
    expect(overwritten).toContain(`revision ${rev!.overwritten_revision_id}`);
    await shot('results');
    await page.click('#publish-chips button[data-filter="conflict"]');
    await page.waitForFunction(() => document.querySelectorAll('#publish-items tr[data-hubspot-id]').length === 1);
    expect((await shownRows(page)).map((r) => r.id)).toEqual([edited.retitled]);
    await shot('conflicts');
    await page.click('#publish-chips button[data-filter=""]');
    await page.waitForSelector('#publish-items[data-filter=""][data-page="1"]');
  });

  it('roll back: the 19 applied pages get their previous values back, as the database says; the audit CSV downloads', async () => {
    expect(await page.textContent('#publish-rollback')).toBe('Roll back 19 items');
    await page.click('#publish-rollback');
    expect(await page.textContent('#publish-confirm-text')).toMatch(/^Write the previous values of 19 items back to HubSpot\?/);
    await page.click('#publish-confirm-yes');
    await page.waitForFunction(() => document.getElementById('run-title')!.textContent!.startsWith('Restore · '));
    await waitPhase(page, 'restored');
    await page.waitForSelector('#publish-chips button[data-filter="restored"][data-count]');
    expect(await chipCounts(page)).toEqual({ '': EDITS, restored: EDITS - 2, conflict: 0, invalid: 0, failed: 0 });
    const db2 = await itemsInDb(planId);
    const rows = await allRows(page);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual(Object.fromEntries(Object.entries(db2).map(([id, r]) => [id, r.restore_outcome ?? 'none'])));
    expect(db2[edited.renamed]!.restore_outcome).toBe('restored');
    expect(db2[edited.described]!.restore_outcome).toBe('restored');
    const sheet = spreadsheet(exported);
    expect(await stored(edited.renamed, 'name')).toBe(sheet.get(edited.renamed, 'name'));
    expect(await stored(edited.described, 'metaDescription')).toBe(sheet.get(edited.described, 'metaDescription'));
    expect(await page.isHidden('#publish-rollback')).toBe(true);
    await shot('rollback');

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#publish-audit')]);
    expect(download.suggestedFilename()).toBe(`publish-audit-${planId.slice(0, 8)}.csv`);
    const audit = await readFile((await download.path())!, 'utf8');
    for (const id of Object.values(edited)) expect(audit).toContain(id);
    expect(await page.$$eval('#runs-list .run-name', (els) => els.slice(0, 4).map((e) => e.textContent!.split(' · ')[0]))).toEqual(['Restore', 'Publish', 'Plan', 'Plan']);
  });

  it('an app\'s pending edit planned from the page, then discarded; a phone\'s width; a stale file refused with its rows; the Operator view lists the publish jobs by kind', async () => {
    await page.click('#publish-pending');
    await page.waitForSelector('#publish-message.error');
    expect(await page.textContent('#publish-message')).toBe('There are no pending edits to plan.NO_PENDING_EDITS');

    // The app writes an edit through supabase-js (here: as the user, under RLS), based on the stored update time.
    const id = spreadsheet(exported).ids[4]!;
    const [item] = await db.sql`select hubspot_updated_at from public.hubspot_content where portal_id = ${portalId} and hubspot_id = ${id}`;
    await addEdit(db.sql, { portalId, userId }, 'site_pages', id, (item!.hubspot_updated_at as Date).toISOString(), { slug: 'from-the-app' });
    await page.click('#publish-pending');
    await page.waitForFunction((old) => document.getElementById('publish-plan')!.dataset.planId !== old, planId);
    await waitPhase(page, 'review');
    await page.waitForFunction(() => document.querySelectorAll('#publish-items tr[data-hubspot-id]').length === 1);
    expect(await shownRows(page)).toEqual([{ id, field: 'slug', before: spreadsheet(exported).get(id, 'slug'), after: 'from-the-app', current: null, status: 'ready' }]);

    // At 390 px (a phone) nothing of the view sticks out of the page: the diff scrolls inside its card.
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    try {
      const p = await phone.newPage();
      await p.goto(web.url);
      await p.waitForSelector(`#publish-plan[data-plan-id="${await page.getAttribute('#publish-plan', 'data-plan-id')}"] #publish-items tr[data-hubspot-id]`);
      expect(await p.evaluate(() => document.documentElement.scrollWidth)).toBe(390);
      await p.screenshot({ path: path.join(SCREENSHOT_DIR, 'mobile.png'), fullPage: true });
    } finally {
      await phone.close();
    }

    // Discarded: its edit is pending again.
    const pendingPlan = (await page.getAttribute('#publish-plan', 'data-plan-id'))!;
    await page.click('#publish-discard');
    await waitPhase(page, 'discarded');
    expect(await page.textContent('#publish-message')).toBe('Plan discarded: its edits are pending again.');
    expect((await db.sql`select status from public.publish_plans where id = ${pendingPlan}`)[0]!.status).toBe('discarded');
    expect((await db.sql`select status from public.content_edits where portal_id = ${portalId} and hubspot_id = ${id}`).map((r) => r.status)).toEqual(['pending']);

    // The first export again: the pages written since have moved on, so the file is stale and nothing is stored.
    const sheet = spreadsheet(exported);
    sheet.set(edited.renamed, 'name', 'Once more');
    sheet.set(edited.described, 'metaDescription', 'Once more');
    await page.setInputFiles('#publish-file', { name: 'site_pages-0a1b2c3d.csv', mimeType: 'text/csv', buffer: Buffer.from(sheet.save()) });
    await page.click('#publish-upload');
    await page.waitForFunction(() => document.getElementById('publish-message')!.textContent!.includes('INVALID_CSV'));
    expect(await page.textContent('#publish-message')).toMatch(/^The file was not imported, nothing was stored:/);
    const lines = await page.$$eval('#publish-message li', (lis) => lis.map((li) => li.textContent!));
    // Every page written since is stale (19 restored, one overwritten): ten listed, the rest counted.
    expect(lines).toHaveLength(11);
    expect(lines.slice(0, 10).every((l) => /^Row \d+, hubspot_updated_at: the item changed since this file was exported/.test(l)), lines.join('\n')).toBe(true);
    expect(lines[10]).toMatch(/^… and \d+ more problems?$/);

    // The Operator view: the plan, publish and restore jobs by their kind.
    await page.click('#tab-operator');
    await page.selectOption('#ops-filter-status', '');
    for (const kind of ['plan', 'publish', 'restore']) {
      await page.selectOption('#ops-filter-kind', kind);
      await page.waitForFunction((k) => {
        const rows = [...document.querySelectorAll('#ops-jobs tr[data-job-id]')];
        return rows.length > 0 && rows.every((tr) => tr.children[3]!.textContent === k);
      }, kind);
    }
    await page.click('#tab-sync');
    expect(consoleErrors).toEqual([]);
  });
});
