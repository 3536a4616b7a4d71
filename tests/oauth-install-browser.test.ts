// The progress page's "Connect with HubSpot" in a real headless Chromium (as
// tests/browser-progress-page.test.ts runs it): the page is the app's redirect
// URL; a click starts the install, the browser goes to the simulator's
// authorize page, comes back with code and state, and the page completes the
// install; a cancelled install shows HubSpot's refusal. Skips without chromium.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../local/postgres.ts';
import { startLocalSystem, type LocalSystem } from '../local/system.ts';
import { startWebServer, type WebServer } from '../local/web-server.ts';
import { createUser, useTestDatabase } from './support/database.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => Boolean(p && existsSync(p)));
const HUB_ID = 24_500_001;

if (!CHROMIUM) console.log('OAuth browser test skipped: chromium is not installed (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)');

describe.skipIf(!CHROMIUM)('"Connect with HubSpot" on the progress page', () => {
  const db = useTestDatabase();
  let sys: LocalSystem;
  let web: WebServer;
  let browser: Browser;
  let page: Page;
  let userId: string;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    const port = await freePort();
    sys = await startLocalSystem(db.url, { oauth: { redirectUri: `http://127.0.0.1:${port}/` } });
    sys.sim.addPortal({ portalId: HUB_ID, token: 'pat-browser-oauth-unused' });
    userId = await createUser(db.sql);
    web = await startWebServer({ supabaseUrl: sys.functions.url, accessToken: await sys.keys.signUserToken(userId) }, port);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    page = await browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await web?.close();
    await sys?.stop();
  }, 60_000);

  async function clickInstall() {
    await page.evaluate(() => {
      (document.getElementById('connect-box') as HTMLDetailsElement).open = true;
    });
    await Promise.all([page.waitForURL((u) => u.searchParams.has('state')), page.click('#install-btn')]);
    await page.waitForURL((u) => !u.search); // the page took code and state out of the address bar
  }

  it('installs the app through HubSpot and back, and shows a cancelled install', async () => {
    await page.goto(web.url);
    await page.waitForFunction(() => (document.getElementById('connect-box') as HTMLDetailsElement).open); // no portal yet

    sys.sim.queueInstall({ portalId: HUB_ID, grant: 'approve' });
    await clickInstall();
    await page.waitForFunction(() => /Connected/.test(document.getElementById('message')!.textContent ?? ''));
    // The message comes first; the portal list is loaded after it.
    await page.waitForFunction(() => document.querySelectorAll('#portal-select option').length > 0);
    expect(await page.textContent('#message')).toContain(`(HubSpot ${HUB_ID}) through the HubSpot app`);
    expect(await page.$$eval('#portal-select option', (os) => os.map((o) => o.textContent))).toEqual([`HubSpot portal ${HUB_ID} (HubSpot ${HUB_ID})`]);
    const portals = await db.sql`select hubspot_portal_id, auth_kind from public.portals where owner_id = ${userId}`;
    expect(portals.map((p) => ({ ...p }))).toEqual([{ hubspot_portal_id: String(HUB_ID), auth_kind: 'oauth' }]);

    sys.sim.queueInstall({ portalId: HUB_ID, grant: 'deny' });
    await clickInstall();
    await page.waitForFunction(() => /HUBSPOT_ACCESS_DENIED/.test(document.getElementById('message')!.textContent ?? ''));
    expect(await page.getAttribute('#message', 'class')).toBe('error');
    await page.waitForFunction(() => document.querySelectorAll('#portal-select option').length > 0);
    expect(await page.$$eval('#portal-select option', (os) => os.length)).toBe(1); // the portal is still listed
    expect(pageErrors).toEqual([]);
  }, 120_000);
});
