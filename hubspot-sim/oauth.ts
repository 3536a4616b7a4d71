// HubSpot OAuth in the simulator: install (authorize) page, v3 token / introspect / revoke, v1 token metadata,
// and the access-token check CMS requests go through.
//
// Facts followed here, with their sources:
// - Endpoints and form fields. POST /oauth/v3/token takes application/x-www-form-urlencoded client_id,
//   client_secret, grant_type (authorization_code | refresh_token), code, code_verifier, redirect_uri,
//   refresh_token, scope; POST /oauth/v3/token/introspect and /oauth/v3/token/revoke take client_id,
//   client_secret, token, token_type_hint. Errors use the Error body {category, correlationId, message,
//   subCategory?, context?, errors?, links?}. Source: HubSpot/HubSpot-public-api-spec-collection,
//   PublicApiSpecs/Auth/Oauth/Rollouts/279897/v3/oauth.json.
// - Token response fields: access_token, refresh_token, expires_in, token_type, hub_id, user_id, scopes,
//   token_use ("access_token"), id_token (only with openid). Source: the same collection's 2026-03/oauth.json
//   (AccessTokenResponse; its operation ids name /oauth/v3/token) and the developer changelog "Additional
//   details returned when generating OAuth access tokens" (developers.hubspot.com/changelog/additional-details-
//   returned-when-generating-oauth-access-tokens: hub_id and scopes on every token response, code exchange and
//   refresh alike, from 2025-08-18). So the product learns the hub id from the code exchange.
// - Introspect answer: PublicAccessTokenInfoResponse {active, token_use "access_token", token, token_type,
//   hub_id, hub_domain, user_id, user, client_id, app_id, scopes, expires_in, is_private_distribution,
//   signed_access_token} and PublicRefreshTokenInfoResponse (no expires_in, token_use "refresh_token").
//   Source: 2026-03/oauth.json above; HubSpot's reference page "Token introspection endpoint"
//   (developers.hubspot.com/docs/api-reference/legacy/authentication/oauth-tokens/token-introspect). Inactive
//   tokens: {active: false} (the v3 spec requires only `active`; RFC 7662 §2.2). The simulator leaves out
//   signed_access_token.
// - v1 metadata (the official client's AccessTokensApi/RefreshTokensApi, @hubspot/api-client
//   lib/codegen/oauth/models): GET /oauth/v1/access-tokens/{token} -> hub_id, user_id, scopes, token_type,
//   user, hub_domain, app_id, expires_in, token; GET /oauth/v1/refresh-tokens/{token} -> same with client_id
//   instead of app_id/expires_in. The client 13.5.0 generates only v1 paths (TokensApi posts /oauth/v1/token).
// - Lifetimes. Access tokens expire after 30 minutes (expires_in 1800): developer changelog
//   (developers.hubspot.com/changelog/upcoming-expiration-of-oauth-access-tokens-is-changing) and the v3 guide
//   (developers.hubspot.com/docs/api-reference/auth-oauth-v3/guide: "Access tokens are short-lived (30 minutes)").
//   Auth codes are temporary and single-use ("a short window to exchange it ... after which the authorization
//   code cannot be reused", same guide; no number is published, the simulator defaults to 300 s). Refresh
//   tokens are long-lived and stop working when the app is uninstalled; revoking a refresh token does not
//   affect access tokens already issued and does not uninstall the app (HubSpot "Managing tokens",
//   developers.hubspot.com/docs-beta/oauth/tokens, "Delete OAuth 2.0 Refresh Token").
// - Refresh does not rotate: the refresh token stays the same across refreshes. Inferred, HubSpot does not say
//   it outright: its docs tell apps to store the refresh token from the initial exchange and use it to get new
//   access tokens "once the initial one expires" (v1 and v3 guides), and client authors report the refresh
//   answer repeats the same refresh token (github.com/HGData/mk-node-hubspot pull 19). One course site claims
//   rotation; no HubSpot page does. The product must store whatever refresh_token a refresh answers;
//   `rotateRefreshTokens: true` makes the simulator rotate so that is testable.
// - Bad or revoked refresh token: HTTP 400 {"status":"BAD_REFRESH_TOKEN","message":"missing or invalid refresh
//   token", ...} (as observed from HubSpot's token endpoint: nango.dev/blog/hubspot-oauth-bad-refresh-token).
//   Codes BAD_AUTH_CODE / BAD_REDIRECT_URI / BAD_CLIENT_ID / BAD_CLIENT_SECRET / BAD_GRANT_TYPE follow the
//   same v1 `status` convention; the simulator adds the v3 Error fields (correlationId, category).
//   HubSpot's v3 spec (HubSpot/HubSpot-public-api-spec-collection, PublicApiSpecs/Auth/Oauth/Rollouts/279897/v3/
//   oauth.json) defines the token endpoint's error body only as its Error schema: {category, correlationId,
//   message, subCategory?, context?, errors?, links?}, no `status`. `errorStyle: 'v3'` (or setErrorStyle) answers
//   exactly that (category VALIDATION_ERROR, no code at all), so a client cannot rely on a code being there.
//   Introspection (same spec): POST /oauth/v3/token/introspect answers {active: boolean, ...}.
// - Expired access token on an API call: 401 {"status":"error","message":"The OAuth token used to make this
//   call expired N minute(s) ago.","category":"EXPIRED_AUTHENTICATION"} (useparagon.com/integration-error-solutions/
//   hubspot-the-oauth-token-used-to-make-this-call-expired). Revoked/unknown tokens keep the existing
//   INVALID_AUTHENTICATION 401, a missing scope the existing 403 MISSING_SCOPES (responses.ts).
// - Authorize URL: https://app.hubspot.com/oauth/authorize?client_id&redirect_uri&scope&optional_scope&state
//   (v3 guide; the official client's OauthDiscovery.getAuthorizationUrl builds the same), plus
//   code_challenge and code_challenge_method=S256 for PKCE (RFC 7636 §4.2-4.6).
// Simulator choices (no HubSpot source): a failed PKCE check burns the code (answer BAD_AUTH_CODE); a replayed
// code is refused but does not revoke the tokens it produced; revoke answers 204, also for unknown tokens
// (RFC 7009 §2.2); the authorize page answers 400 JSON for an unknown client or unregistered redirect_uri.

import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { apiEndpoint, areaPath } from '../shared/hubspot/api-paths.ts';
import type { Portal } from './portal.ts';
import { json, type SimResponse } from './responses.ts';

export interface OAuthOptions {
  accessTokenTtlSeconds?: number; // default 1800
  authCodeTtlSeconds?: number; // default 300
  rotateRefreshTokens?: boolean; // default false (HubSpot keeps the refresh token)
  errorStyle?: OAuthErrorStyle; // default 'v1'
}

/** Token endpoint error bodies: 'v1' {status: CODE, message, correlationId, category}; 'v3' the spec's Error (no code). */
export type OAuthErrorStyle = 'v1' | 'v3';

export interface OAuthAppConfig {
  clientId: string;
  clientSecret: string;
  redirectUris: string[];
  appId?: number;
  accessTokenTtlSeconds?: number;
}

/** Who "clicks Install" on the next authorize request. */
export interface InstallDecision {
  portalId: number;
  grant: 'approve' | 'deny';
  scopes?: string[]; // granted scopes; default: scope ∪ optional_scope of the authorize request
  userId?: number;
}

export type OAuthOutcome =
  | 'ok' | 'denied' | 'bad_grant_type' | 'bad_client_id' | 'bad_client_secret' | 'bad_auth_code'
  | 'bad_redirect_uri' | 'bad_refresh_token' | 'bad_request' | 'inactive' | 'fault';

export interface OAuthLogEntry {
  at: number;
  endpoint: string;
  grantType: 'authorization_code' | 'refresh_token' | null;
  clientId: string | null;
  portalId: number | null;
  outcome: OAuthOutcome;
  status: number;
  tokenHash: string | null; // sha256 prefix of the issued or inspected token, never the token
}

export interface OAuthResult {
  response: SimResponse;
  headers?: Record<string, string>;
}

/** What a bearer token on a CMS request resolves to. */
export type AccessCheck =
  | { kind: 'valid'; portalId: number; userId: number; scopes: ReadonlySet<string>; rateKey: string; hash: string }
  | { kind: 'expired'; portalId: number; expiredMs: number; hash: string }
  | { kind: 'revoked'; portalId: number; hash: string };

interface App {
  clientId: string;
  secretHash: Buffer;
  redirectUris: ReadonlySet<string>;
  appId: number;
  ttlSeconds: number | null;
}

// One install of one app in one portal; its refresh token and access tokens hang off it.
interface Grant {
  app: App;
  portalId: number;
  userId: number;
  scopes: Set<string>;
  refreshToken: string | null; // null once revoked
  uninstalled: boolean;
}

interface AuthCode {
  app: App;
  redirectUri: string;
  challenge: string | null;
  portalId: number;
  userId: number;
  scopes: string[];
  expiresAt: number;
}

interface AccessToken {
  grant: Grant;
  expiresAt: number;
  revoked: boolean;
  hash: string;
}

const OAUTH_ROUTES: Record<string, string> = {
  'GET /oauth/authorize': 'authorize',
  'POST /oauth/v3/token': 'token',
  'POST /oauth/v1/token': 'token',
  'POST /oauth/v3/token/introspect': 'introspect',
  'POST /oauth/v3/token/revoke': 'revoke',
  // The product's paths at their version (shared/hubspot/api-paths.ts; the same while it calls v3).
  [`POST ${apiEndpoint('oauth_token').template}`]: 'token',
  [`POST ${apiEndpoint('oauth_introspect').template}`]: 'introspect',
  [`POST ${areaPath('oauth', '/token/revoke')}`]: 'revoke',
};
const V1_METADATA = /^\/oauth\/v1\/(access|refresh)-tokens\/([^/]+)$/;

export type OAuthRoute =
  | { key: string; kind: 'authorize' | 'token' | 'introspect' | 'revoke' }
  | { key: string; kind: 'metadata'; tokenKind: 'access' | 'refresh'; token: string };

// The /oauth/* endpoint a request is for, or null.
export function matchOAuthRoute(method: string, rawPath: string): OAuthRoute | null {
  const path = rawPath.length > 1 ? rawPath.replace(/\/+$/, '') : rawPath;
  const key = `${method} ${path}`;
  const kind = OAUTH_ROUTES[key];
  if (kind) return { key, kind: kind as 'authorize' | 'token' | 'introspect' | 'revoke' };
  const meta = method === 'GET' ? V1_METADATA.exec(path) : null;
  if (meta) {
    const tokenKind = meta[1] as 'access' | 'refresh';
    return { key: `GET /oauth/v1/${tokenKind}-tokens/{token}`, kind: 'metadata', tokenKind, token: decodeURIComponent(meta[2]!) };
  }
  return null;
}

const tokenForm = z.object({
  grant_type: z.string().optional(),
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
  code: z.string().optional(),
  code_verifier: z.string().optional(),
  redirect_uri: z.string().optional(),
  refresh_token: z.string().optional(),
  scope: z.string().optional(),
});
const tokenOpForm = z.object({
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
  token: z.string().min(1),
  token_type_hint: z.enum(['access_token', 'refresh_token']).optional(),
});
// RFC 7636 §4.1: 43-128 unreserved characters.
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

// sha256 prefix so logs can tell tokens apart without containing them (same as server.ts tokenHash).
function hashOf(token: string): string {
  return sha256(token).toString('hex').slice(0, 12);
}

// PKCE S256: BASE64URL(SHA256(ASCII(code_verifier))) (RFC 7636 §4.2).
export function pkceChallenge(verifier: string): string {
  return sha256(verifier).toString('base64url');
}

// 400 with HubSpot's token-endpoint `status` code plus the v3 Error fields.
function tokenError(code: string, message: string, style: OAuthErrorStyle): SimResponse {
  return style === 'v3'
    ? json(400, { category: 'VALIDATION_ERROR', correlationId: randomUUID(), message })
    : json(400, { status: code, message, correlationId: randomUUID(), category: 'VALIDATION_ERROR' });
}

function validationError(status: number, message: string, category = 'VALIDATION_ERROR'): SimResponse {
  return json(status, { status: 'error', message, correlationId: randomUUID(), category });
}

/** The simulator's OAuth server: apps, installs, codes and tokens, on a clock tests can move forward. */
export class OAuthServer {
  private readonly apps = new Map<string, App>();
  private readonly codes = new Map<string, AuthCode>();
  private readonly refreshTokens = new Map<string, Grant>();
  private readonly accessTokens = new Map<string, AccessToken>();
  private readonly grants: Grant[] = [];
  private readonly installs: InstallDecision[] = [];
  private autoInstall: InstallDecision | null = null;
  private clockOffsetMs = 0;
  private defaultTtlSeconds: number;
  private readonly codeTtlSeconds: number;
  private readonly rotate: boolean;
  private errorStyle: OAuthErrorStyle;
  /** Every access and refresh token issued, for tests that search output for them. */
  private readonly issued: string[] = [];
  private nextAppId = 9001;

  constructor(
    options: OAuthOptions,
    private readonly portalOf: (portalId: number) => Portal | undefined,
    private readonly record: (entry: OAuthLogEntry) => void,
  ) {
    this.defaultTtlSeconds = options.accessTokenTtlSeconds ?? 1800;
    this.codeTtlSeconds = options.authCodeTtlSeconds ?? 300;
    this.rotate = options.rotateRefreshTokens ?? false;
    this.errorStyle = options.errorStyle ?? 'v1';
  }

  setErrorStyle(style: OAuthErrorStyle): void {
    this.errorStyle = style;
  }

  issuedTokens(): string[] {
    return [...this.issued];
  }

  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  advanceClock(seconds: number): void {
    this.clockOffsetMs += seconds * 1000;
  }

  registerApp(config: OAuthAppConfig): void {
    if (this.apps.has(config.clientId)) throw new Error(`app ${config.clientId} already registered`);
    if (config.redirectUris.length === 0) throw new Error('registerApp needs at least one redirect URI');
    this.apps.set(config.clientId, {
      clientId: config.clientId,
      secretHash: sha256(config.clientSecret),
      redirectUris: new Set(config.redirectUris),
      appId: config.appId ?? this.nextAppId++,
      ttlSeconds: config.accessTokenTtlSeconds ?? null,
    });
  }

  setAccessTokenTtl(seconds: number): void {
    this.defaultTtlSeconds = seconds;
    for (const app of this.apps.values()) app.ttlSeconds = null;
  }

  queueInstall(decision: InstallDecision): void {
    this.requirePortal(decision.portalId);
    this.installs.push({ ...decision });
  }

  setAutoInstall(decision: InstallDecision | null): void {
    if (decision) this.requirePortal(decision.portalId);
    this.autoInstall = decision ? { ...decision } : null;
  }

  // App uninstalled from a portal: its refresh tokens stop working and its access tokens answer 401.
  uninstall(portalId: number, clientId?: string): void {
    for (const grant of this.grants) {
      if (grant.portalId !== portalId || (clientId !== undefined && grant.app.clientId !== clientId)) continue;
      grant.uninstalled = true;
      if (grant.refreshToken) this.refreshTokens.delete(grant.refreshToken);
      grant.refreshToken = null;
    }
    for (const [code, entry] of this.codes) {
      if (entry.portalId === portalId && (clientId === undefined || entry.app.clientId === clientId)) this.codes.delete(code);
    }
  }

  // Every install in the portal loses the scope (tokens already issued included).
  removeScope(portalId: number, scope: string): void {
    for (const grant of this.grants) if (grant.portalId === portalId) grant.scopes.delete(scope);
  }

  // Revokes one refresh token only; access tokens already issued keep working until they expire.
  revokeRefreshToken(token: string): boolean {
    const grant = this.refreshTokens.get(token);
    if (!grant) return false;
    this.refreshTokens.delete(token);
    grant.refreshToken = null;
    return true;
  }

  // Revokes one access token; false if it is not an OAuth access token.
  revokeAccessToken(token: string): boolean {
    const access = this.accessTokens.get(token);
    if (!access) return false;
    access.revoked = true;
    return true;
  }

  // Resolves a bearer token of a CMS request; null if it is not an OAuth access token.
  checkAccessToken(token: string): AccessCheck | null {
    const access = this.accessTokens.get(token);
    if (!access) return null;
    const { grant } = access;
    if (access.revoked || grant.uninstalled) return { kind: 'revoked', portalId: grant.portalId, hash: access.hash };
    const now = this.now();
    if (now >= access.expiresAt) return { kind: 'expired', portalId: grant.portalId, expiredMs: now - access.expiresAt, hash: access.hash };
    return {
      kind: 'valid', portalId: grant.portalId, userId: grant.userId, scopes: grant.scopes, hash: access.hash,
      rateKey: `oauth:${grant.app.clientId}:${grant.portalId}`,
    };
  }

  // GET /oauth/authorize: the install page; answers with the redirect the user's browser would follow.
  authorize(query: URLSearchParams, endpoint: string): OAuthResult {
    const clientId = query.get('client_id');
    const redirectUri = query.get('redirect_uri');
    const app = clientId ? this.apps.get(clientId) : undefined;
    const log = (outcome: OAuthOutcome, status: number, portalId: number | null = null): void =>
      this.log({ endpoint, grantType: null, clientId: app?.clientId ?? null, portalId, outcome, status, tokenHash: null });
    if (!app) {
      log('bad_client_id', 400);
      return { response: validationError(400, `Unknown client_id ${clientId ?? '(missing)'}`) };
    }
    if (!redirectUri || !app.redirectUris.has(redirectUri)) {
      log('bad_redirect_uri', 400);
      return { response: validationError(400, 'redirect_uri is missing or not registered for this app') };
    }
    const scope = splitScopes(query.get('scope'));
    if (scope.length === 0) {
      log('bad_request', 400);
      return { response: validationError(400, 'scope is required') };
    }
    const challenge = query.get('code_challenge');
    const method = query.get('code_challenge_method');
    if (challenge !== null && method !== 'S256') {
      log('bad_request', 400);
      return { response: validationError(400, 'code_challenge_method must be S256') };
    }
    if (challenge === null && method !== null) {
      log('bad_request', 400);
      return { response: validationError(400, 'code_challenge_method given without code_challenge') };
    }
    const decision = this.installs.shift() ?? this.autoInstall;
    if (!decision) {
      log('bad_request', 409);
      return { response: validationError(409, 'No install queued in the simulator (queueInstall or setAutoInstall)', 'CONFLICT') };
    }
    const location = new URL(redirectUri);
    const state = query.get('state');
    if (decision.grant === 'deny') {
      location.searchParams.set('error', 'access_denied');
      location.searchParams.set('error_description', 'The user declined to install the app.');
      if (state !== null) location.searchParams.set('state', state);
      log('denied', 302, decision.portalId);
      return { response: { status: 302, body: '' }, headers: { Location: location.toString() } };
    }
    const code = randomUUID();
    this.codes.set(code, {
      app, redirectUri, challenge, portalId: decision.portalId,
      userId: decision.userId ?? 5_000_000 + decision.portalId,
      scopes: decision.scopes ?? [...new Set([...scope, ...splitScopes(query.get('optional_scope'))])],
      expiresAt: this.now() + this.codeTtlSeconds * 1000,
    });
    location.searchParams.set('code', code);
    if (state !== null) location.searchParams.set('state', state);
    log('ok', 302, decision.portalId);
    return { response: { status: 302, body: '' }, headers: { Location: location.toString() } };
  }

  // POST /oauth/v3/token (and the v1 path the official client posts to).
  token(body: URLSearchParams, endpoint: string): OAuthResult {
    const form = tokenForm.safeParse(Object.fromEntries(body));
    const rawGrant = form.success ? form.data.grant_type : undefined;
    const grantType: OAuthLogEntry['grantType'] = rawGrant === 'authorization_code' || rawGrant === 'refresh_token' ? rawGrant : null;
    const entry = { endpoint, grantType, clientId: null as string | null, portalId: null as number | null };
    const fail = (outcome: OAuthOutcome, code: string, message: string): OAuthResult => {
      this.log({ ...entry, outcome, status: 400, tokenHash: null });
      return { response: tokenError(code, message, this.errorStyle) };
    };
    if (!form.success || grantType === null) return fail('bad_grant_type', 'BAD_GRANT_TYPE', 'grant_type must be authorization_code or refresh_token');
    const client = this.authenticate(form.data.client_id, form.data.client_secret);
    if (client.kind !== 'ok') {
      return client.kind === 'bad_client_id'
        ? fail('bad_client_id', 'BAD_CLIENT_ID', 'missing or unknown client id')
        : fail('bad_client_secret', 'BAD_CLIENT_SECRET', 'missing or invalid client secret');
    }
    const app = client.app;
    entry.clientId = app.clientId;
    let grant: Grant;
    if (grantType === 'authorization_code') {
      const code = form.data.code ? this.codes.get(form.data.code) : undefined;
      if (!code || code.app !== app) return fail('bad_auth_code', 'BAD_AUTH_CODE', 'missing or unknown auth code');
      entry.portalId = code.portalId;
      this.codes.delete(form.data.code!); // single use: gone whatever happens next
      if (this.now() >= code.expiresAt) return fail('bad_auth_code', 'BAD_AUTH_CODE', 'auth code expired');
      if (form.data.redirect_uri !== code.redirectUri) {
        return fail('bad_redirect_uri', 'BAD_REDIRECT_URI', 'redirect_uri does not match the one of the authorization request');
      }
      if (code.challenge !== null) {
        const verifier = form.data.code_verifier ?? '';
        if (!VERIFIER.test(verifier) || pkceChallenge(verifier) !== code.challenge) {
          return fail('bad_auth_code', 'BAD_AUTH_CODE', 'code_verifier does not match the code_challenge of this auth code');
        }
      }
      grant = {
        app, portalId: code.portalId, userId: code.userId, scopes: new Set(code.scopes),
        refreshToken: this.newRefreshToken(), uninstalled: false,
      };
      this.grants.push(grant);
      this.refreshTokens.set(grant.refreshToken!, grant);
    } else {
      const found = form.data.refresh_token ? this.refreshTokens.get(form.data.refresh_token) : undefined;
      if (!found || found.app !== app) return fail('bad_refresh_token', 'BAD_REFRESH_TOKEN', 'missing or invalid refresh token');
      grant = found;
      entry.portalId = grant.portalId;
      if (this.rotate) {
        this.refreshTokens.delete(grant.refreshToken!);
        grant.refreshToken = this.newRefreshToken();
        this.refreshTokens.set(grant.refreshToken, grant);
      }
    }
    const ttl = app.ttlSeconds ?? this.defaultTtlSeconds;
    const accessToken = `CO${randomBytes(72).toString('base64url')}`;
    this.issued.push(accessToken);
    const hash = hashOf(accessToken);
    this.accessTokens.set(accessToken, { grant, expiresAt: this.now() + ttl * 1000, revoked: false, hash });
    this.log({ ...entry, outcome: 'ok', status: 200, tokenHash: hash });
    return {
      response: json(200, {
        token_type: 'bearer', refresh_token: grant.refreshToken, access_token: accessToken, expires_in: ttl,
        hub_id: grant.portalId, user_id: grant.userId, scopes: [...grant.scopes], token_use: 'access_token',
      }),
    };
  }

  // POST /oauth/v3/token/introspect.
  introspect(body: URLSearchParams, endpoint: string): OAuthResult {
    const parsed = this.tokenOperation(body, endpoint);
    if ('response' in parsed) return parsed;
    const { app, token } = parsed;
    const log = (outcome: OAuthOutcome, portalId: number | null, tokenHash: string | null): void =>
      this.log({ endpoint, grantType: null, clientId: app.clientId, portalId, outcome, status: 200, tokenHash });
    const access = this.accessTokens.get(token);
    if (access && access.grant.app === app) {
      const check = this.checkAccessToken(token);
      if (check?.kind === 'valid') {
        log('ok', access.grant.portalId, access.hash);
        return { response: json(200, { active: true, token_use: 'access_token', ...this.accessMetadata(token, access) }) };
      }
    }
    const grant = this.refreshTokens.get(token);
    if (grant && grant.app === app) {
      log('ok', grant.portalId, hashOf(token));
      return { response: json(200, { active: true, token_use: 'refresh_token', ...this.refreshMetadata(token, grant), app_id: app.appId }) };
    }
    log('inactive', access?.grant.portalId ?? null, null);
    return { response: json(200, { active: false }) };
  }

  // POST /oauth/v3/token/revoke: deletes a refresh token (access tokens keep working until expiry).
  revoke(body: URLSearchParams, endpoint: string): OAuthResult {
    const parsed = this.tokenOperation(body, endpoint);
    if ('response' in parsed) return parsed;
    const { app, token } = parsed;
    const grant = this.refreshTokens.get(token);
    const mine = grant !== undefined && grant.app === app;
    if (mine) this.revokeRefreshToken(token);
    this.log({
      endpoint, grantType: null, clientId: app.clientId, portalId: mine ? grant.portalId : null,
      outcome: mine ? 'ok' : 'inactive', status: 204, tokenHash: mine ? hashOf(token) : null,
    });
    return { response: { status: 204, body: '' } };
  }

  // GET /oauth/v1/access-tokens/{token} and /oauth/v1/refresh-tokens/{token}.
  metadata(kind: 'access' | 'refresh', token: string, endpoint: string): OAuthResult {
    const base = { endpoint, grantType: null, status: 200 } as const;
    if (kind === 'access') {
      const access = this.accessTokens.get(token);
      if (access && this.checkAccessToken(token)?.kind === 'valid') {
        this.log({ ...base, clientId: access.grant.app.clientId, portalId: access.grant.portalId, outcome: 'ok', tokenHash: access.hash });
        return { response: json(200, this.accessMetadata(token, access)) };
      }
    } else {
      const grant = this.refreshTokens.get(token);
      if (grant) {
        this.log({ ...base, clientId: grant.app.clientId, portalId: grant.portalId, outcome: 'ok', tokenHash: hashOf(token) });
        return { response: json(200, this.refreshMetadata(token, grant)) };
      }
    }
    this.log({ ...base, clientId: null, portalId: null, outcome: 'inactive', status: 404, tokenHash: null });
    return { response: json(404, { status: 'error', message: `${kind} token not found`, correlationId: randomUUID(), category: 'OBJECT_NOT_FOUND' }) };
  }

  // Records a fault injected on an /oauth/* request.
  logFault(endpoint: string, status: number): void {
    this.log({ endpoint, grantType: null, clientId: null, portalId: null, outcome: 'fault', status, tokenHash: null });
  }

  // Logs a request the OAuth handlers refused before reading it (bad content type, oversized body).
  badRequest(endpoint: string, message: string): OAuthResult {
    this.log({ endpoint, grantType: null, clientId: null, portalId: null, outcome: 'bad_request', status: 400, tokenHash: null });
    return { response: validationError(400, message) };
  }

  private accessMetadata(token: string, access: AccessToken): Record<string, unknown> {
    const { grant } = access;
    return {
      token, token_type: 'access', ...this.owner(grant), client_id: grant.app.clientId, app_id: grant.app.appId,
      scopes: [...grant.scopes], expires_in: Math.max(0, Math.floor((access.expiresAt - this.now()) / 1000)),
      is_private_distribution: false,
    };
  }

  private refreshMetadata(token: string, grant: Grant): Record<string, unknown> {
    return { token, token_type: 'refresh', ...this.owner(grant), client_id: grant.app.clientId, scopes: [...grant.scopes] };
  }

  private owner(grant: Grant): Record<string, unknown> {
    return {
      hub_id: grant.portalId, hub_domain: `portal-${grant.portalId}.hubspot.test`,
      user_id: grant.userId, user: `user-${grant.userId}@portal-${grant.portalId}.example.com`,
    };
  }

  private tokenOperation(body: URLSearchParams, endpoint: string): { app: App; token: string } | OAuthResult {
    const form = tokenOpForm.safeParse(Object.fromEntries(body));
    const client = this.authenticate(form.data?.client_id ?? body.get('client_id') ?? undefined, form.data?.client_secret ?? body.get('client_secret') ?? undefined);
    const fail = (outcome: OAuthOutcome, code: string, message: string): OAuthResult => {
      this.log({ endpoint, grantType: null, clientId: client.kind === 'ok' ? client.app.clientId : null, portalId: null, outcome, status: 400, tokenHash: null });
      return { response: tokenError(code, message, this.errorStyle) };
    };
    if (client.kind === 'bad_client_id') return fail('bad_client_id', 'BAD_CLIENT_ID', 'missing or unknown client id');
    if (client.kind === 'bad_client_secret') return fail('bad_client_secret', 'BAD_CLIENT_SECRET', 'missing or invalid client secret');
    if (!form.success) return fail('bad_request', 'BAD_REQUEST', 'token is required; token_type_hint must be access_token or refresh_token');
    return { app: client.app, token: form.data.token };
  }

  private authenticate(clientId: string | undefined, secret: string | undefined):
    { kind: 'ok'; app: App } | { kind: 'bad_client_id' } | { kind: 'bad_client_secret' } {
    const app = clientId ? this.apps.get(clientId) : undefined;
    if (!app) return { kind: 'bad_client_id' };
    if (secret === undefined || !timingSafeEqual(sha256(secret), app.secretHash)) return { kind: 'bad_client_secret' };
    return { kind: 'ok', app };
  }

  private newRefreshToken(): string {
    const token = `na1-${randomUUID()}`;
    this.issued.push(token);
    return token;
  }

  private requirePortal(portalId: number): void {
    if (!this.portalOf(portalId)) throw new Error(`unknown portal ${portalId}`);
  }

  private log(entry: Omit<OAuthLogEntry, 'at'>): void {
    this.record({ at: Date.now(), ...entry });
  }
}

function splitScopes(value: string | null): string[] {
  return value ? value.split(/\s+/).filter((s) => s.length > 0) : [];
}
