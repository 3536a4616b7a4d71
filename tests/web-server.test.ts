// The progress page's server (local/web-server.ts): config.json is
// answered only to a request carrying this start's page key (the fragment of the
// printed URL, sent back as X-Page-Key), nothing is answered to a Host other than
// 127.0.0.1 or localhost (DNS rebinding), and config.json never holds a HubSpot token.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_KEY_HEADER, startWebServer, type WebServer } from '../local/web-server.ts';

let web: WebServer;
let base: URL;
let pageKey: string;

/** A GET with exactly these headers (fetch would not let a test set Host). */
function get(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: base.port, path, headers, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  web = await startWebServer({ supabaseUrl: 'http://127.0.0.1:1', anonKey: 'anon-key-jwt', demoPortal: { name: 'Demo portal', token: 'pat-secret-token' } as never });
  base = new URL(web.url);
  pageKey = new URLSearchParams(base.hash.slice(1)).get('pageKey')!;
});
afterAll(async () => {
  await web?.close();
});

describe('the page server', () => {
  it('gives the page its key in the URL fragment only (never sent to a server), and a query before it', () => {
    expect(pageKey).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(web.urlWith('?poll=off')).toBe(`${base.origin}/?poll=off#pageKey=${pageKey}`);
  });

  it('answers config.json only with this start’s page key', async () => {
    const host = `127.0.0.1:${base.port}`;
    const attempts: Record<string, string>[] = [{ host }, { host, [PAGE_KEY_HEADER]: 'x'.repeat(32) }, { host, [PAGE_KEY_HEADER]: `${pageKey}x` }];
    for (const headers of attempts) {
      const res = await get('/config.json', headers);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.body).code).toBe('PAGE_KEY_REQUIRED');
      expect(res.body).not.toContain('anon-key-jwt');
    }
    const ok = await get('/config.json', { host, [PAGE_KEY_HEADER]: pageKey });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ mode: 'local', supabaseUrl: 'http://127.0.0.1:1', anonKey: 'anon-key-jwt', demoPortal: { name: 'Demo portal' } });
  });

  it('never serves a HubSpot token, even one it was handed', async () => {
    const ok = await get('/config.json', { host: `localhost:${base.port}`, [PAGE_KEY_HEADER]: pageKey });
    expect(ok.status).toBe(200);
    expect(ok.body).not.toContain('pat-secret-token');
    expect(JSON.parse(ok.body).demoPortal).toEqual({ name: 'Demo portal' });
  });

  it('answers nothing to another Host (DNS rebinding), whatever the key', async () => {
    for (const host of ['evil.example', `evil.example:${base.port}`, '127.0.0.1.evil.example', `[::1]:${base.port}`]) {
      for (const path of ['/config.json', '/', '/app.js']) {
        const res = await get(path, { host, [PAGE_KEY_HEADER]: pageKey });
        expect(res.status, `${host} ${path}`).toBe(421);
        expect(JSON.parse(res.body).code).toBe('HOST_NOT_ALLOWED');
      }
    }
    expect((await get('/', { host: `localhost:${base.port}` })).status).toBe(200);
  });
});
