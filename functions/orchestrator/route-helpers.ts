// What the orchestrator's routes share: parsing a body or a query (400 with
// field errors), and the error answers more than one route gives.
import type { z } from 'zod';
import type { VerifiedUser } from '../../shared/auth.ts';
import { HubSpotAccessRemoved, HubSpotAuthError, HubSpotError } from '../../shared/hubspot/errors.ts';
import { StoredTokenUnreadable } from '../../shared/hubspot/portal-tokens.ts';
import { HttpError } from '../../shared/http.ts';
import { userExists } from '../../shared/sql/ops.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import type { OrchestratorDeps } from './deps.ts';
import { fieldErrors } from './schemas.ts';

export function notFound(): HttpError {
  return new HttpError(404, 'ROUTE_NOT_FOUND', 'No such endpoint: see openapi.json for the ones there are.');
}

export function rateLimited(waitMs: number): HttpError {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  return new HttpError(429, 'RATE_LIMITED', `Too many changes in a short time: try again in ${seconds} s.`, { retryAfterSeconds: seconds }, { 'Retry-After': String(seconds) });
}

export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw new HttpError(400, 'INVALID_BODY', 'The request body is not valid.', { fieldErrors: fieldErrors(r.error) });
  return r.data;
}

export function parseQuery<T extends z.ZodType>(schema: T, req: Request, hint: string): z.infer<T> {
  const r = schema.safeParse(Object.fromEntries(new URL(req.url).searchParams));
  if (!r.success) throw new HttpError(400, 'INVALID_QUERY', hint, { fieldErrors: fieldErrors(r.error) });
  return r.data;
}

export function allDuplicates(types: readonly string[], runIds: Record<string, string>): HttpError {
  return new HttpError(409, 'ALL_DUPLICATE_JOBS', 'Every requested content type is already part of a run in flight for this portal (see duplicateRunIds).', {
    duplicateTypes: types,
    duplicateRunIds: runIds,
  });
}

export function hubspotFailure(e: unknown): HttpError {
  if (e instanceof HubSpotAccessRemoved) return new HttpError(424, 'HUBSPOT_DISCONNECTED', e.message);
  if (e instanceof StoredTokenUnreadable) return new HttpError(424, 'HUBSPOT_CREDENTIALS_UNREADABLE', `${e.message} Nothing was created.`);
  if (e instanceof HubSpotAuthError) return new HttpError(424, 'HUBSPOT_AUTH_FAILED', e.message);
  if (e instanceof HubSpotError) return new HttpError(502, 'HUBSPOT_UNAVAILABLE', `${e.message} Nothing was created; try again.`);
  throw e;
}

export function keysMissing(): HttpError {
  return new HttpError(503, 'TOKEN_KEYS_MISSING', 'This orchestrator cannot store HubSpot tokens: HUBSPOT_TOKEN_KEYS is not set. Nothing was stored.');
}

/** The encryption keys, or 503 before anything is asked or written. */
export function requireKeys(deps: OrchestratorDeps): TokenKeyring {
  if (!deps.tokenKeys) throw keysMissing();
  return deps.tokenKeys;
}

/** 401 when the signed-in user was deleted since their token was issued (nothing can be connected to them). */
export async function requireExistingUser(deps: OrchestratorDeps, user: VerifiedUser): Promise<void> {
  if (!(await userExists(deps.sql, user.userId))) throw new HttpError(401, 'UNAUTHENTICATED', 'Your user no longer exists: sign in again.');
}
