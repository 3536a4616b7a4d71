// Errors the HubSpot client wrapper throws; built from status + body only, never from request data.

export interface HubSpotErrorDetails {
  status: number | null; // HTTP status, null when no response arrived
  category?: string | null; // HubSpot's `category` / `policyName`
  correlationId?: string | null;
}

/** Base class: every wrapper error says whether retrying later can help. */
export class HubSpotError extends Error {
  readonly retryable: boolean;
  readonly status: number | null;
  readonly category: string | null;
  readonly correlationId: string | null;

  constructor(message: string, retryable: boolean, details: HubSpotErrorDetails) {
    super(message);
    this.name = new.target.name;
    this.retryable = retryable;
    this.status = details.status;
    this.category = details.category ?? null;
    this.correlationId = details.correlationId ?? null;
  }

  // Plain JSON form (no stack, no request data) for logs and job rows.
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      message: this.message,
      retryable: this.retryable,
      status: this.status,
      category: this.category,
      correlationId: this.correlationId,
    };
  }
}

/** 401/403: the token is invalid, revoked or lacks scopes. Permanent until the user reconnects. */
export class HubSpotAuthError extends HubSpotError {
  constructor(status: number, category: string | null, hubspotMessage: string | null, correlationId: string | null = null, message?: string) {
    const what = status === 403
      ? 'HubSpot refused access: the connection is missing a required permission'
      : 'HubSpot rejected the access token (expired, revoked or invalid)';
    const detail = [category, hubspotMessage].filter(Boolean).join(': ');
    super(message ?? `${what}${detail ? ` (${detail})` : ''}. Please reconnect HubSpot and try again.`, false, { status, category, correlationId });
  }
}

/**
 * 403 MISSING_SCOPES: the connection lacks a scope this call needs. Permanent for
 * this content type only; the message names the scope(s).
 */
export class HubSpotMissingScopes extends HubSpotAuthError {
  readonly scopes: readonly string[];

  constructor(scopes: readonly string[], correlationId: string | null = null) {
    const names = scopes.length ? scopes.map((s) => `"${s}"`).join(', ') : 'a required scope (HubSpot did not say which)';
    super(403, 'MISSING_SCOPES', null, correlationId,
      `HubSpot refused access: the connection is missing the scope ${names} (MISSING_SCOPES). Reconnect the portal granting it, then try again.`);
    this.scopes = [...scopes];
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), scopes: this.scopes };
  }
}

/**
 * HubSpot access to the portal is gone (the app was uninstalled, the refresh
 * token refused): the portal is marked disconnected. Permanent: no retry helps.
 * The message is the database's (private.access_removed_message), the one every
 * job of the portal ends with.
 */
export class HubSpotAccessRemoved extends HubSpotError {
  readonly reason: string;

  constructor(reason: string, message: string, details: HubSpotErrorDetails = { status: null }) {
    super(message, false, details);
    this.reason = reason;
  }
}

/**
 * HubSpot refused the app's own credentials (client id or secret) while
 * refreshing a portal's token: no portal is at fault and reconnecting does not
 * help; an operator must fix HUBSPOT_CLIENT_ID / HUBSPOT_CLIENT_SECRET. Retryable,
 * so jobs wait (with backoff) for the fix instead of failing at once.
 */
export class HubSpotOAuthAppRejected extends HubSpotError {
  constructor(code: string | null, status: number | null, correlationId: string | null = null) {
    super(
      `HubSpot refused this app's client credentials${code ? ` (${code})` : ''} while refreshing the portal's access token: ` +
        'an operator must check HUBSPOT_CLIENT_ID and HUBSPOT_CLIENT_SECRET. The job is retried.',
      true,
      { status, category: code, correlationId },
    );
  }
}

/** 429 that persisted after bounded waiting; retry after `retryAfterMs`. */
export class HubSpotRateLimitError extends HubSpotError {
  readonly retryAfterMs: number;
  readonly policy: string | null;

  constructor(retryAfterMs: number, policy: string | null, correlationId: string | null = null) {
    super(
      `HubSpot rate limit reached${policy ? ` (${policy})` : ''}; retry in ${Math.ceil(retryAfterMs / 1000)} s.`,
      true,
      { status: 429, category: policy, correlationId },
    );
    this.retryAfterMs = retryAfterMs;
    this.policy = policy;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), retryAfterMs: this.retryAfterMs, policy: this.policy };
  }
}

/** 5xx, timeouts and dropped connections that outlasted our retries. */
export class HubSpotTransientError extends HubSpotError {
  constructor(reason: string, status: number | null, correlationId: string | null = null) {
    super(`HubSpot is temporarily unavailable: ${reason}.`, true, { status, correlationId });
  }
}

/** Any other 4xx (bad request, unknown object): retrying the same request will not help. */
export class HubSpotRequestError extends HubSpotError {
  constructor(status: number, category: string | null, hubspotMessage: string | null, correlationId: string | null = null) {
    super(`HubSpot rejected the request with HTTP ${status}${hubspotMessage ? `: ${hubspotMessage}` : ''}.`, false, { status, category, correlationId });
  }
}

/**
 * Waiting any longer (for a response, a retry, `Retry-After` or the shared
 * request budget) would run past the caller's deadline. Nothing is wrong with
 * HubSpot or the job: checkpoint and hand the job back (no attempt used).
 */
export class DeadlineReached extends Error {
  override name = 'DeadlineReached';
  readonly retryable = true;
  /** The wait that did not fit, in ms (null when no particular wait was asked for). */
  readonly waitMs: number | null;

  constructor(message: string, waitMs: number | null = null) {
    super(message);
    this.waitMs = waitMs;
  }
}
