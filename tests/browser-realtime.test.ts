// The progress page following a run through Realtime, in real headless
// Chromium, against the local system with the gateway's Realtime stand-in.
// Both pages run with ?poll=off: after a run is shown, the page asks the
// orchestrator for it no more, so whatever changes on screen came over the
// websocket. User A's page shows A's job progressing and the run starting;
// user B's page shows B's own run, and a channel B opens on A's run (and on all
// jobs and runs) in the same browser receives none of A's changes, only B's.
// Screenshots go to test-artifacts/browser/. Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { useTestDatabase } from './support/database.ts';
import { seedRun } from './support/queue-fixtures.ts';
import { claimNextJob } from '../shared/sql/jobs.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
const SCREENSHOT_DIR = path.join(PROJECT_ROOT, 'test-artifacts/browser');

if (!CHROMIUM) console.log('browser realtime test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');

describe.skipIf(!CHROMIUM)('progress page over Realtime in headless Chromium', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let browser: Browser;
  const servers: WebServer[] = [];
  const errors: string[] = [];

  /** Opens the page as a user with polling off, shows the run, and counts the run's HTTP reads from then on. */
  async function openRun(userId: string, runId: string): Promise<{ page: Page; runReads: () => number }> {
    const web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: await sys.keys.signUserToken(userId), anonKey: sys.keys.anonKey });
    servers.push(web);
    const page = await (await browser.newContext({ viewport: { width: 1100, height: 800 } })).newPage();
    // HTTP failures are listed by URL below; the console's "Failed to load resource" says the same.
    page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()));
    // (The operator view's /stats is refused to these users, who are not operators: expected.)
    page.on('response', (r) => r.status() >= 400 && !(r.status() === 403 && r.url().endsWith('/orchestrator/stats')) && errors.push(`${r.status()} ${r.url()}`));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(web.urlWith('?poll=off'));
    const before = sys.functions.realtime!.stats().subscriptions;
    let reads = 0;
    page.on('requestfinished', (r) => r.url().includes(`/functions/v1/orchestrator?runId=`) && reads++);
    await page.click(`#runs-list li[data-run-id="${runId}"]`);
    // Live once the server says so ("Subscribed to PostgreSQL"); the page then reads the run once more.
    await page.waitForFunction(() => document.getElementById('connection')?.textContent?.endsWith('live (realtime)'));
    expect(sys.functions.realtime!.stats().subscriptions).toBe(before + 2);
    // The read that follows going live (begun when the page said live), and no refresh left; from here on the page may only listen.
    await expect.poll(() => reads, { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(1);
    await page.waitForFunction(() => !document.body.dataset.refreshing);
    reads = 0;
    return { page, runReads: () => reads };
  }
  const countText = (page: Page, jobId: number) => page.textContent(`#jobs .type-row[data-job-id="${jobId}"] .count`);
  const headerStatus = (page: Page) => page.getAttribute('#run-status', 'data-status');

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    sys = await startLocalSystem(db.url, { realtime: { dbUrl: db.directUrl } });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    for (const s of servers) await s.close();
    await sys?.stop();
  }, 60_000);

  it('updates A’s page from Realtime with polling off, and B receives none of A’s changes', async () => {
    const a = await seedRun(db.sql, { types: ['site_pages'] });
    const b = await seedRun(db.sql, { types: ['blog_posts'] });
    const [{ id: jobA }] = (await db.sql`select id::int from public.jobs where run_id = ${a.runId}`) as any;
    const [{ id: jobB }] = (await db.sql`select id::int from public.jobs where run_id = ${b.runId}`) as any;
    const pa = await openRun(a.userId, a.runId);
    const pb = await openRun(b.userId, b.runId);
    // B, in its own page, listens for A's run and for every job and run it may see.
    const tokenB = await sys.keys.signUserToken(b.userId);
    // (A string, not a function: the test runner would rewrite a function's dynamic import.)
    const args = JSON.stringify({ url: sys.functions.url, anonKey: sys.keys.anonKey, token: tokenB, runA: a.runId });
    await pb.page.evaluate(`(async ({ url, anonKey, token, runA }) => {
      const { createClient } = await import('/supabase-js.mjs');
      const client = createClient(url, anonKey);
      client.realtime.setAuth(token);
      window.snooped = [];
      await new Promise((resolve, reject) =>
        client
          .channel('snoop')
          .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: 'run_id=eq.' + runA }, (p) => window.snooped.push(p))
          .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs' }, (p) => window.snooped.push(p))
          .on('postgres_changes', { event: '*', schema: 'public', table: 'runs' }, (p) => window.snooped.push(p))
          .on('system', {}, (p) => (p.status === 'ok' ? resolve() : reject(new Error(JSON.stringify(p)))))
          .subscribe());
    })(${args})`);

    // A worker claims A's job (the first in claim order) and reports progress.
    const claimed = await claimNextJob(db.sql, 'realtime-test-worker', ['fetch']);
    expect(claimed?.id).toBe(String(jobA));
    await db.sql`update public.jobs set progress_done = 5, progress_total = 20 where id = ${jobA}`;
    await db.sql`update public.runs set status = 'running', started_at = now() where id = ${a.runId}`;
    await pa.page.waitForFunction((id) => document.querySelector(`#jobs .type-row[data-job-id="${id}"] .count`)?.textContent === '5 / 20', jobA);
    await pa.page.waitForFunction(() => document.getElementById('run-status')?.dataset.status === 'running');
    await pa.page.screenshot({ path: path.join(SCREENSHOT_DIR, 'realtime-user-a.png'), fullPage: true });

    // B's own change, committed after A's: when it is on B's page, A's changes had been decided.
    await db.sql`update public.jobs set progress_done = 2, progress_total = 9 where id = ${jobB}`;
    await pb.page.waitForFunction((id) => document.querySelector(`#jobs .type-row[data-job-id="${id}"] .count`)?.textContent === '2 / 9', jobB);
    await pb.page.waitForFunction(() => (window as unknown as { snooped: unknown[] }).snooped.length > 0);
    await pb.page.screenshot({ path: path.join(SCREENSHOT_DIR, 'realtime-user-b.png'), fullPage: true });

    const snooped = (await pb.page.evaluate(() => (window as unknown as { snooped: { table: string; new: Record<string, unknown> }[] }).snooped)) as { table: string; new: Record<string, unknown> }[];
    expect(snooped.map((c) => `${c.table}:${c.new.id}`)).toEqual([`jobs:${jobB}`]);
    expect(snooped.every((c) => c.new.owner_id === b.userId)).toBe(true);
    expect(await countText(pb.page, jobB)).toBe('2 / 9');
    expect(await headerStatus(pb.page)).toBe('queued'); // nothing of B's run has started
    expect(await countText(pa.page, jobA)).toBe('5 / 20');
    // Polling was off: neither page read its run over HTTP after subscribing.
    expect([pa.runReads(), pb.runReads()]).toEqual([0, 0]);
    expect(errors).toEqual([]);
  });
});
