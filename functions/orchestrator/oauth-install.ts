// HubSpot OAuth install, the orchestrator's half: the `state` (random, bound to
// the user in Postgres, single-use, expiring; only its SHA-256 is stored), the
// PKCE code_verifier (derived from the state with HMAC-SHA256 keyed by the app's
// client secret, so nothing the database holds gives it away) and HubSpot's
// authorize URL.
//
// The URL has the query @hubspot/api-client's `getAuthorizationUrl` builds
// (lib/src/discovery/oauth/OauthDiscovery.js: client_id, redirect_uri, scope,
// optional_scope, state, each percent-encoded), plus code_challenge and
// code_challenge_method=S256, which it does not know. It is not imported here:
// it fixes the host to app.hubspot.com and would pull the client's generated
// OAuth API and its request decorators (~500 KB) into the function's bundle. A
// test checks that both build the same query.
import { requiredScopes } from '../../shared/content-types.ts';
import { toBase64Url } from '../../shared/token-crypto.ts';
import type { OAuthInstallConfig } from './deps.ts';

export type { OAuthInstallConfig };

/**
 * Scopes requested at install: what the content types need (shared/content-types.ts:
 * `content` for pages, blog posts, authors, tags and URL redirects, `hubdb` for
 * tables and rows), plus `oauth`, the base scope of every HubSpot app.
 */
export const HUBSPOT_INSTALL_SCOPES: readonly string[] = [...requiredScopes(), 'oauth'];

/** HubSpot's authorize page. */
export const DEFAULT_AUTHORIZE_URL = 'https://app.hubspot.com/oauth/authorize';

/** The shape of a state this orchestrator issues: 32 random bytes, base64url. */
export const INSTALL_STATE = /^[A-Za-z0-9_-]{43}$/;

const encoder = new TextEncoder();

/** A fresh install state: 32 random bytes, base64url (43 characters). */
export function newInstallState(): string {
  return toBase64Url(crypto.getRandomValues(new Uint8Array(32)));
}

/** What the database stores of a state: its SHA-256. */
export async function installStateHash(state: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(state)));
}

/**
 * The PKCE code_verifier of an install (RFC 7636: 43 characters of [A-Za-z0-9_-]):
 * HMAC-SHA256 of the state under the app's client secret. Start and callback
 * derive the same one; neither the database nor the redirect holds it.
 */
export async function pkceVerifier(clientSecret: string, state: string): Promise<string> {
  const key = await crypto.subtle.importKey('raw', encoder.encode(clientSecret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return toBase64Url(await crypto.subtle.sign('HMAC', key, encoder.encode(`hubspot-install-pkce-v1:${state}`)));
}

/** The S256 code_challenge of a verifier: toBase64Url(SHA-256(verifier)). */
export async function pkceChallenge(verifier: string): Promise<string> {
  return toBase64Url(await crypto.subtle.digest('SHA-256', encoder.encode(verifier)));
}

/** HubSpot's authorize URL for an install with this state and PKCE challenge. */
export function authorizeUrl(cfg: OAuthInstallConfig, state: string, codeChallenge: string): string {
  const params: [string, string][] = [
    ['client_id', cfg.clientId],
    ['redirect_uri', cfg.redirectUri],
    ['scope', HUBSPOT_INSTALL_SCOPES.join(' ')],
    ['state', state],
    ['code_challenge', codeChallenge],
    ['code_challenge_method', 'S256'],
  ];
  const query = params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
  return `${cfg.authorizeUrl ?? DEFAULT_AUTHORIZE_URL}?${query}`;
}

/** An absolute http(s) URL without a fragment, or an error naming the variable (never its value). */
function httpUrl(name: string, value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new Error(`orchestrator: missing or invalid environment variables: ${name} (not an absolute URL)`);
  }
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.hash) {
    throw new Error(`orchestrator: missing or invalid environment variables: ${name} (must be an http(s) URL without a #fragment)`);
  }
  return value;
}

/**
 * The install configuration from the function's secrets: present when
 * HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET and HUBSPOT_REDIRECT_URI are all set
 * (the install routes answer 501 otherwise); malformed URLs stop the function.
 */
export function installConfigFromEnv(
  env: { HUBSPOT_CLIENT_ID?: string; HUBSPOT_CLIENT_SECRET?: string; HUBSPOT_REDIRECT_URI?: string; HUBSPOT_AUTHORIZE_URL?: string },
  http: { tokenBasePath?: string; requestTimeoutMs?: number; refreshMarginSeconds?: number } = {},
): OAuthInstallConfig | undefined {
  const value = (v: string | undefined) => v?.trim() || undefined;
  const redirectUri = value(env.HUBSPOT_REDIRECT_URI);
  const authorize = value(env.HUBSPOT_AUTHORIZE_URL);
  if (redirectUri) httpUrl('HUBSPOT_REDIRECT_URI', redirectUri);
  if (authorize && new URL(httpUrl('HUBSPOT_AUTHORIZE_URL', authorize)).search) {
    throw new Error('orchestrator: missing or invalid environment variables: HUBSPOT_AUTHORIZE_URL (must not carry a query)');
  }
  const clientId = value(env.HUBSPOT_CLIENT_ID);
  const clientSecret = value(env.HUBSPOT_CLIENT_SECRET);
  if (!clientId || !clientSecret || !redirectUri) return undefined;
  return { clientId, clientSecret, redirectUri, authorizeUrl: authorize ?? DEFAULT_AUTHORIZE_URL, ...http };
}
