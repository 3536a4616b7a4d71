// HubSpot going away mid-fetch, as a person watching the page sees it, in real
// headless Chromium: the local system as `npm start -- --serve` runs it
// (Realtime, the local cron waking the worker each minute and every 10 s
// while work is due), with HubSpot (the simulator) behind a proxy that refuses
// every connection while it is down. While it is down the page must say, the
// whole time, that HubSpot is not answering and until when it is retried,
// never that a type was given up, and never a time that has passed; when it
// is back, the run completes with every job on its first attempt.
//
// Default: HubSpot down 20 s, the retry policy scaled through its one setting
// (private.job_kinds: give up after 5 min, waits of 2-10 s), so the file takes
// about a minute. OUTAGE_SECONDS=180 runs the 3-minute outage against
// the policy as shipped (30 min, waits of 10 s doubling up to 10 min): opt-in,
// about 6 minutes. Also here, because it needs Realtime and the real wake
// cadence: a schedule saved on the page shows its next time once the due
// check has run, not "due now" until some later event. Screenshots:
// test-artifacts/browser/outage-*.png. Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SMALL_PORTAL_SIZES } from '../hubspot-sim/server.ts';
import { startLocalCron, type LocalCron } from '../local/cron/cron.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { useTestDatabase } from './support/database.ts';
import { startOutageProxy, type OutageProxy } from './support/outage-proxy.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
const SCREENSHOT_DIR = path.join(PROJECT_ROOT, 'test-artifacts/browser');
const HUBSPOT_PORTAL = 24_000_002;
const TOKEN = 'pat-outage-browser-test';
const OUTAGE_SECONDS = Number(process.env.OUTAGE_SECONDS ?? 20);
/** The policy as shipped for a real-length outage; scaled down (give up after 5 min, waits 2-10 s) for the default run. */
const SHIPPED = OUTAGE_SECONDS >= 120;

if (!CHROMIUM) console.log('browser outage test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');

/** What the page says about the run on screen, read in one go. */
interface Said {
  at: number;
  status: string | null;
  header: string;
  reason: string;
  rows: string[];
  notes: string[];
  listed: string;
}

const said = (page: Page): Promise<Said> => page.evaluate(() => ({
  at: Date.now(),
  status: document.getElementById('run-status')!.dataset.status ?? null,
  header: document.getElementById('run-status')!.textContent ?? '',
  reason: document.getElementById('run-reason')?.textContent ?? '',
  rows: [...document.querySelectorAll('#jobs .type-row:not(.head)')].map((r) => `${r.querySelector('.label')!.textContent}: ${r.querySelector('.status')!.textContent}`),
  notes: [...document.querySelectorAll('#run-card .job-error')].map((e) => e.textContent ?? ''),
  listed: document.querySelector('#runs-list li.active .pill')?.textContent ?? '',
}));

/** Every clock time the text shows ("until 02:28", "until 02:28:05 AM") that is already past at `now` (this machine's zone, as the page's). */
function pastTimes(text: string, now: number): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/until (\d\d?):(\d\d)(?::(\d\d))?(?:\s*([AP]M))?/g)) {
    let h = Number(m[1]) % 12;
    if (!m[4]) h = Number(m[1]);
    else if (m[4] === 'PM') h += 12;
    const d = new Date(now);
    d.setHours(h, Number(m[2]), m[3] === undefined ? 59 : Number(m[3]), 999); // a time without seconds lasts its minute
    if (d.getTime() < now - 1_000 && now - d.getTime() < 12 * 3_600_000) out.push(m[0]);
  }
  return out;
}

describe.skipIf(!CHROMIUM)('a HubSpot outage mid-fetch, on the page', () => {
  const db = useTestDatabase();
  let proxy: OutageProxy;
  let sys: LocalSystem;
  let cron: LocalCron;
  let web: WebServer;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    proxy = await startOutageProxy();
    sys = await startLocalSystem(db.url, {
      sim: { rateLimit: { maxPer10s: 190 } }, realtime: { dbUrl: db.directUrl }, env: { WORKER_LANES: '2', HUBSPOT_BASE_URL: proxy.url },
    });
    proxy.target = sys.sim.url;
    sys.sim.addPortal({ portalId: HUBSPOT_PORTAL, token: TOKEN, sizes: SMALL_PORTAL_SIZES });
    if (!SHIPPED) {
      await db.sql`update private.job_kinds set retry_for_seconds = 300, backoff_base_seconds = 2, backoff_max_seconds = 10 where kind = 'fetch'`;
    }
    // The worker is woken as on a hosted project, nothing else: the schema's cron jobs, the orchestrator, itself.
    cron = await startLocalCron(db.directUrl, { projectUrl: sys.functions.url, workerSecret: sys.workerSecret });
    const userId = crypto.randomUUID();
    await db.sql`insert into auth.users (id, email, aud, role, raw_app_meta_data)
      values (${userId}, 'outage@example.test', 'authenticated', 'authenticated', '{"queue_operator": true}')`;
    web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: await sys.keys.signUserToken(userId, { expiresInSeconds: 3600 }), anonKey: sys.keys.anonKey });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    page = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('dialog', (d) => void d.accept());
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await web?.close();
    await cron?.stop();
    await sys?.stop();
    await proxy?.close();
  }, 60_000);

  it('connects with the token hidden, and a schedule saved shows its next time once its due check has run (Realtime on, no run to report it)', async () => {
    await page.goto(web.url);
    await page.waitForSelector('#app:not([hidden])');
    await page.waitForFunction(() => document.getElementById('connection')?.textContent?.endsWith('live (realtime)') || (document.getElementById('connect-box') as HTMLDetailsElement).open);
    expect(await page.getAttribute('#connect-token', 'type')).toBe('password');
    await page.fill('#connect-name', 'Outage portal');
    await page.fill('#connect-token', TOKEN);
    await page.click('#connect-token-show');
    expect(await page.getAttribute('#connect-token', 'type')).toBe('text');
    expect(await page.getAttribute('#connect-token-show', 'aria-pressed')).toBe('true');
    await page.click('#connect-btn');
    await page.waitForFunction(() => document.getElementById('message')!.textContent !== '');
    expect(await page.textContent('#message')).toMatch(/^Connected/);
    expect(await page.getAttribute('#connect-token', 'type')).toBe('password'); // hidden again for the next one
    await page.waitForFunction(() => document.getElementById('connection')?.textContent?.endsWith('live (realtime)'));

    // A new schedule is due at once; the wake cron has the worker check it within about 10 s. The page reads the
    // next time again while it is due, so "due now" gives way to the next slot without a reload or a run.
    await page.click('#schedule-save');
    await page.waitForSelector('#schedule-card[data-state="active"] #schedule-next');
    expect(await page.textContent('#schedule-message')).toMatch(/^Schedule: changes every 15 min/);
    await page.waitForFunction(() => /^in \d/.test(document.getElementById('schedule-next')?.textContent ?? ''), undefined, { timeout: 30_000 });
    const [schedule] = await db.sql`select next_incremental_at from public.sync_schedules`;
    expect((schedule!.next_incremental_at as Date).getTime()).toBeGreaterThan(Date.now());
    // Deleted (asked first): no scheduled check during the outage below.
    await page.click('#schedule-delete');
    await page.waitForSelector('#schedule-card[data-state="none"]');
    expect(await page.textContent('#schedule-message')).toMatch(/^Schedule deleted/);
    // Its first check ran a fetch of every type (a type without a mark is fetched in full): let it end, so the
    // fetch below is the page's own.
    await expect.poll(async () => (await db.sql`select count(*)::int as n from public.runs where finished_at is null`)[0]!.n, { timeout: 60_000 }).toBe(0);
  }, 120_000);

  it(`HubSpot down ${OUTAGE_SECONDS} s mid-fetch: the page says what is happening the whole time, and the run completes after`, async () => {
    sys.sim.setLatency(120); // a page every ~150 ms: the fetch is mid-way when HubSpot goes away
    await page.click('#fetch-btn');
    await page.waitForFunction(() => /^Fetch started for 8 content types/.test(document.getElementById('message')!.textContent ?? ''));
    await page.waitForFunction(() => document.getElementById('run-status')?.dataset.status === 'running');
    const [latest] = await db.sql`select id from public.runs order by created_at desc limit 1`;
    const runId = latest!.id as string;
    await page.waitForFunction(() => [...document.querySelectorAll('#jobs .type-row[data-type="blog_posts"] .count')].some((c) => /^[1-9]/.test(c.textContent ?? '')));

    await proxy.down();
    const downAt = Date.now();
    const samples: Said[] = [];
    let firstFailure: number | null = null;
    let shot = false;
    while (Date.now() - downAt < OUTAGE_SECONDS * 1000) {
      samples.push(await said(page));
      if (firstFailure === null) {
        const [f] = await db.sql`select min(updated_at) as at from public.jobs where run_id = ${runId} and retry_until is not null`;
        if (f?.at) firstFailure = (f.at as Date).getTime();
      }
      if (!shot && firstFailure !== null && Date.now() - firstFailure > 5_000) {
        await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'outage-during.png'), fullPage: true });
        shot = true;
      }
      await sleep(500);
    }
    await proxy.up();
    const upAt = Date.now();
    await writeFile(path.join(SCREENSHOT_DIR, 'outage-samples.json'), JSON.stringify({ downAt, firstFailure, upAt, samples }, null, 1));

    expect(firstFailure, 'a job failed while HubSpot was down').not.toBeNull();
    // Throughout: from a moment after the first failure was recorded (a refresh or a Realtime frame) until HubSpot came back.
    const after = samples.filter((s) => s.at > firstFailure! + 2_500);
    expect(after.length).toBeGreaterThan(OUTAGE_SECONDS); // two a second, less the first seconds
    for (const s of after) {
      expect(s.status, JSON.stringify(s)).not.toMatch(/completed|failed|stopped/);
      expect(s.reason, JSON.stringify(s)).toMatch(/^HubSpot is not answering; (retrying until \d|trying one last time)/);
      expect(s.listed, JSON.stringify(s)).not.toMatch(/given up/i);
    }
    for (const s of samples) {
      const text = [s.header, s.reason, s.listed, ...s.rows, ...s.notes].join(' | ');
      expect(text, 'never "given up" while a retry is scheduled').not.toMatch(/given up|gave up/i);
      expect(pastTimes(text, s.at), text).toEqual([]);
    }
    // Some row said when it tries next, or that it is trying now.
    expect(after.some((s) => s.rows.some((r) => /Retrying (in \d|soon)|Trying again/.test(r)))).toBe(true);

    // HubSpot is back: the run completes (the next try within the longest wait plus a wake of the cron), every job on its first attempt.
    await page.waitForFunction(() => document.getElementById('run-status')?.dataset.status === 'completed', undefined, { timeout: (SHIPPED ? 2 * OUTAGE_SECONDS + 90 : 60) * 1000 });
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'outage-ridden-out.png'), fullPage: true });
    const jobs = await db.sql`select content_type, status, attempts, last_error from public.jobs where run_id = ${runId} order by id`;
    expect(jobs.map((j) => [j.content_type, j.status, j.attempts])).toEqual(jobs.map((j) => [j.content_type, 'completed', 1]));
    expect(jobs.some((j) => /temporarily unavailable/.test(String(j.last_error)))).toBe(true); // it was failing, and was not given up
    expect(await page.$$eval('#run-card .job-error', (els) => els.length)).toBe(0);
    expect(await page.isHidden('#retry-failed-btn')).toBe(true);
    const [stored] = await db.sql`select count(*)::int as n from public.hubspot_content where deleted_at is null`;
    expect(stored!.n).toBe(Object.values(SMALL_PORTAL_SIZES).reduce((a, b) => a + b, 0));
    console.log(`outage ${OUTAGE_SECONDS} s (policy ${SHIPPED ? 'as shipped' : 'scaled'}): run completed ${((Date.now() - upAt) / 1000).toFixed(0)} s after HubSpot came back`);
    expect(pageErrors).toEqual([]);
  }, (OUTAGE_SECONDS * 3 + 180) * 1000);
});
