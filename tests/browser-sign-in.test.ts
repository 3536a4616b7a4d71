// Signing in on the progress page (web/sign-in.js) through the local Auth, in
// real headless Chromium, as `npm start -- --serve` serves it: the page is given
// no token; one window signs up a new user, another signs in as an existing one,
// each sees only its own portal, a reload keeps each window's user, and "Sign
// out" ends it. Skips when chromium is not installed.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { connectPrivateAppPortal } from '../shared/hubspot/portal-connect.ts';
import { testTokenKeys } from '../local/test-token-keys.ts';
import { useTestDatabase } from './support/database.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));

describe.skipIf(!CHROMIUM)('signing in on the progress page', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let web: WebServer;
  let browser: Browser;
  const errors: string[] = [];

  beforeAll(async () => {
    sys = await startLocalSystem(db.url, { realtime: { dbUrl: db.directUrl } });
    web = await startWebServer({ supabaseUrl: sys.functions.url, anonKey: sys.keys.anonKey });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await web?.close();
    await sys?.stop();
  }, 60_000);

  async function open(): Promise<Page> {
    const page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(web.url);
    await page.waitForSelector('#signin:not([hidden])');
    return page;
  }
  const submit = async (page: Page, button: 'signin-btn' | 'signup-btn', email: string, password: string) => {
    await page.fill('#signin-email', email);
    await page.fill('#signin-password', password);
    await page.click(`#${button}`);
  };
  const portalOptions = (page: Page) => page.$$eval('#portal-select option', (os) => os.map((o) => o.textContent));

  it('one window signs up, another signs in: two users, each with their own portals; reload keeps, sign-out ends', async () => {
    const ownerId = await sys.auth.createUser({ email: 'owner@example.test', password: 'owner-password' });
    await connectPrivateAppPortal(db.sql, testTokenKeys, { ownerId, hubspotPortalId: 77_000_001, name: 'Owner portal', accessToken: 'pat-owner' });

    const a = await open();
    expect(await a.isVisible('#cfg-url')).toBe(false); // locally the project is known
    await submit(a, 'signup-btn', 'short@example.test', 'abc');
    await a.waitForFunction(() => document.getElementById('signin-message')?.textContent?.includes('weak_password'));
    await submit(a, 'signup-btn', 'newcomer@example.test', 'newcomer-password');
    await a.waitForSelector('#app:not([hidden])');
    expect(await a.textContent('#signout-btn')).toBe('Sign out newcomer@example.test');

    const b = await open();
    await submit(b, 'signin-btn', 'owner@example.test', 'wrong-password');
    await b.waitForFunction(() => document.getElementById('signin-message')?.textContent?.includes('Invalid login credentials'));
    await submit(b, 'signin-btn', 'owner@example.test', 'owner-password');
    await b.waitForSelector('#app:not([hidden])');
    await b.waitForFunction(() => [...document.querySelectorAll('#portal-select option')].some((o) => o.textContent?.includes('Owner portal')));
    expect((await portalOptions(a)).some((t) => t?.includes('Owner portal'))).toBe(false);

    await b.reload();
    await b.waitForSelector('#app:not([hidden])');
    expect(await b.textContent('#signout-btn')).toBe('Sign out owner@example.test');
    await b.click('#signout-btn');
    await b.waitForSelector('#signin:not([hidden])');
    expect(await a.textContent('#signout-btn')).toBe('Sign out newcomer@example.test'); // the other window's user is untouched
    expect(errors).toEqual([]);
  });
});
