// The progress page in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core through its executable path; no browser is downloaded),
// against the system `npm start -- --serve` runs: Postgres, the HubSpot
// simulator, both functions under Deno behind the local gateway, cron played
// by a loop, and the page server. The page connects the demo portal, fetches
// all eight types to completion, stops a second run, exports, and downloads a
// CSV whose header and row count are checked. Screenshots go to
// test-artifacts/browser/ (not committed). Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCsv } from '../scripts/lib/chaos-checks.ts';
import { exportHeader } from '../functions/worker/export-columns.ts';
import { SMALL_PORTAL_SIZES } from '../scripts/hubspot-sim/server.ts';
import { PROJECT_ROOT } from '../scripts/lib/local-postgres.ts';
import { startLocalSystem, type LocalSystem } from '../scripts/lib/local-system.ts';
import { startWebServer, type WebServer } from '../scripts/lib/web-server.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';
import { useTestDatabase } from './support/database.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
export const SCREENSHOT_DIR = path.join(PROJECT_ROOT, 'test-artifacts/browser');
const HUBSPOT_PORTAL = 24_000_001;
const DEMO_TOKEN = 'pat-demo-browser-test';

if (!CHROMIUM) {
  console.log('browser test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');
}


describe.skipIf(!CHROMIUM)('progress page in headless Chromium', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let web: WebServer;
  let browser: Browser;
  let page: Page;
  let cronOn = true;
  let cron: Promise<void>;
  const consoleErrors: string[] = [];

  const shot = async (name: string) => {
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
  };
  const rowStatuses = () => page.$$eval('#jobs tbody tr', (rows) => rows.map((r) => `${(r as HTMLElement).dataset.type}:${(r as HTMLElement).dataset.status}`));

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    sys = await startLocalSystem(db.url, { sim: { rateLimit: { maxPer10s: 190 } }, env: { WORKER_CONCURRENCY: '1' } }); // concurrency as npm start runs it
    sys.sim.addPortal({ portalId: HUBSPOT_PORTAL, token: DEMO_TOKEN, sizes: SMALL_PORTAL_SIZES });
    const userId = crypto.randomUUID();
    await db.sql`insert into auth.users (id, email, aud, role, raw_app_meta_data)
      values (${userId}, 'demo@example.test', 'authenticated', 'authenticated', '{"queue_operator": true}')`;
    const jwt = await sys.keys.signUserToken(userId, { expiresInSeconds: 3600 });
    web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: jwt, demoPortal: { name: 'Demo portal', token: DEMO_TOKEN } });
    // Cron, played here as npm start does.
    cron = (async () => {
      while (cronOn) {
        await sys.invokeWorker().catch(() => {});
        await sleep(300);
      }
    })();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
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

  it('connects the demo portal, fetches all 8 types to completed, stops a second run, exports and downloads a CSV', async () => {
    await page.goto(web.url);
    await page.waitForSelector('#app:not([hidden])');
    // Connect the demo portal (the form is prefilled with the simulator's demo token).
    await page.waitForFunction(() => (document.getElementById('connect-box') as HTMLDetailsElement).open); // no portal yet: the form is open
    await page.click('#connect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent!.startsWith('Connected'));
    expect(await page.$eval('#portal-select', (s) => (s as HTMLSelectElement).selectedOptions[0]!.textContent)).toBe(`Demo portal (HubSpot ${HUBSPOT_PORTAL})`);

    // Fetch: watch progress to the end (HubSpot answers each page 200 ms late, so there is progress to watch).
    sys.sim.setFaults({ slowMs: 200 });
    await page.click('#fetch-btn');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 8);
    const observed = new Set<string>();
    let partial = 0; // rows seen running with 0 < done < total
    let midShot = false;
    for (let i = 0; i < 1500; i++) {
      const rows = await page.$$eval('#jobs tbody tr', (trs) =>
        trs.map((r) => ({ status: (r as HTMLElement).dataset.status!, doneTotal: r.children[3]!.textContent!, rate: r.querySelector('.rate')!.textContent! })));
      for (const r of rows) {
        observed.add(r.status);
        const [done, total] = r.doneTotal.split(' / ').map(Number);
        if (r.status === 'running' && done! > 0 && done! < total!) partial++;
      }
      if (!midShot && rows.some((r) => r.rate.endsWith('/s'))) {
        await shot('1-fetch-in-progress');
        midShot = true;
      }
      if ((await page.textContent('#run-status')) === 'completed') break;
      await page.waitForTimeout(200);
    }
    sys.sim.clearFaults();
    expect(await page.textContent('#run-status')).toBe('completed');
    expect(observed).toContain('running');
    expect(partial).toBeGreaterThan(0);
    expect((await rowStatuses()).sort()).toEqual(CONTENT_TYPES.map((t) => `${t}:completed`).sort());
    const doneTotals = await page.$$eval('#jobs tbody tr td:nth-child(4)', (tds) => tds.map((td) => td.textContent));
    for (const dt of doneTotals) {
      const [done, total] = dt!.split(' / ').map(Number);
      expect(done).toBe(total);
    }
    await shot('2-fetch-completed');

    // A second fetch, slowed down by HubSpot, stopped from the page.
    sys.sim.setFaults({ slowMs: 1500 });
    await page.click('#fetch-btn');
    await page.waitForFunction(() => {
      const s = document.getElementById('run-status')!.textContent;
      return document.getElementById('message')!.textContent!.includes('fetch run started') && (s === 'pending' || s === 'running');
    });
    const secondRunTitle = await page.textContent('#run-title');
    await page.click('#stop-btn');
    await page.waitForFunction(() => document.getElementById('run-status')!.textContent === 'stopped', undefined, { timeout: 30_000 });
    sys.sim.clearFaults();
    const secondRunId = secondRunTitle!.split(' · ')[1]!;
    const [stopped] = await db.sql`select status, jobs_stopped from public.runs where id = ${secondRunId}`;
    expect(stopped!.status).toBe('stopped');
    expect(stopped!.jobs_stopped).toBeGreaterThan(0);
    await shot('3-second-run-stopped');

    // Export everything, then download one type's CSV through the page.
    await page.click('#export-btn');
    await page.waitForFunction(() => document.getElementById('run-title')!.textContent!.startsWith('export'));
    await page.waitForFunction(() => document.getElementById('run-status')!.textContent === 'completed', undefined, { timeout: 120_000 }).catch(async (e) => {
      await shot('export-timeout');
      const jobs = await db.sql`select r.kind as run_kind, r.status as run_status, j.content_type, j.status, j.attempts, j.progress_done, j.progress_total, j.last_error
        from public.jobs j join public.runs r on r.id = j.run_id order by j.id desc limit 20`;
      console.log(JSON.stringify(jobs, null, 1), (sys.functions.output.get('worker') ?? []).slice(-30).join('\n'));
      throw e;
    });
    await page.waitForSelector('button.download[data-type="blog_posts"]');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('button.download[data-type="blog_posts"]')]);
    const file = path.join(SCREENSHOT_DIR, 'blog_posts.csv');
    await download.saveAs(file);
    const [header, ...records] = parseCsv(await readFile(file, 'utf8'));
    const csv = { header: header!, records: records.length };
    expect(csv.header).toEqual(exportHeader('blog_posts'));
    const stored = await db.sql`select count(*)::int as n from public.hubspot_content c join public.portals p on p.id = c.portal_id
      where p.hubspot_portal_id = ${HUBSPOT_PORTAL} and c.content_type = 'blog_posts' and c.deleted_at is null`;
    expect(csv.records).toBe(stored[0]!.n);
    expect(csv.records).toBe(SMALL_PORTAL_SIZES.blog_posts);
    expect(download.suggestedFilename()).toMatch(/^blog_posts-[0-9a-f]{8}\.csv$/);

    // The operator view shows queue_stats; the runs list has all three runs, newest first.
    await page.waitForFunction(() => document.getElementById('stats')!.textContent!.includes('oldest_pending_age_seconds'));
    const runsListed = () => page.$$eval('#runs-list li', (lis) => lis.map((li) => li.textContent!.split(' · ').slice(1, 3).join(' ')));
    await expect.poll(runsListed, { timeout: 15_000 }).toEqual(['export completed', 'fetch stopped', 'fetch completed']);
    await shot('4-export-completed');
    expect(consoleErrors).toEqual([]);
  }, 300_000);
});
