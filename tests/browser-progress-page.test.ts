// The progress page in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core through its executable path; no browser is downloaded),
// against the system `npm start -- --serve` runs: Postgres, the HubSpot
// simulator, both functions under Deno behind the local gateway, cron played
// by a loop, and the page server. It walks the page through its states,
// empty, running (with an export waiting for the fetch), completed, exported,
// changes only (the overview's counts are the stored ones, as the database
// counts them, not a changes-only job's progress), the Operator tab (its
// computed style, for a user who is not an operator and for one who is),
// stopped, failed (retried from the Operator view), scheduled, disconnected, and
// a 390 px phone, and in each checks that the run header, the runs list, the
// sync summary and the operator view agree within one refresh, and that the
// requests chart never shows more than HubSpot (the simulator) received. Screenshots of
// each state go to test-artifacts/browser/ (not committed; docs/progress-page.png
// is copied from running.png by hand). Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportHeader } from '../functions/worker/export-columns.ts';
import { SMALL_PORTAL_SIZES } from '../hubspot-sim/server.ts';
import { parseCsv } from '../scripts/chaos/checks.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { useTestDatabase } from './support/database.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
export const SCREENSHOT_DIR = path.join(PROJECT_ROOT, 'test-artifacts/browser');
const HUBSPOT_PORTAL = 24_000_001;
const DEMO_TOKEN = 'pat-demo-browser-test';
const FINISHED = ['completed', 'partially_failed', 'failed', 'stopped'];

if (!CHROMIUM) {
  console.log('browser test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');
}

/** What each view of the page says, read in one go (the page renders all views from one refresh). */
interface Snapshot {
  refreshes: number;
  header: string | null; // the run card's status (null: no run open)
  headerRunId: string | null;
  listed: Record<string, string>; // run id -> status in the runs list
  rowsRunning: number; // the open run's types shown running
  summary: string; // the portal's sync summary line
  lastStatus: string | null; // the status the summary gives the last sync
  ops: { unfinished: number; pending: number; running: number; portalRunning: number } | null;
}

function snapshot(page: Page): Promise<Snapshot> {
  return page.evaluate(() => {
    const card = document.getElementById('run-card')!;
    const tile = (k: string) => Number(document.querySelector<HTMLElement>(`#ops-tiles [data-key="${k}"]`)?.dataset.value ?? NaN);
    const listed: Record<string, string> = {};
    for (const li of document.querySelectorAll<HTMLElement>('#runs-list li')) listed[li.dataset.runId!] = li.dataset.status!;
    const portalRow = [...document.querySelectorAll<HTMLElement>('#ops-portals tr[data-portal-id]')];
    const hasOps = !document.getElementById('tabs')!.hidden;
    return {
      refreshes: Number(document.body.dataset.refreshes ?? 0),
      header: card.hidden ? null : document.getElementById('run-status')!.dataset.status ?? null,
      headerRunId: document.querySelector<HTMLElement>('#runs-list li.active')?.dataset.runId ?? null,
      listed,
      rowsRunning: card.hidden ? 0 : document.querySelectorAll('#jobs .type-row[data-status="running"]').length,
      summary: document.getElementById('sync-summary')!.textContent ?? '',
      lastStatus: document.getElementById('sync-summary')!.dataset.lastStatus ?? null,
      ops: hasOps
        ? { unfinished: tile('unfinished-runs'), pending: tile('pending'), running: tile('running'),
            portalRunning: portalRow.reduce((n, tr) => n + Number(tr.children[1]!.textContent), 0) }
        : null,
    };
  });
}

/** Contradictions between the views of one snapshot (one user, one portal: the operator's totals are this user's). */
function contradictions(s: Snapshot): string[] {
  const out: string[] = [];
  const unfinishedListed = Object.values(s.listed).filter((st) => !FINISHED.includes(st)).length;
  if (s.header !== null && s.headerRunId !== null && s.listed[s.headerRunId] !== s.header) out.push(`header ${s.header} vs list ${s.listed[s.headerRunId]}`);
  if (s.header !== null && FINISHED.includes(s.header) && s.rowsRunning > 0) out.push(`header ${s.header} with ${s.rowsRunning} types running`);
  // The sync summary: no sync running when every listed run has ended, and a failed last sync says so.
  if (unfinishedListed === 0 && /a sync is running/.test(s.summary)) out.push(`summary "${s.summary}" with every run ended`);
  if (s.lastStatus && s.lastStatus !== 'completed' && !/failed|errors|stopped/i.test(s.summary)) out.push(`summary "${s.summary}" hides a ${s.lastStatus} last sync`);
  if (s.ops) {
    if (s.ops.unfinished !== unfinishedListed) out.push(`operator: ${s.ops.unfinished} unfinished runs, list: ${unfinishedListed}`);
    if (s.ops.running !== s.ops.portalRunning) out.push(`operator: ${s.ops.running} running, per portal ${s.ops.portalRunning}`);
    if (unfinishedListed === 0 && s.ops.running + s.ops.pending > 0) out.push(`operator: ${s.ops.running} running, ${s.ops.pending} pending after every run ended`);
    if (unfinishedListed === 1 && s.header !== null && !FINISHED.includes(s.header) && s.ops.running !== s.rowsRunning) {
      out.push(`operator: ${s.ops.running} running, header run: ${s.rowsRunning}`);
    }
  }
  return out;
}

/** The views agree now, or at the latest after the next refresh. */
async function expectConsistent(page: Page): Promise<Snapshot> {
  const first = await snapshot(page);
  if (contradictions(first).length === 0) return first;
  await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n, first.refreshes);
  const next = await snapshot(page);
  expect(contradictions(next), JSON.stringify({ first: contradictions(first), next })).toEqual([]);
  return next;
}

const waitForStatus = (page: Page, statuses: string[], timeout = 60_000) =>
  page.waitForFunction((ss) => ss.includes(document.getElementById('run-status')!.dataset.status ?? ''), statuses, { timeout });

describe.skipIf(!CHROMIUM)('progress page in headless Chromium', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let web: WebServer;
  let browser: Browser;
  let desktop: BrowserContext;
  let page: Page;
  let cronOn = true;
  let cron: Promise<void>;
  const consoleErrors: string[] = [];
  const dialogs: string[] = [];
  let answer = true;

  const shot = async (p: Page, name: string) => {
    await p.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
  };
  const watch = (p: Page) => {
    p.on('console', (m) => {
      if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) consoleErrors.push(m.text()); // 4xx answers are the page's to explain
    });
    p.on('pageerror', (e) => consoleErrors.push(e.message));
    // Stop, Delete schedule and Disconnect ask first (confirm): each question recorded, answered as `answer` says.
    p.on('dialog', (d) => {
      dialogs.push(d.message());
      void (answer ? d.accept() : d.dismiss());
    });
  };

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    sys = await startLocalSystem(db.url, { sim: { rateLimit: { maxPer10s: 190 } }, env: { WORKER_LANES: '1' } }); // lanes as npm start runs it
    sys.sim.addPortal({ portalId: HUBSPOT_PORTAL, token: DEMO_TOKEN, sizes: SMALL_PORTAL_SIZES });
    const userId = crypto.randomUUID();
    await db.sql`insert into auth.users (id, email, aud, role, raw_app_meta_data)
      values (${userId}, 'demo@example.test', 'authenticated', 'authenticated', '{"queue_operator": true}')`;
    const jwt = await sys.keys.signUserToken(userId, { expiresInSeconds: 3600 });
    web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: jwt, demoPortal: { name: 'Demo portal' } });
    // Cron, played here as npm start does.
    cron = (async () => {
      while (cronOn) {
        await sys.invokeWorker().catch(() => {});
        await sleep(300);
      }
    })();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    desktop = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
    page = await desktop.newPage();
    watch(page);
  }, 180_000);

  afterAll(async () => {
    cronOn = false;
    await browser?.close();
    await cron?.catch(() => {});
    await web?.close();
    await sys?.stop();
  }, 60_000);

  it('empty: a rejected token in the user\'s words, then the portal\'s content types before any sync', async () => {
    await page.goto(web.url);
    await page.waitForSelector('#app:not([hidden])');
    await page.waitForFunction(() => (document.getElementById('connect-box') as HTMLDetailsElement).open); // no portal yet: the form is open
    await page.fill('#connect-token', 'pat-not-a-real-token');
    await page.click('#connect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.className === 'error');
    const rejected = await page.textContent('#message');
    expect(rejected).toContain('HUBSPOT_TOKEN_REJECTED'); // the code, small, for support
    expect(rejected).toMatch(/private app token/);
    expect(rejected).not.toMatch(/OAuth|reconnect the app/i);

    await page.fill('#connect-token', DEMO_TOKEN);
    await page.click('#connect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Connected'));
    expect(await page.$eval('#portal-select', (s) => (s as HTMLSelectElement).selectedOptions[0]!.textContent)).toBe(`Demo portal (HubSpot ${HUBSPOT_PORTAL})`);
    await page.waitForFunction(() => document.querySelectorAll('#overview .type-row[data-status="never"]').length === 8);
    expect(await page.$$eval('#overview .type-row .label', (els) => els.map((e) => e.textContent))).toContain('Site pages');
    await page.waitForSelector('#runs-empty:not([hidden])');
    await page.waitForSelector('#tabs:not([hidden])'); // an operator: the Operator tab is there
    const s = await expectConsistent(page);
    expect(s.header).toBeNull();
    expect(s.ops).toMatchObject({ unfinished: 0, running: 0 });
    await shot(page, 'empty');
  });

  it('running: the header, the rows, the runs list and the operator view agree; an export waits for the fetch', async () => {
    sys.sim.setFaults({ slowMs: 250 }); // each HubSpot page 250 ms late: progress to watch
    // The chart counts whole 10-s windows: start in a fresh one, so the connect's requests before it are not in the run's.
    await sleep(10_000 - (Date.now() % 10_000) + 50);
    const sentBefore = sys.sim.stats().requests;
    await page.click('#fetch-btn');
    await waitForStatus(page, ['running']);
    const fetchRunId = (await snapshot(page)).headerRunId!;
    expect(await page.textContent('#message')).toMatch(/^Fetch started for 8 content types/);
    // A rate on a running row (from what the page saw, or the job's average) and an elapsed time.
    await page.waitForFunction(() => [...document.querySelectorAll('#jobs .type-row[data-status="running"] .rate')].some((e) => e.textContent!.endsWith('/s')));
    expect(await page.textContent('#run-title')).toMatch(/^Fetch · today /);
    expect(await page.textContent('#run-elapsed')).toMatch(/^\d+ s$/);
    let checks = 0;
    while (checks < 3) {
      const s = await expectConsistent(page);
      if (s.header === 'running') checks++;
      else break;
    }
    await page.waitForSelector('#chart-throughput path.chart-line');
    await shot(page, 'running');
    // HubSpot slower from here: the fetch is surely still in flight when the export below is created (the
    // small portal's blog posts alone took about 4 s at 250 ms a page: some runs ended before it, the export
    // then had nothing to wait for).
    sys.sim.setFaults({ slowMs: 1500 });
    // The requests chart, sampled while the run goes: never more than HubSpot really received since the click.
    const chartSamples: { total: number; max: number; real: number }[] = [];
    const sampleChart = async () => {
      const got = await page.$eval('#chart-budget', (e) => ({ total: Number((e as HTMLElement).dataset.total ?? 0), max: Number((e as HTMLElement).dataset.max ?? 0) }));
      chartSamples.push({ ...got, real: sys.sim.stats().requests - sentBefore });
    };
    await sampleChart();
    await page.click('#tab-operator');
    await page.waitForSelector('#ops-invocations table');
    await expectConsistent(page);
    await shot(page, 'operator');
    await page.click('#tab-sync');

    // An export now: its types wait for the fetch's jobs; the page says so.
    await sampleChart();
    await page.click('#export-btn');
    await page.waitForFunction(() => document.getElementById('run-title')!.textContent!.startsWith('Export'));
    const exportRunId = (await snapshot(page)).headerRunId!;
    expect(exportRunId).not.toBe(fetchRunId);
    const waiting = await page.$$eval('#jobs .type-row[data-status="waiting"] .status', (els) => els.map((e) => e.textContent));
    expect(waiting.length).toBeGreaterThan(0);
    expect(waiting[0]).toBe('Export waiting for the fetch');
    await expectConsistent(page);
    await shot(page, 'waiting');
    sys.sim.clearFaults();

    // Back to the fetch, to its end: "started" goes, every row completed at its total.
    await page.click(`#runs-list li[data-run-id="${fetchRunId}"]`);
    for (let i = 0; i < 20 && (await snapshot(page)).header !== 'completed'; i++) {
      await sampleChart();
      await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n, (await snapshot(page)).refreshes);
    }
    await waitForStatus(page, ['completed']);
    await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n, (await snapshot(page)).refreshes);
    await sampleChart();
    for (const c of chartSamples) {
      expect(c.total, JSON.stringify(chartSamples)).toBeLessThanOrEqual(c.real);
      expect(c.max).toBeLessThanOrEqual(Math.min(c.total, 190));
    }
    expect(chartSamples[chartSamples.length - 1]!.total).toBeGreaterThan(0);
    expect(await page.textContent('#budget-text')).toMatch(/requests? to HubSpot for this portal during this sync/);
    // "Requests during this sync" is the budget's own count over the run as the page spans it (first claim to end).
    const [span] = await db.sql`select least(r.started_at, min(j.started_at)) as from_at, r.finished_at as to_at, p.hubspot_portal_id
      from public.runs r join public.jobs j on j.run_id = r.id join public.portals p on p.id = r.portal_id where r.id = ${fetchRunId}
      group by r.started_at, r.finished_at, p.hubspot_portal_id`;
    const [counted] = await db.sql`select coalesce(sum(requests), 0)::int as n from private.hubspot_request_counts
      where hubspot_portal_id = ${span!.hubspot_portal_id} and window_start + interval '10 seconds' > ${span!.from_at} and window_start <= ${span!.to_at}`;
    expect(chartSamples[chartSamples.length - 1]!.total).toBe(counted!.n);
    // Both charts span the run as its header says: "0 s" to the time it took.
    const took = await page.textContent('#run-elapsed');
    for (const chart of ['#chart-throughput', '#chart-budget']) {
      const axis = await page.$$eval(`${chart} svg text.chart-axis`, (ts) => ts.map((t) => t.textContent));
      expect(axis.slice(-2), chart).toEqual(['0 s', took]);
    }
    await page.waitForFunction(() => !/started/.test(document.getElementById('message')!.textContent!));
    const rows = await page.$$eval('#jobs .type-row:not(.head)', (rs) => rs.map((r) => ({ status: (r as HTMLElement).dataset.status, count: r.querySelector('.count')!.textContent!, eta: r.querySelector('.eta')!.textContent, rate: r.querySelector('.rate')!.textContent })));
    expect(rows.map((r) => r.status)).toEqual(CONTENT_TYPES.map(() => 'completed'));
    for (const r of rows) {
      const [done, total] = r.count.split(' / ').map((n) => Number(n.replace(/\D/g, '')));
      expect(done).toBe(total);
      expect(r.eta).toBe('done');
      expect(r.rate).toMatch(/\/s$/); // small portal or not, a finished type has its average
    }
    await expectConsistent(page);
    expect(await page.textContent('#run-title')).toMatch(/· full$/);
    await shot(page, 'completed');
  });

  it('exported: the export completes after the fetch, and a CSV downloads with every row', async () => {
    await page.click('#runs-list li:first-child');
    await page.waitForFunction(() => document.getElementById('run-title')!.textContent!.startsWith('Export'));
    await waitForStatus(page, ['completed'], 90_000);
    await page.waitForSelector('#jobs button.download[data-type="blog_posts"]');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#jobs button.download[data-type="blog_posts"]')]);
    const file = path.join(SCREENSHOT_DIR, 'blog_posts.csv');
    await download.saveAs(file);
    const [header, ...records] = parseCsv(await readFile(file, 'utf8'));
    expect(header).toEqual(exportHeader('blog_posts'));
    expect(records.length).toBe(SMALL_PORTAL_SIZES.blog_posts);
    expect(download.suggestedFilename()).toMatch(/^blog_posts-[0-9a-f]{8}\.csv$/);
    // The overview: every type fetched, with its item count and its latest export.
    await page.waitForFunction(() => document.querySelectorAll('#overview .type-row[data-status="completed"]').length === 8);
    expect(await page.textContent('#overview .type-row[data-type="blog_posts"] .count')).toBe(`${SMALL_PORTAL_SIZES.blog_posts.toLocaleString('en-US')} items`);
    await page.waitForSelector('#overview .type-row[data-type="blog_posts"] button.download');
    // The last sync (the full fetch): everything new, no schedule yet.
    const total = Object.values(SMALL_PORTAL_SIZES).reduce((a, b) => a + b, 0);
    await page.waitForFunction((n) => document.getElementById('sync-changes')?.textContent === `${n.toLocaleString()} checked, ${n.toLocaleString()} changed (${n.toLocaleString()} new, 0 updated, 0 deleted)`, total);
    expect(await page.textContent('#sync-summary')).toContain('(full)');
    expect(await page.textContent('#sync-summary')).toContain('no sync schedule');
    const s = await expectConsistent(page);
    expect(s.ops).toMatchObject({ unfinished: 0, running: 0, pending: 0 });
    await shot(page, 'exported');
  });

  it('changes only: "Sync changes now" on an unchanged portal leaves every count as stored, and each is the database\'s', async () => {
    // What the overview says each type holds, and what the database holds (live items, tombstones not counted).
    const shown = () => page.$$eval('#overview .type-row', (rows) => Object.fromEntries(rows.map((r) => [(r as HTMLElement).dataset.type!, r.querySelector('.count')!.textContent!])));
    const stored = async () => {
      const rows = await db.sql<{ content_type: string; n: number }[]>`select content_type, count(*)::int as n from public.hubspot_content
        where deleted_at is null group by content_type`;
      const n = (t: string) => rows.find((r) => r.content_type === t)?.n ?? 0;
      return Object.fromEntries(CONTENT_TYPES.map((t) => [t, `${n(t).toLocaleString('en-US')} ${n(t) === 1 ? 'item' : 'items'}`]));
    };
    const syncChanges = async () => {
      const runsBefore = await page.$$eval('#runs-list li', (lis) => lis.length);
      await page.click('#changes-btn');
      await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Sync of changes started'));
      await page.waitForFunction((n) => document.querySelectorAll('#runs-list li').length > n, runsBefore);
      expect(await page.textContent('#run-title')).toMatch(/· changes only$/);
      await waitForStatus(page, ['completed']);
      // The counts are read when the page sees the run end in its runs list: a refresh begun after this
      // moment (the second to end from now; the first may have read the list before the run ended) did.
      await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n + 1, (await snapshot(page)).refreshes);
    };
    const before = await shown();
    expect(before).toEqual(await stored());
    expect(before.blog_posts).toBe(`${SMALL_PORTAL_SIZES.blog_posts.toLocaleString('en-US')} items`);

    await syncChanges();
    expect(await shown()).toEqual(before);
    expect(await shown()).toEqual(await stored());
    await expectConsistent(page);
    await page.locator('#overview-card').screenshot({ path: path.join(SCREENSHOT_DIR, 'overview-after-changes-only.png') });
    await shot(page, 'changes-only');

    // Two pages deleted at HubSpot: the next changes-only sync stores them as tombstones, and the overview,
    // read again when that run ends, counts what is stored (two fewer site pages, the rest as they were).
    sys.sim.deleteItems(HUBSPOT_PORTAL, 'site_pages', 2);
    await syncChanges();
    const after = await shown();
    expect(after).toEqual(await stored());
    expect(after).toEqual({ ...before, site_pages: `${(SMALL_PORTAL_SIZES.site_pages - 2).toLocaleString('en-US')} items` });
  });

  it('operator tab: a user who is not an operator does not see it (computed style), an operator does', async () => {
    // The styles as rendered, not the attribute: `hidden` alone lost to the nav's own `display: flex`.
    const display = (p: Page) => p.evaluate(() => ({
      tabs: getComputedStyle(document.getElementById('tabs')!).display,
      operatorTabRendered: document.getElementById('tab-operator')!.checkVisibility(),
    }));
    // The operator (this file's demo user).
    expect(await display(page)).toEqual({ tabs: 'flex', operatorTabRendered: true });
    expect(await page.isVisible('#tab-operator')).toBe(true);
    await page.click('#tab-operator');
    await page.waitForSelector('#ops-invocations table');
    await shot(page, 'operator-as-operator');
    await page.click('#tab-sync');

    // A user who is not an operator: the stats answer 403, and the tab takes no room on the page.
    const userId = crypto.randomUUID();
    await db.sql`insert into auth.users (id, email, aud, role) values (${userId}, 'user@example.test', 'authenticated', 'authenticated')`;
    const userWeb = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: await sys.keys.signUserToken(userId, { expiresInSeconds: 3600 }) });
    const userPage = await desktop.newPage();
    try {
      await userPage.goto(userWeb.url);
      await userPage.waitForSelector('#app:not([hidden])');
      await userPage.waitForFunction(() => Number(document.body.dataset.refreshes ?? 0) >= 1);
      expect(await display(userPage)).toEqual({ tabs: 'none', operatorTabRendered: false });
      expect(await userPage.isVisible('#tab-operator')).toBe(false);
      expect(await userPage.evaluate(() => document.getElementById('view-operator')!.getBoundingClientRect().height)).toBe(0);
      await shot(userPage, 'operator-as-user');
    } finally {
      await userPage.close();
      await userWeb.close();
    }
  });

  it('stopped: a slow fetch stopped from the page reads stopped everywhere; a type it finished before shows its new count at once', async () => {
    // An author deleted at HubSpot: the full fetch marks it deleted when its type's job completes, long before the run ends.
    sys.sim.deleteItems(HUBSPOT_PORTAL, 'blog_authors', 1);
    sys.sim.setFaults({ slowMs: 1500 });
    await page.click('#fetch-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Fetch started'));
    await waitForStatus(page, ['queued', 'running']);
    await page.waitForSelector('#jobs .type-row[data-type="blog_authors"][data-status="completed"]', { timeout: 30_000 });
    await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n + 1, (await snapshot(page)).refreshes);
    expect(await page.textContent('#run-status')).not.toBe('Completed'); // the run goes on (its blog posts alone take 18 s)
    const [authors] = await db.sql`select count(*)::int as n from public.hubspot_content where content_type = 'blog_authors' and deleted_at is null`;
    expect(authors!.n).toBe(SMALL_PORTAL_SIZES.blog_authors - 1);
    expect(await page.textContent('#overview .type-row[data-type="blog_authors"] .count')).toBe(`${authors!.n} items`);
    answer = false; // asked first: "no" leaves it running
    await page.click('#stop-btn');
    expect(dialogs.pop()).toMatch(/^Stop this sync\?/);
    expect(await page.getAttribute('#run-status', 'data-status')).not.toBe('stopped');
    answer = true;
    await page.click('#stop-btn');
    expect(dialogs.pop()).toMatch(/^Stop this sync\?/);
    await waitForStatus(page, ['stopped'], 30_000);
    sys.sim.clearFaults();
    const s = await expectConsistent(page);
    const [row] = await db.sql`select status, jobs_stopped from public.runs where id = ${s.headerRunId}`;
    expect(row).toMatchObject({ status: 'stopped' });
    expect(row!.jobs_stopped).toBeGreaterThan(0);
    expect(await page.$$eval('#jobs .type-row[data-status="stopped"] .status', (els) => els.map((e) => e.textContent))).not.toContain('Failed');
    expect(await page.isHidden('#stop-btn')).toBe(true);
    await shot(page, 'stopped');
  });

  it('failed: HubSpot refusing the token fails the run, explained without OAuth talk', async () => {
    sys.sim.setFaults({ slowMs: 800 });
    await page.click('#fetch-btn');
    await waitForStatus(page, ['queued', 'running']);
    sys.sim.failNext(500, 401); // every HubSpot request from now on: the token is refused
    await waitForStatus(page, ['failed', 'partially_failed'], 60_000);
    sys.sim.clearFaults();
    await page.waitForSelector('#run-card .job-error'); // once above the rows when every failed type failed alike
    const errors = await page.$$eval('#run-card .job-error', (els) => els.map((e) => e.textContent!));
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) {
      expect(e).toMatch(/private app token/);
      expect(e).not.toMatch(/OAuth/);
    }
    const s = await expectConsistent(page);
    expect(FINISHED).toContain(s.header);
    await page.click('#tab-operator');
    await page.click('#tab-sync');
    await page.waitForFunction(() => (document.getElementById('sync-summary')!.dataset.lastStatus ?? 'completed') !== 'completed');
    expect(await page.textContent('#sync-summary')).toMatch(/failed|errors/i);
    await expectConsistent(page);
    await shot(page, 'failed');

    // HubSpot takes the token again: "Retry failed types" fetches just those types as a new run, which completes.
    const failedRunId = s.headerRunId!;
    const failedTypes = await page.$$eval('#jobs .type-row[data-status="failed"]', (rs) => rs.map((r) => (r as HTMLElement).dataset.type).sort());
    expect(failedTypes.length).toBeGreaterThan(0);
    expect(await page.isVisible('#retry-failed-btn')).toBe(true);
    await page.click('#retry-failed-btn');
    await page.waitForFunction(() => /^Trying \d+ failed content types? again\.$/.test(document.getElementById('message')!.textContent ?? ''));
    await page.waitForFunction((id) => document.querySelector<HTMLElement>('#runs-list li.active')?.dataset.runId !== id, failedRunId);
    await waitForStatus(page, ['completed'], 60_000);
    expect(await page.$$eval('#jobs .type-row:not(.head)', (rs) => rs.map((r) => (r as HTMLElement).dataset.type).sort())).toEqual(failedTypes);
    expect(await page.isHidden('#retry-failed-btn')).toBe(true);
    // Back to the failed run, for the operator.
    await page.click(`#runs-list li[data-run-id="${failedRunId}"]`);
    await waitForStatus(page, ['failed', 'partially_failed']);
  });

  it('operator: the failure with its portal and run, retried from its details; a portal paused and resumed', async () => {
    const failedRunId = (await snapshot(page)).headerRunId!;
    await page.click('#tab-operator');
    await page.waitForSelector('#ops-jobs tr[data-status="failed"]');
    const row = await page.$eval('#ops-jobs tr[data-status="failed"]', (tr) => tr.textContent!);
    expect(row).toContain('Demo portal');
    expect(row).toContain(failedRunId.slice(0, 8));
    await page.click('#ops-jobs tr[data-status="failed"]');
    await page.waitForSelector('#ops-job:not([hidden]) #ops-retry');
    await shot(page, 'operator');
    // The simulator accepts the token again: the retried job completes and its run settles again.
    const jobId = await page.$eval('#ops-jobs tr.active', (tr) => (tr as HTMLElement).dataset.jobId!);
    await page.click('#ops-retry');
    // Said in the Operator view, where the action was taken (the Sync view's line is hidden while it is open).
    await page.waitForFunction((id) => document.getElementById('ops-message')!.textContent === `Job ${id} is queued again.`, jobId);
    expect(await page.evaluate(() => document.getElementById('ops-message')!.checkVisibility())).toBe(true);
    await expect.poll(async () => (await db.sql`select status from public.jobs where id = ${jobId}`)[0]!.status, { timeout: 60_000 }).toBe('completed');
    // Pause and resume the portal from its row.
    await page.click('#ops-portal-table button.pause');
    await page.waitForSelector('#ops-portal-table button.resume');
    const [paused] = await db.sql`select count(*)::int as n from private.portal_pauses`;
    expect(paused!.n).toBe(1);
    await page.click('#ops-portal-table button.resume');
    await page.waitForSelector('#ops-portal-table button.pause');
    await expectConsistent(page);
    await page.click('#tab-sync');
  });

  it('scheduled: a schedule set on the page, its next sync and reconcile shown; a quiet check shown without a run, a change as a scheduled run in the history', async () => {
    const scheduledRuns = async () => (await db.sql`select count(*)::int as n from public.runs where trigger = 'schedule'`)[0]!.n as number;
    await page.fill('#schedule-incremental', '1');
    await page.click('#schedule-save');
    await page.waitForSelector('#schedule-card[data-state="active"] #schedule-next');
    expect(await page.textContent('#schedule-text')).toBe('changes every 1 min · full every 1 day');
    expect(await page.textContent('#schedule-reconcile')).toMatch(/^in \d+ h/); // the schedule's own reconcile time, within a day
    // A new schedule is due at once: the worker (cron's loop here) probes it; nothing changed at HubSpot,
    // so the check leaves no run, and the summary says when it looked (docs/decisions/0058).
    await page.waitForSelector('#sync-checked', { timeout: 60_000 });
    expect(await page.textContent('#sync-summary')).toContain(', none since');
    expect(await scheduledRuns()).toBe(0);
    // A change at HubSpot, and the schedule due again: the probe makes a scheduled run that fetches it.
    sys.sim.touchItems(HUBSPOT_PORTAL, 'blog_posts', 2);
    await db.sql`update public.sync_schedules set next_incremental_at = now() - interval '1 second'`;
    await page.waitForSelector('#runs-list li[data-trigger="schedule"]', { timeout: 60_000 });
    expect(await page.textContent('#runs-list li[data-trigger="schedule"] .run-name')).toMatch(/changes only$/);
    expect(await page.textContent('#runs-list li[data-trigger="schedule"] .run-meta')).toMatch(/^scheduled · /);
    await page.waitForFunction(() => ['completed', 'failed', 'partially_failed'].includes(document.querySelector<HTMLElement>('#runs-list li[data-trigger="schedule"]')!.dataset.status!), undefined, { timeout: 60_000 });
    await page.click('#runs-list li[data-trigger="schedule"]');
    await page.waitForSelector('#run-card:not([hidden]) #jobs .type-row[data-type="blog_posts"][data-status="completed"]');
    expect(await scheduledRuns()).toBe(1);
    await page.click('#schedule-pause');
    await page.waitForSelector('#schedule-card[data-state="paused"]');
    expect(await page.textContent('#schedule-message')).toMatch(/^Schedule paused/); // in the schedule's own card
    answer = false; // Delete asks first: "no" keeps the schedule
    await page.click('#schedule-delete');
    expect(dialogs.pop()).toMatch(/^Delete the sync schedule\?/);
    await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n, (await snapshot(page)).refreshes);
    expect(await page.getAttribute('#schedule-card', 'data-state')).toBe('paused');
    answer = true;
    await expectConsistent(page);
    await shot(page, 'scheduled');
  }, 150_000); // its waits (the worker's probe, a scheduled run) are 60 s each at most

  it('disconnected: a portal disconnected elsewhere is marked, and fetching disabled, without a reload', async () => {
    const [p] = await db.sql`select id from public.portals where hubspot_portal_id = ${HUBSPOT_PORTAL}`;
    await db.sql`select public.disconnect_portal(${p!.id}, 'HubSpot access was removed (app uninstalled)')`;
    await page.waitForFunction(() => (document.getElementById('fetch-btn') as HTMLButtonElement).disabled, undefined, { timeout: 20_000 });
    expect(await page.isDisabled('#changes-btn')).toBe(true);
    expect(await page.$eval('#portal-select', (s) => (s as HTMLSelectElement).selectedOptions[0]!.textContent)).toMatch(/disconnected: reconnect it$/);
    await expectConsistent(page);
    await shot(page, 'disconnected');
  });

  it('operator: retrying a job of the disconnected portal says why, in the Operator view', async () => {
    await page.click('#tab-operator');
    await page.selectOption('#ops-filter-status', 'failed');
    await page.waitForSelector('#ops-jobs tr[data-status="failed"]');
    await page.click('#ops-jobs tr[data-status="failed"]');
    await page.click('#ops-retry');
    await page.waitForFunction(() => document.getElementById('ops-message')!.className === 'error');
    expect(await page.textContent('#ops-message')).toBe('The portal is disconnected: it must be reconnected before its jobs are retried. Nothing was changed.HUBSPOT_DISCONNECTED');
    expect(await page.evaluate(() => document.getElementById('ops-message')!.checkVisibility())).toBe(true);
    await shot(page, 'operator-retry-disconnected');
    await page.click('#tab-sync');
    expect(await page.evaluate(() => document.getElementById('ops-message')!.checkVisibility())).toBe(false);
  });

  it('disconnect on the page: asked first, then the portal is disconnected, its tokens gone, its content kept', async () => {
    const other = 24_000_011;
    sys.sim.addPortal({ portalId: other, token: 'pat-second-portal', sizes: { blog_tags: 5 } });
    await page.evaluate(() => ((document.getElementById('connect-box') as HTMLDetailsElement).open = true));
    await page.fill('#connect-name', 'Second portal');
    await page.fill('#connect-token', 'pat-second-portal');
    await page.click('#connect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Connected “Second portal”'));
    await page.waitForFunction(() => !(document.getElementById('disconnect-btn') as HTMLButtonElement).disabled);
    answer = false;
    await page.click('#disconnect-btn');
    expect(dialogs.pop()).toMatch(/^Disconnect “Second portal” from HubSpot\?/);
    const [kept] = await db.sql`select disconnected_at from public.portals where hubspot_portal_id = ${other}`;
    expect(kept!.disconnected_at).toBeNull();
    answer = true;
    await page.click('#disconnect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Disconnected “Second portal” from HubSpot'));
    await page.waitForFunction(() => (document.getElementById('fetch-btn') as HTMLButtonElement).disabled && (document.getElementById('disconnect-btn') as HTMLButtonElement).disabled);
    const [gone] = await db.sql`select p.disconnected_reason, (select count(*)::int from private.portal_credentials c where c.portal_id = p.id) as tokens
      from public.portals p where p.hubspot_portal_id = ${other}`;
    expect(gone).toEqual({ disconnected_reason: 'disconnected by its owner', tokens: 0 });
    // Back to the demo portal for the phone.
    await page.selectOption('#portal-select', { index: 0 });
  });

  it('mobile: at 390 px nothing overflows, in the sync view and the operator view', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    const p = await phone.newPage();
    watch(p);
    try {
      await p.goto(web.url);
      await p.waitForFunction(() => document.querySelectorAll('#runs-list li').length >= 5);
      await p.click('#runs-list li[data-trigger="user"]');
      await p.waitForSelector('#run-card:not([hidden]) #jobs .type-row:not(.head)');
      await expectConsistent(p);
      // The page's width, and what sticks out of 390 px (to say what to fix).
      const overflow = () => p.evaluate(() => {
        const out = [...document.querySelectorAll<HTMLElement>('body *')].filter((e) => e.offsetParent !== null && e.getBoundingClientRect().right > 391)
          .slice(0, 5).map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}: ${Math.round(e.getBoundingClientRect().right)}`);
        const scroll = document.documentElement.scrollWidth;
        return { scroll, width: window.innerWidth, ...(scroll > 390 ? { out } : {}) };
      });
      expect(await overflow()).toEqual({ scroll: 390, width: 390 });
      await shot(p, 'mobile');
      await p.click('#tab-operator');
      await p.waitForSelector('#ops-invocations table');
      await p.waitForSelector('#ops-jobs table');
      expect(await overflow()).toEqual({ scroll: 390, width: 390 });
      // Every operator table fits its card (none scrolls: nothing off-screen), and Pause / Resume is on screen.
      // Queried and measured in one page task: the view redraws its tables every second.
      const tables = await p.evaluate(() => [...document.querySelectorAll('#view-operator .scroll')].map((e) => ({
        in: e.parentElement?.id || e.closest('section')?.querySelector('h2')?.textContent || '?', scroll: e.scrollWidth, width: e.clientWidth,
      })));
      expect(tables.length).toBeGreaterThanOrEqual(5);
      expect(tables.filter((t) => t.scroll > t.width + 1), JSON.stringify(tables)).toEqual([]);
      const pause = await p.$eval('#ops-portal-table button.act', (b) => b.getBoundingClientRect().toJSON());
      expect(pause.right).toBeLessThanOrEqual(390);
      expect(pause.width).toBeGreaterThan(20);
      await shot(p, 'mobile-operator');
    } finally {
      await phone.close();
    }
    expect(consoleErrors).toEqual([]);
  });
});
