// HubSpot-style error bodies and the small helper that writes a response.

import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';

export interface SimResponse {
  status: number;
  /** The body: text, or UTF-8 bytes already encoded (list pages, copied together from cached items). */
  body: string | Buffer;
  contentType?: string;
}

const JSON_TYPE = 'application/json;charset=utf-8';

// JSON response from a plain object.
export function json(status: number, body: unknown): SimResponse {
  return { status, body: JSON.stringify(body), contentType: JSON_TYPE };
}

// 200 response from an already serialised JSON string.
export function rawJson(body: string | Buffer): SimResponse {
  return { status: 200, body, contentType: JSON_TYPE };
}

// 401 as HubSpot sends it for a missing, unknown or revoked token.
export function unauthorized(hadToken: boolean): SimResponse {
  const message = hadToken
    ? 'The OAuth token used to make this call expired or has been revoked. Reconnect the app to get a new token.'
    : 'Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview';
  return json(401, { status: 'error', message, correlationId: randomUUID(), category: 'INVALID_AUTHENTICATION' });
}

// 401 as HubSpot sends it for an OAuth access token past its expiry (sources: oauth.ts header).
export function expiredAuthentication(expiredMs: number): SimResponse {
  const minutes = Math.floor(expiredMs / 60_000);
  return json(401, {
    status: 'error',
    message: `The OAuth token used to make this call expired ${minutes} minute(s) ago.`,
    correlationId: randomUUID(),
    category: 'EXPIRED_AUTHENTICATION',
  });
}

// 403 for a token that lacks the scope an endpoint needs.
export function missingScopes(scope: string): SimResponse {
  return json(403, {
    status: 'error',
    message: "This app hasn't been granted all required scopes to make this call. Read more about required scopes here: https://developers.hubspot.com/scopes.",
    correlationId: randomUUID(),
    errors: [{ message: 'One or more of the following scopes are required.', context: { requiredGranularScopes: [scope] } }],
    links: { scopes: 'https://developers.hubspot.com/scopes' },
    category: 'MISSING_SCOPES',
  });
}

// 429 for the ten-secondly rolling limit or the daily limit.
export function rateLimited(policy: 'TEN_SECONDLY_ROLLING' | 'DAILY', portalId: number): SimResponse {
  const tenSecondly = policy === 'TEN_SECONDLY_ROLLING';
  return json(429, {
    status: 'error',
    message: tenSecondly ? 'You have reached your ten_secondly_rolling limit.' : 'You have reached your daily limit.',
    errorType: 'RATE_LIMIT',
    correlationId: randomUUID(),
    policyName: policy,
    groupName: `publicapi:private_app-api-calls-${tenSecondly ? 'ten-secondly' : 'daily'}:1000001:${portalId}`,
  });
}

// 404 for unknown routes and unknown HubDB tables.
export function notFound(message = 'Resource not found'): SimResponse {
  return json(404, { status: 'error', message, correlationId: randomUUID(), category: 'OBJECT_NOT_FOUND' });
}

// 400 for bad query parameters.
export function badRequest(message: string): SimResponse {
  return json(400, { status: 'error', message, correlationId: randomUUID(), category: 'VALIDATION_ERROR' });
}

// 400 VALIDATION_ERROR for one field of a single-object write (the spec's Error, with its detail).
export function invalidField(message: string, field: string, code: string): SimResponse {
  return json(400, {
    status: 'error', message, correlationId: randomUUID(), category: 'VALIDATION_ERROR',
    context: { properties: [field] }, errors: [{ message, in: field, code }],
  });
}

// 204 No Content (push-live, schedule).
export function noContent(): SimResponse {
  return { status: 204, body: '' };
}

/** One input's failure inside a batch answer (the spec's StandardError). */
export interface StandardError {
  status: string;
  category: string;
  message: string;
  context: Record<string, string[]>;
  errors: { message: string; in?: string; code?: string }[];
  links: Record<string, string>;
}

// An input whose id names nothing (in the archive, when the request asked for it).
export function inputNotFound(id: string): StandardError {
  return { status: 'error', category: 'OBJECT_NOT_FOUND', message: `Object not found: ${id}`, context: { ids: [id] }, errors: [], links: {} };
}

// An input refused for one field.
export function inputInvalid(id: string, problem: { field: string; message: string; code: string }): StandardError {
  return {
    status: 'error', category: 'VALIDATION_ERROR', message: problem.message, context: { ids: [id], properties: [problem.field] },
    errors: [{ message: problem.message, in: problem.field, code: problem.code }], links: {},
  };
}

// A batch answer: 200 BatchResponse<Item> when every input succeeded, else 207 …WithErrors (results: each item's wire JSON).
export function batchAnswer(startedMs: number, completedMs: number, results: readonly string[], errors: readonly StandardError[]): SimResponse {
  const times = `"startedAt":"${new Date(startedMs).toISOString()}","completedAt":"${new Date(completedMs).toISOString()}"`;
  const failed = errors.length === 0 ? '' : `,"numErrors":${errors.length},"errors":${JSON.stringify(errors)}`;
  return {
    status: errors.length === 0 ? 200 : 207,
    body: `{"status":"COMPLETE","results":[${results.join(',')}]${failed},${times}}`,
    contentType: JSON_TYPE,
  };
}

// Injected server error: 502 arrives as an HTML gateway page (as from HubSpot's edge), others as JSON.
export function serverError(status: number): SimResponse {
  if (status === 502) {
    return { status, body: '<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>', contentType: 'text/html; charset=UTF-8' };
  }
  return json(status, { status: 'error', message: 'An internal error occurred.', correlationId: randomUUID(), category: 'INTERNAL_ERROR' });
}

// Writes status, headers and body.
export function send(res: ServerResponse, response: SimResponse, headers: Record<string, string>): void {
  res.writeHead(response.status, {
    ...headers,
    'Content-Type': response.contentType ?? JSON_TYPE,
    'Content-Length': String(Buffer.byteLength(response.body)),
  });
  res.end(response.body);
}
