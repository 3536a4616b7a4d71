// HubSpot's OAuth endpoints (api-paths.ts: v3): the token endpoint (a refresh, an install's
// code exchange) and introspection. Each request is one form POST built by
// @hubspot/api-client's request builder (the client generates only the
// deprecated v1 OAuth paths); a refusal becomes an OAuthTokenError that says
// whether the refresh token is gone or the app's client id or secret was
// refused, and never carries a token, code or secret.
import { Request } from '@hubspot/api-client/lib/src/services/http/Request.js';
import { secretRedactor } from '../redact.ts';
import { apiEndpoint } from './api-paths.ts';
import { HubSpotError } from './errors.ts';

/** Where HubSpot's OAuth endpoints are, unless a base path is given (the simulator's, in tests). */
export const OAUTH_DEFAULT_BASE_PATH = 'https://api.hubapi.com';
/** Timeout of one token request, unless the caller gives one. */
export const TOKEN_REQUEST_TIMEOUT_MS = 15_000;

export interface OAuthTokenResponse {
  accessToken: string;
  /** The refresh token HubSpot answered (null when it sent none: keep the one you have). */
  refreshToken: string | null;
  expiresIn: number;
  tokenType: string | null;
  /** The portal the token is for (`hub_id`), when HubSpot says. */
  hubId: number | null;
  scopes: string[] | null;
  /** When the request was sent (ms, this clock). */
  requestedAt: number;
}

/**
 * HubSpot's OAuth endpoints refused or failed. Never carries a token, code or secret.
 *
 * Error bodies: HubSpot's v3 spec (PublicApiSpecs/Auth/Oauth, v3 oauth.json) defines
 * only {category, correlationId, message, subCategory?, context?, errors?, links?};
 * the v1 endpoints answer {status: 'BAD_REFRESH_TOKEN', message, ...}, and HubSpot's
 * changelog adds RFC 6749's {error: 'invalid_grant', error_description} next to
 * them. So a known code decides when one is there; when none is, a refused refresh
 * is settled by introspecting the refresh token (refreshOutcome).
 */
export class OAuthTokenError extends HubSpotError {
  /** HubSpot's error code (`status` field, e.g. BAD_REFRESH_TOKEN; or the OAuth `error`), when it sent one. */
  readonly code: string | null;
  /** The refresh token is known to be no longer valid (app uninstalled, token revoked): reconnect. */
  readonly revoked: boolean;
  /** HubSpot refused the app's client id or secret: an operator must fix the configuration. */
  readonly clientRejected: boolean;

  constructor(message: string, opts: {
    status: number | null; code: string | null; revoked: boolean; retryable: boolean; clientRejected?: boolean;
    correlationId?: string | null;
  }) {
    super(message, opts.retryable, { status: opts.status, category: opts.code, correlationId: opts.correlationId ?? null });
    this.code = opts.code;
    this.revoked = opts.revoked;
    this.clientRejected = opts.clientRejected ?? false;
  }
}

/** Codes that mean the refresh token is gone (v1 `status`, RFC 6749 `error`). */
const REVOKED_CODES = new Set(['BAD_REFRESH_TOKEN', 'invalid_grant']);
/** Codes that mean the app's client id or secret was refused. */
const CLIENT_CODES = new Set(['BAD_CLIENT_ID', 'BAD_CLIENT_SECRET', 'invalid_client', 'unauthorized_client']);

export interface TokenEndpointOptions {
  basePath?: string;
  requestTimeoutMs?: number;
  signal?: AbortSignal;
}

/** POSTs a form to one of HubSpot's OAuth endpoints; a 2xx JSON body, else OAuthTokenError. */
async function postOAuthForm(opts: TokenEndpointOptions, path: string, form: Record<string, string>): Promise<{ body: Record<string, unknown>; status: number; requestedAt: number }> {
  const basePath = (opts.basePath ?? OAUTH_DEFAULT_BASE_PATH).replace(/\/+$/, '');
  const request = new Request({ basePath }, {
    method: 'POST',
    path,
    body: new URLSearchParams(form).toString(),
    defaultJson: false,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded;charset=utf-8' },
  });
  const secrets = Object.entries(form).filter(([k]) => !['grant_type', 'client_id', 'redirect_uri', 'token_type_hint'].includes(k)).map(([, v]) => v);
  const redact = secretRedactor(secrets);
  const timeout = AbortSignal.timeout(opts.requestTimeoutMs ?? TOKEN_REQUEST_TIMEOUT_MS);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  const requestedAt = Date.now();
  const what = path.endsWith('/introspect') ? 'introspection' : 'token';
  let status: number;
  let text: string;
  try {
    const response = await fetch(request.getUrl(), { ...(request.getSendData() as RequestInit), signal });
    status = response.status;
    text = await response.text();
  } catch {
    opts.signal?.throwIfAborted();
    const why = timeout.aborted ? 'no answer in time' : 'connection failed';
    throw new OAuthTokenError(`HubSpot's ${what} endpoint is unreachable (${why}).`, { status: null, code: null, revoked: false, retryable: true });
  }
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: judged by status below
  }
  if (status >= 200 && status < 300) return { body, status, requestedAt };
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  const code = (str(body['status']) !== 'error' ? str(body['status']) : null) ?? str(body['error']);
  const correlationId = str(body['correlationId']);
  const retryable = status === 429 || status >= 500;
  const clientRejected = !retryable && code !== null && CLIENT_CODES.has(code);
  const revoked = !retryable && !clientRejected && code !== null && REVOKED_CODES.has(code) && form['grant_type'] === 'refresh_token';
  const message = str(body['message']) ?? str(body['error_description']);
  throw new OAuthTokenError(
    `HubSpot's ${what} endpoint refused the request with HTTP ${status}${code ? ` ${code}` : ''}${message ? `: ${redact(message).slice(0, 300)}` : ''}.`,
    { status, code, revoked, retryable, clientRejected, correlationId },
  );
}

/**
 * POSTs a form to HubSpot's token endpoint (/oauth/v3/token): grant_type
 * refresh_token or authorization_code with the app's client_id and client_secret.
 */
export async function postOAuthToken(opts: TokenEndpointOptions, form: Record<string, string>): Promise<OAuthTokenResponse> {
  const { body, status, requestedAt } = await postOAuthForm(opts, apiEndpoint('oauth_token').template, form);
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  const accessToken = str(body['access_token']);
  const expiresIn = Number(body['expires_in']);
  if (!accessToken || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new OAuthTokenError('HubSpot\'s token endpoint answered without an access token or lifetime.', { status, code: null, revoked: false, retryable: true });
  }
  const hubId = Number(body['hub_id']);
  return {
    accessToken,
    refreshToken: str(body['refresh_token']),
    expiresIn,
    tokenType: str(body['token_type']),
    hubId: Number.isSafeInteger(hubId) && hubId > 0 ? hubId : null,
    scopes: Array.isArray(body['scopes']) ? body['scopes'].filter((s): s is string => typeof s === 'string') : null,
    requestedAt,
  };
}

/**
 * HubSpot's introspection endpoint (POST /oauth/v3/token/introspect): whether a
 * token is still active (false for an unknown, expired or revoked token, or one
 * of another app). Throws OAuthTokenError when HubSpot refuses (e.g. the app's
 * client id or secret) or fails.
 */
export async function introspectOAuthToken(
  opts: TokenEndpointOptions,
  input: { clientId: string; clientSecret: string; token: string; tokenTypeHint?: 'refresh_token' | 'access_token' },
): Promise<{ active: boolean; hubId: number | null }> {
  const { body, status } = await postOAuthForm(opts, apiEndpoint('oauth_introspect').template, {
    client_id: input.clientId,
    client_secret: input.clientSecret,
    token: input.token,
    ...(input.tokenTypeHint ? { token_type_hint: input.tokenTypeHint } : {}),
  });
  if (typeof body['active'] !== 'boolean') {
    throw new OAuthTokenError('HubSpot\'s introspection endpoint answered without "active".', { status, code: null, revoked: false, retryable: true });
  }
  const hubId = Number(body['hub_id']);
  return { active: body['active'], hubId: Number.isSafeInteger(hubId) && hubId > 0 ? hubId : null };
}

