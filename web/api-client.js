// The page's configuration (the one place it is read) and the orchestrator's
// HTTP API: plain fetch with the user's access token.
import { state } from './page.js';

export const SUPABASE_JS = 'https://esm.sh/@supabase/supabase-js@2.109.0'; // the version package.json pins

/**
 * First found wins: ./config.json (served by npm start --serve to the page opened with its #pageKey=…; mode 'local'),
 * the URL fragment (#supabaseUrl=…&accessToken=…[&anonKey=…][&mode=…]), or null
 * (the sign-in form). `?poll=off` in the query switches polling off (realtime only).
 */
export async function loadConfig() {
  const poll = new URLSearchParams(location.search).get('poll') !== 'off';
  const hash = new URLSearchParams(location.hash.slice(1));
  // npm start's page key (#pageKey=…), kept for this window: a HubSpot install comes back without the fragment.
  const pageKey = hash.get('pageKey') ?? sessionStorage.getItem('queue.pageKey');
  if (pageKey) {
    try {
      const res = await fetch('./config.json', { cache: 'no-store', headers: { 'X-Page-Key': pageKey } });
      if (res.ok) {
        sessionStorage.setItem('queue.pageKey', pageKey);
        return { mode: 'local', poll, ...(await res.json()) };
      }
    } catch {
      /* not served by npm start: fall through */
    }
  }
  if (hash.get('supabaseUrl') && hash.get('accessToken')) {
    return { mode: hash.get('mode') ?? 'deployed', poll, supabaseUrl: hash.get('supabaseUrl'), accessToken: hash.get('accessToken'), anonKey: hash.get('anonKey') };
  }
  return null;
}

export async function loadSupabase(cfg) {
  const { createClient } = await import(cfg.supabaseJsUrl ?? SUPABASE_JS);
  return createClient(cfg.supabaseUrl, cfg.anonKey);
}

export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.code ?? 'HTTP_ERROR';
    this.details = body?.details;
    this.retryAfter = retryAfter;
  }
}

/** `contentType`: the body is sent as it is (a File or text, e.g. 'text/csv' for an upload), not as JSON. */
export async function api(path, { method = 'GET', body, raw = false, contentType = null } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (state.cfg.anonKey) headers.apikey = state.cfg.anonKey;
  if (body !== undefined) headers['Content-Type'] = contentType ?? 'application/json';
  const sent = body === undefined || contentType ? body : JSON.stringify(body);
  const res = await fetch(`${state.cfg.supabaseUrl}/functions/v1/orchestrator${path}`, { method, headers, body: sent });
  if (!res.ok) {
    const err = await res.json().catch(() => null);
    throw new ApiError(res.status, err, res.headers.get('retry-after'));
  }
  return raw ? res : res.json();
}

