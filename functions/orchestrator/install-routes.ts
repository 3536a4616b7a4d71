// The OAuth install routes: start (a state bound to the user, stored hashed,
// and HubSpot's authorize URL with the PKCE challenge) and complete (the
// state consumed once, the code exchanged, the portal connected with its
// tokens sealed). Nothing is written for a refused state or a denied install.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { OAuthTokenError, postOAuthToken } from '../../shared/hubspot/oauth-http.ts';
import { connectOAuthPortal } from '../../shared/hubspot/portal-connect.ts';
import { HttpError, json } from '../../shared/http.ts';
import { recordHubSpotRequest, recordHubSpotTimeZone } from '../../shared/sql/budget.ts';
import { consumeInstallState, createInstallState } from '../../shared/sql/oauth-install.ts';
import { portalNameOf } from '../../shared/sql/portals.ts';
import type { OAuthInstallConfig, OrchestratorDeps } from './deps.ts';
import { authorizeUrl, installStateHash, newInstallState, pkceChallenge, pkceVerifier } from './oauth-install.ts';
import { hubspotFailure, parse, requireExistingUser, requireKeys } from './route-helpers.ts';
import { completeInstallBody, type startInstallBody } from './schemas.ts';

/** The install configuration, or 501 (nothing is done without it). */
function requireInstall(deps: OrchestratorDeps): OAuthInstallConfig {
  if (!deps.oauthInstall) {
    throw new HttpError(501, 'OAUTH_NOT_CONFIGURED',
      'Connecting with HubSpot OAuth is not configured here (HUBSPOT_CLIENT_ID, HUBSPOT_CLIENT_SECRET, HUBSPOT_REDIRECT_URI). Connect with a private app token instead.');
  }
  return deps.oauthInstall;
}

/** Starts an install: a state bound to the user (stored hashed), and HubSpot's authorize URL with it and the PKCE challenge. */
export async function startInstall(deps: OrchestratorDeps, user: VerifiedUser, _body: z.infer<typeof startInstallBody>): Promise<Response> {
  const cfg = requireInstall(deps);
  requireKeys(deps);
  await requireExistingUser(deps, user);
  const state = newInstallState();
  const expiresAt = await createInstallState(deps.sql, user.userId, await installStateHash(state));
  const challenge = await pkceChallenge(await pkceVerifier(cfg.clientSecret, state));
  deps.log.info('hubspot_install_started', { user_id: user.userId });
  return json(200, { authorizeUrl: authorizeUrl(cfg, state, challenge), expiresAt: expiresAt.toISOString() });
}

/**
 * Completes an install with the redirect's parameters: the state must be one
 * this user started, unexpired and unused (consumed here, once); then the code
 * is exchanged at HubSpot's v3 token endpoint with the PKCE verifier, and the
 * portal (hub id from the token answer) is connected to the user with its
 * tokens encrypted. Nothing is written for a refused state or a denied install.
 */
export async function completeInstall(deps: OrchestratorDeps, user: VerifiedUser, raw: unknown): Promise<Response> {
  const cfg = requireInstall(deps);
  const body = parse(completeInstallBody, raw);
  const keys = requireKeys(deps);
  await requireExistingUser(deps, user);
  if (!(await consumeInstallState(deps.sql, user.userId, await installStateHash(body.state)))) {
    throw new HttpError(400, 'OAUTH_STATE_INVALID',
      'This install cannot be completed: its state is unknown, expired (an install must finish before the expiresAt its start answered), already used, or was started by another user. Start connecting again. Nothing was connected.');
  }
  if (body.error !== undefined) {
    deps.log.info('hubspot_install_denied', { user_id: user.userId, error: body.error });
    if (body.error === 'access_denied') {
      throw new HttpError(403, 'HUBSPOT_ACCESS_DENIED', 'HubSpot access was not granted: the install was cancelled on HubSpot, so no portal was connected. Start connecting again and approve the app to connect a portal.');
    }
    throw new HttpError(400, 'HUBSPOT_INSTALL_FAILED', `HubSpot did not complete the install (${body.error}): no portal was connected. Start connecting again.`);
  }
  let token;
  try {
    token = await postOAuthToken({ basePath: cfg.tokenBasePath, requestTimeoutMs: cfg.requestTimeoutMs }, {
      grant_type: 'authorization_code',
      client_id: cfg.clientId,
      client_secret: cfg.clientSecret,
      redirect_uri: cfg.redirectUri,
      code: body.code!,
      code_verifier: await pkceVerifier(cfg.clientSecret, body.state),
    });
  } catch (e) {
    throw tokenExchangeFailure(deps, e);
  }
  if (!token.refreshToken) throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot answered the install without a refresh token; nothing was stored. Start connecting again.');
  let hubspotPortalId = token.hubId;
  let timeZone: unknown;
  if (hubspotPortalId === null) {
    // An answer without hub_id: the account details of the new token say which portal it is (counted in its budget).
    try {
      const details = await deps.hubspotClient({ accessToken: token.accessToken }, null).accountDetails();
      hubspotPortalId = Number(details.portalId);
      timeZone = details.timeZone;
    } catch (e) {
      throw hubspotFailure(e);
    }
    if (Number.isSafeInteger(hubspotPortalId) && hubspotPortalId > 0) await recordHubSpotRequest(deps.sql, hubspotPortalId);
  } else if (Number.isSafeInteger(hubspotPortalId) && hubspotPortalId > 0) {
    // The account's time zone (where its daily limit resets): best effort, the install does not depend on it.
    timeZone = await deps.hubspotClient({ accessToken: token.accessToken }, String(hubspotPortalId), 'oauth').accountDetails()
      .then((d) => d.timeZone, () => undefined);
  }
  if (timeZone !== undefined && Number.isSafeInteger(hubspotPortalId) && hubspotPortalId! > 0) await recordHubSpotTimeZone(deps.sql, hubspotPortalId!, timeZone);
  if (!Number.isSafeInteger(hubspotPortalId) || hubspotPortalId <= 0) {
    throw new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not say which portal was installed; nothing was stored. Start connecting again.');
  }
  const existing = await portalNameOf(deps.sql, user.userId, hubspotPortalId);
  const name = body.name ?? existing ?? `HubSpot portal ${hubspotPortalId}`;
  const portalId = await connectOAuthPortal(deps.sql, keys, {
    ownerId: user.userId,
    hubspotPortalId,
    name,
    accessToken: token.accessToken,
    refreshToken: token.refreshToken,
    expiresInSeconds: token.expiresIn,
    requestedAt: token.requestedAt,
    scopes: token.scopes,
    refreshMarginSeconds: cfg.refreshMarginSeconds,
  });
  deps.log.info('portal_connected', { portal_id: portalId, hubspot_portal_id: hubspotPortalId, auth_kind: 'oauth', reconnect: existing !== null });
  return json(201, { portalId, hubspotPortalId, name });
}

/** What a failed code exchange tells the caller; the code is spent either way. */
function tokenExchangeFailure(deps: OrchestratorDeps, e: unknown): HttpError {
  if (!(e instanceof OAuthTokenError)) throw e;
  deps.log.warn('hubspot_code_exchange_failed', { status: e.status, code: e.code, retryable: e.retryable, correlation_id: e.correlationId });
  if (e.retryable) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', 'HubSpot did not answer the install in time; nothing was connected. Start connecting again.');
  if (e.code === 'BAD_AUTH_CODE' || e.code === 'invalid_grant') {
    return new HttpError(400, 'HUBSPOT_CODE_REJECTED', 'HubSpot refused the install code (expired or already used); nothing was connected. Start connecting again.');
  }
  // A refused client id, secret or redirect URL is this deployment's configuration, not the user's doing.
  return new HttpError(502, 'HUBSPOT_OAUTH_REJECTED', 'HubSpot refused this app\'s OAuth settings (client id, secret or redirect URL): the operator must check them. Nothing was connected.');
}
