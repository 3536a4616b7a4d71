// Secrets are taken out of text by one helper (shared/redact.ts), used by the
// HubSpot transport's errors, the OAuth token endpoint's errors and the logger:
// whole tokens only, and only real-length ones, so a short "token" never
// mangles HubSpot's message, while a real token is redacted wherever it appears
// (plain, inside JSON, inside a URL query string, percent- or form-encoded).
import { readdir, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { fixedAccessToken, Transport, type HttpResponse } from '../shared/hubspot/transport.ts';
import { createLogger } from '../shared/log.ts';
import { MIN_SECRET_LENGTH, redactSecrets } from '../shared/redact.ts';
import { LIST_PATHS } from '../shared/hubspot/endpoints.ts';

const HUBSPOT_401 = 'The OAuth token used to make this call expired 2 day(s) ago.';

/** A transport whose every request gets `status` with `body`, sending `token`. */
function transportAnswering(token: string, status: number, body: unknown): Transport {
  const response: HttpResponse = { status, headers: { forEach: () => {} }, text: async () => JSON.stringify(body) };
  return new Transport({ tokens: fixedAccessToken(token), maxTransientRetries: 0, sleep: async () => {} }, async () => response);
}

async function errorMessage(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a rejection');
}

describe('HubSpot error text', () => {
  it("a very short token does not mangle HubSpot's message", async () => {
    for (const token of ['t', 'to', 'The', 'OAuth', 'token']) {
      const message = await errorMessage(transportAnswering(token, 401, { status: 'error', message: HUBSPOT_401, category: 'EXPIRED_AUTHENTICATION' }).get(LIST_PATHS.site_pages));
      expect(message, token).toContain(HUBSPOT_401);
      expect(message, token).not.toContain('[redacted]');
    }
  });

  it('a real-length token anywhere in the message is redacted (plain, in JSON, in a URL query string)', async () => {
    for (const token of ['pat-na1-4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f', 'CJSP5qf1KhICAQEYs+gDIIGOBii/1hQIyGQAf3xB==']) {
      const q = encodeURIComponent(token);
      const hubspotMessage = `Token ${token} is invalid; request {"token":"${token}"} to https://api.hubapi.com/x?access_token=${q}&limit=10 failed`;
      const message = await errorMessage(transportAnswering(token, 400, { status: 'error', message: hubspotMessage, category: 'VALIDATION_ERROR' }).get('/x'));
      expect(message).not.toContain(token);
      expect(message).not.toContain(q);
      expect(message).toContain('Token [redacted] is invalid; request {"token":"[redacted]"} to https://api.hubapi.com/x?access_token=[redacted]&limit=10 failed');
    }
  });
});

describe('redactSecrets', () => {
  const secret = 'CJSP5qf1KhICAQEYs+gDIIGOBii/1hQIyGQAf3xB==';

  it(`matches nothing shorter than ${MIN_SECRET_LENGTH} characters`, () => {
    expect(MIN_SECRET_LENGTH).toBeGreaterThanOrEqual(8);
    expect(redactSecrets('The OAuth token used to make this call expired', ['t', 'e', 'OAuth', 'token', '1234567'])).toBe('The OAuth token used to make this call expired');
  });

  it('matches whole tokens only: not inside a longer word', () => {
    expect(redactSecrets('password passwords 1password password.', ['password'])).toBe('[redacted] passwords 1password [redacted].');
    expect(redactSecrets('pat-na1-abcdef12 and xpat-na1-abcdef12 and pat-na1-abcdef12-2', ['pat-na1-abcdef12'])).toBe('[redacted] and xpat-na1-abcdef12 and [redacted]-2');
  });

  it('finds a token as it is, JSON-escaped, percent-encoded and form-encoded', () => {
    const json = JSON.stringify({ error: 'bad', token: secret, nested: JSON.stringify({ token: secret }) });
    expect(redactSecrets(json, [secret])).not.toContain(secret);
    expect(JSON.parse(redactSecrets(json, [secret])).token).toBe('[redacted]');
    const query = `https://api.hubapi.com/oauth/v1/access-tokens/${encodeURIComponent(secret)}?token=${encodeURIComponent(secret)}&x=1`;
    expect(redactSecrets(query, [secret])).toBe('https://api.hubapi.com/oauth/v1/access-tokens/[redacted]?token=[redacted]&x=1');
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: secret }).toString();
    expect(redactSecrets(form, [secret])).toBe('grant_type=refresh_token&refresh_token=[redacted]');
    const escaped = JSON.stringify({ url: `https://x/?t=${secret}` });
    expect(redactSecrets(escaped, [secret])).toBe('{"url":"https://x/?t=[redacted]"}');
    const withQuote = 'ab"cd\\efgh1234';
    expect(redactSecrets(JSON.stringify({ s: withQuote }), [withQuote])).toBe('{"s":"[redacted]"}');
  });

  it('a secret that contains another is redacted whole', () => {
    expect(redactSecrets('key=abcdefgh12345678 end', ['abcdefgh', 'abcdefgh12345678'])).toBe('key=[redacted] end');
  });
});

describe('the logger', () => {
  it('redacts real secrets in every form and leaves short "secrets" alone', () => {
    const lines: string[] = [];
    const secret = 'sb_secret_0123456789abcdef/XYZ+';
    const log = createLogger({ secrets: ['tok', 'token i', secret], write: (l) => lines.push(l) });
    log.info('called', { url: `https://x.supabase.co/rest?apikey=${encodeURIComponent(secret)}`, body: JSON.stringify({ key: secret }), note: 'the token is ok' });
    expect(lines[0]).not.toContain(secret);
    expect(lines[0]).not.toContain(encodeURIComponent(secret));
    expect(JSON.parse(lines[0]!)).toMatchObject({ url: 'https://x.supabase.co/rest?apikey=[redacted]', body: '{"key":"[redacted]"}', note: 'the token is ok' });
  });
});

describe('one redaction helper', () => {
  it('no other module replaces secrets in text itself', async () => {
    const offenders: string[] = [];
    for (const dir of ['shared', 'functions', 'supabase/functions']) {
      for (const f of await readdir(dir, { recursive: true })) {
        const file = `${dir}/${f}`;
        if (!file.endsWith('.ts') || file === 'shared/redact.ts') continue;
        const text = await readFile(file, 'utf8');
        if (/\.join\(\s*'\[redacted\]'\s*\)|replace(All)?\([^)]*'\[redacted\]'/.test(text)) offenders.push(file);
      }
    }
    expect(offenders).toEqual([]);
  });
});
